"""Full-covariance Gaussian-mixture EM on fused Triton kernels (no N x K matrix).

``em_step`` runs one iteration, ``fit`` a fixed number, ``estep_statistics`` the E-step alone;
``precisions_cholesky`` makes scikit-learn's precisions_cholesky_ from covariances. Two dataflows
for the score (``products``: per-component products; ``lift``: quadratic features against one
weight matrix) and two algorithms (``one_pass``, ``two_pass``), chosen by turbo_gmm.dispatch."""
from .em import FitResult, StepResult, em_step, estep_statistics, fit
from .parameters import covariances_from_precisions_cholesky, precisions_cholesky

__all__ = ["em_step", "fit", "estep_statistics", "precisions_cholesky", "covariances_from_precisions_cholesky",
           "StepResult", "FitResult"]
