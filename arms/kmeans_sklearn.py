"""scikit-learn's ``KMeans`` on the host array (every host core, its OpenMP default).

Lloyd from the shared seeds: ``KMeans(n_clusters=K, init=seeds, n_init=1, algorithm="lloyd", tol=0,
max_iter=n_iter)``. With tol 0 its loop ends after ``n_iter`` iterations or at a fixed point (no label changed,
its "strict convergence"), whichever comes first; ``n_iter_`` says which. Its fit also centers a copy of X
(``copy_x``), computes the squared row norms and, when the loop did not end at a fixed point, runs one more
assignment for the labels of the final centers: the timed call is the whole ``fit``, the library's own cost,
as in the GMM protocol. Own fit: ``KMeans(n_clusters=K, random_state=seed)``, every other parameter at its
default (greedy k-means++, ``n_init="auto"`` = 1 run, Lloyd, tol 1e-4 of the mean column variance, at most 300
iterations). ConvergenceWarning is silenced (a fit with fewer distinct points than clusters warns).
"""
from __future__ import annotations

import warnings

from arms.kmeans import KMeansFit

MEMORY = "rss"


def available() -> str | None:
    try:
        import sklearn.cluster  # noqa: F401
    except ImportError as e:
        return f"scikit-learn not installed: {e}"
    return None


def _threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return sorted({p["num_threads"] for p in threadpool_info()})


def _fit(km, X_host):
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        km.fit(X_host)
    return km


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    from sklearn.cluster import KMeans

    init = seeds.detach().cpu().numpy()
    K = init.shape[0]
    info = {"device": "cpu (numpy)", "host_threads": _threads(), "algorithm": "lloyd"}

    def run() -> KMeansFit:
        km = _fit(KMeans(n_clusters=K, init=init, n_init=1, max_iter=n_iter, tol=0.0, algorithm="lloyd"), X_host)
        return KMeansFit(km.cluster_centers_, int(km.n_iter_), dict(info, inertia_reported=float(km.inertia_)))

    return run


def prepare_fit(X, X_host, K, opts):
    from sklearn.cluster import KMeans

    info = {"device": "cpu (numpy)", "input": "host array", "host_threads": _threads()}

    def run() -> KMeansFit:
        km = _fit(KMeans(n_clusters=K, random_state=opts["seed"]), X_host)
        return KMeansFit(km.cluster_centers_, int(km.n_iter_),
                         dict(info, inertia_reported=float(km.inertia_), init=str(km.init), n_init=str(km.n_init),
                              tol=float(km.tol), max_iter=int(km.max_iter), algorithm=km.algorithm))

    return run
