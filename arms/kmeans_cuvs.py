"""cuVS's k-means (``cuvs.cluster.kmeans``, Python package ``cuvs-cu13`` with pylibraft and the libcuvs wheels).

The Python package loads the same C++ libraries as the cuvs GMM arm, so the arm loads them the same way first
(arms/cuvs.py: the wheels' folder on sys.path, nvJitLink >= 13.3 by path, torch's CUDA libraries), then imports
``cuvs.cluster.kmeans``. X is the torch CUDA tensor (CUDA array interface, no copy); one ``cuvs.common.Resources``
per prepared cell, as a user fitting in a loop keeps one, so handle and cuBLAS set-up stay out of the clock.

Lloyd from the shared seeds: ``fit(KMeansParams(n_clusters=K, init_method="Array", max_iter=n_iter, tol=0), X,
centroids=<copy of the seeds>)`` (the centroids array is written in place; cuVS stops when the relative change of
inertia is below tol, never at 0 before a fixed point). Own fit: ``fit(KMeansParams(n_clusters=K), X)``, its
defaults (scalable k-means++, k-means||; its own fixed seed: the Python API takes none; max_iter and tol as
recorded in ``info``). Without CUDA, or where the libraries or the package do not load, the arm says why.
"""
from __future__ import annotations

from arms.kmeans import KMeansFit, cuda_reason

MEMORY = "torch"  # torch's allocations only (X, the seeds): cuVS allocates through RMM, which torch does not see


def _kmeans():
    """(cuvs.cluster.kmeans, cuvs.common.Resources), or raises with the reason it does not load."""
    from arms import cuvs as cuvs_arm

    reason = cuvs_arm.preload()
    if reason:
        raise ImportError(reason)
    cuvs_arm._load_cuda_dependencies()
    from cuvs.cluster import kmeans
    from cuvs.common import Resources

    return kmeans, Resources


def available() -> str | None:
    reason = cuda_reason()
    if reason:
        return f"cuVS {reason}"
    try:
        _kmeans()
    except Exception as e:  # noqa: BLE001 - a missing package or library, a loader error: the reason
        return f"cuvs.cluster.kmeans does not import: {type(e).__name__}: {e}"
    return None


def _version() -> str:
    import importlib.metadata

    for dist in ("cuvs-cu13", "cuvs-cu12", "cuvs"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


def _params_info(p) -> dict:
    return {k: getattr(p, k) for k in ("init_method", "max_iter", "tol", "n_init", "oversampling_factor")}


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    import torch

    kmeans, Resources = _kmeans()
    res = Resources()
    K = seeds.shape[0]
    params = kmeans.KMeansParams(n_clusters=K, init_method="Array", max_iter=n_iter, tol=0.0)
    info = {"device": str(X.device), "cuvs": _version(), **_params_info(params)}

    def run() -> KMeansFit:
        out = kmeans.fit(params, X, centroids=seeds.clone(), resources=res)
        res.sync()
        return KMeansFit(torch.as_tensor(out.centroids, device=X.device), int(out.n_iter),
                         dict(info, inertia_reported=float(out.inertia)))

    return run


def prepare_fit(X, X_host, K, opts):
    import torch

    kmeans, Resources = _kmeans()
    res = Resources()
    params = kmeans.KMeansParams(n_clusters=K)
    info = {"device": str(X.device), "input": "device tensor", "cuvs": _version(), **_params_info(params)}

    def run() -> KMeansFit:
        out = kmeans.fit(params, X, resources=res)
        res.sync()
        return KMeansFit(torch.as_tensor(out.centroids, device=X.device), int(out.n_iter),
                         dict(info, inertia_reported=float(out.inertia)))

    return run
