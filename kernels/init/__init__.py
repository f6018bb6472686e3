"""Initializations: k-means (Lloyd on the GPU, ``kmeans``), k-means++ seeding and scikit-learn's
random and random-from-data responsibilities (``moments``). Internal: the estimator's ``init_params``
chooses among them."""
