"""Turbo-GMM's k-means: ``turbo_gmm.KMeans`` (scikit-learn's KMeans API on the fused assignment kernels).

Lloyd from the shared seeds: ``KMeans(n_clusters=K, init=seeds, n_init=1, max_iter=n_iter, tol=0)`` fitted on the
device tensor (scikit-learn's rule with tol 0: only a fixed point stops it early). Own fit: ``KMeans(n_clusters=K,
random_state=seed)`` with every other parameter at its default (k-means++ seeding on the device, tol 1e-4 of the
mean column variance, at most 300 iterations), on the device tensor. Both at the estimator's default ``device`` and
``precision`` ("auto": the fused tf32x3 kernels on CUDA, except float64 torch ops where N K d is small enough to
cost the same), unless the arm's options set them; on a CPU under TRITON_INTERPRET=1, precision "tf32x3", the
kernels in the interpreter, unless the options set another; the estimator's ``backend_`` and ``precision_`` go
into ``info`` (and the row's ``precision``). The whole ``fit`` is timed, the library's own cost: its validation
and the host copy of the labels (``labels_``) included.
"""
from __future__ import annotations

import os

from arms.kmeans import KMeansFit

MEMORY = "torch"
ESTIMATOR_OPTIONS = ("device", "precision")  # passed to turbo_gmm.KMeans where the arm's options set them


def available() -> str | None:
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return f"needs torch and triton ({e})"
    try:
        from turbo_gmm import KMeans  # noqa: F401
    except (ImportError, AttributeError) as e:
        return f"turbo_gmm.KMeans does not import: {type(e).__name__}: {e}"
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return "needs a CUDA GPU (or TRITON_INTERPRET=1 for the CPU interpreter)"
    return None


def _options(X, opts) -> dict:
    """The estimator options the arm sets: the arm's ``device`` and ``precision``; on a CPU under
    TRITON_INTERPRET=1 without a precision set, "tf32x3", so the fused kernels run in the interpreter (what it is
    set for: "auto" picks float64 torch ops at the smoke sweep's sizes)."""
    extra = {k: opts[k] for k in ESTIMATOR_OPTIONS if k in opts}
    if not X.is_cuda and os.environ.get("TRITON_INTERPRET") == "1":
        extra.setdefault("precision", "tf32x3")
    return extra


def _fitted(km) -> dict:
    """What the estimator says it ran (``backend_``, ``precision_``) and its own inertia."""
    return {"backend": getattr(km, "backend_", None), "precision": getattr(km, "precision_", None),
            "inertia_reported": float(km.inertia_)}


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    from turbo_gmm import KMeans

    K = seeds.shape[0]
    init = seeds.detach().cpu().numpy()
    extra = _options(X, opts)
    info = {"api": "turbo_gmm.KMeans", "device": str(X.device), **extra}

    def run() -> KMeansFit:
        km = KMeans(n_clusters=K, init=init, n_init=1, max_iter=n_iter, tol=0.0, random_state=opts["seed"], **extra)
        km.fit(X)
        return KMeansFit(km.cluster_centers_, int(km.n_iter_), dict(info, **_fitted(km)))

    return run


def prepare_fit(X, X_host, K, opts):
    from turbo_gmm import KMeans

    extra = _options(X, opts)
    info = {"api": "turbo_gmm.KMeans", "device": str(X.device), "input": "device tensor", **extra}

    def run() -> KMeansFit:
        km = KMeans(n_clusters=K, random_state=opts["seed"], **extra)
        km.fit(X)
        return KMeansFit(km.cluster_centers_, int(km.n_iter_),
                         dict(info, **_fitted(km), init=str(km.init), n_init=str(km.n_init), tol=float(km.tol),
                              max_iter=int(km.max_iter)))

    return run
