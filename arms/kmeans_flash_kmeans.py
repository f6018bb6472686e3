"""flash-kmeans (PyPI ``flash-kmeans``, pinned 0.3.1): batched Lloyd on Triton kernels, CUDA only.

Driven through ``flash_kmeans.batch_kmeans_Euclid(x, n_clusters, max_iters, tol, init_centroids)`` on the device
tensor as one batch (``X[None]``, a view): per iteration its Triton assignment (distances from x^2 + c^2 - 2 x.c,
its heuristic launch configuration, ``use_heuristic=True``, no autotuning) and its sorted centroid update (an
empty cluster keeps its old centroid). Its stop rule is "largest center shift < tol".

Lloyd from the shared seeds: ``max_iters=n_iter, tol=0`` (a shift is never < 0: exactly ``n_iter`` iterations),
``init_centroids`` a copy of the seeds. It returns the centroids of the last update. Own fit: what
``FlashKMeans(d, k, seed=seed).fit(X)`` runs for a device tensor, with that class's defaults (``niter``, ``tol``
read from its signature: 25 and 1e-8 in 0.3.1): ``torch.manual_seed(seed)``, then ``batch_kmeans_Euclid`` with
``init_centroids=None`` (K rows drawn uniformly with replacement, no k-means++). The arm calls the function the
class calls rather than the class because ``FlashKMeans.train`` drops the iteration count.

Without the package, or where its Triton implementation did not import (its ``__init__`` then falls back to a
torch implementation), or without CUDA, the arm says why instead.
"""
from __future__ import annotations

import inspect

from arms.kmeans import KMeansFit, cuda_reason

MEMORY = "torch"


def _impl():
    """(batch_kmeans_Euclid of the Triton implementation, FlashKMeans), or raises ImportError with the reason."""
    import flash_kmeans
    from flash_kmeans.kmeans_triton_impl import batch_kmeans_Euclid as triton_impl

    if flash_kmeans.batch_kmeans_Euclid is not triton_impl:
        raise ImportError("flash_kmeans fell back to its torch implementation: its Triton kernels did not import")
    return triton_impl, flash_kmeans.FlashKMeans


def available() -> str | None:
    try:
        _impl()
    except Exception as e:  # noqa: BLE001 - a missing package, or a Triton/CUDA import failure: the reason
        return f"flash_kmeans does not import: {type(e).__name__}: {e}"
    return cuda_reason()


def _version() -> str:
    import flash_kmeans

    return str(getattr(flash_kmeans, "__version__", "?"))


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    batch_kmeans, _ = _impl()
    x3 = X[None]
    K = seeds.shape[0]
    info = {"device": str(X.device), "flash_kmeans": _version(), "use_heuristic": True}

    def run() -> KMeansFit:
        _, centroids, it = batch_kmeans(x3, K, max_iters=n_iter, tol=0.0, init_centroids=seeds[None].clone())
        return KMeansFit(centroids[0], int(it), dict(info))

    return run


def prepare_fit(X, X_host, K, opts):
    import torch

    batch_kmeans, FlashKMeans = _impl()
    defaults = {k: p.default for k, p in inspect.signature(FlashKMeans.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    niter, tol = int(defaults["niter"]), float(defaults["tol"])
    x3 = X[None]
    info = {"device": str(X.device), "input": "device tensor", "flash_kmeans": _version(), "init": "random rows",
            "max_iter": niter, "tol": tol, "stop_rule": "max center shift < tol"}

    def run() -> KMeansFit:
        torch.manual_seed(opts["seed"])  # what FlashKMeans.train does before drawing its initial centroids
        torch.cuda.manual_seed_all(opts["seed"])
        _, centroids, it = batch_kmeans(x3, K, max_iters=niter, tol=tol, init_centroids=None)
        return KMeansFit(centroids[0], int(it), dict(info))

    return run
