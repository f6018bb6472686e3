"""FAISS's GPU k-means: ``faiss.Kmeans(d, k, gpu=True)`` (PyPI ``faiss-gpu-cu12``).

FAISS's Python ``Kmeans.train`` takes a host float32 NumPy array; with ``gpu=True`` its assignment is a flat
GPU index (cuBLAS products, X copied to the GPU in pages by every search) and its centroid update and empty-
cluster split run on the host. Lloyd from the shared seeds: ``Kmeans(d, K, niter=n_iter, gpu=True,
max_points_per_centroid=ceil(N/K)+1)`` (no subsample: FAISS trains on at most ``max_points_per_centroid`` x K
rows, 256 x K by default) ``.train(X_host, init_centroids=seeds)``; FAISS has no stop rule, it always runs
``niter`` iterations. Own fit: ``Kmeans(d, K, gpu=True, seed=seed).train(X_host)``, every other parameter at
FAISS's default (random rows, niter 25, the 256 x K subsample).

The wheels on PyPI are built for CUDA 12 (``faiss-gpu-cu12``): on a CUDA 13 image without CUDA 12's cuBLAS the
import fails, and the cell is ``unavailable: faiss does not import: ...`` with the loader's message. A FAISS
without GPU support (``faiss-cpu``), or one that sees no GPU, is unavailable too, with the reason.
"""
from __future__ import annotations

import math

from arms.kmeans import KMeansFit

MEMORY = "rss"  # FAISS allocates through its own GPU resources, which torch does not see; the host side is RSS


def available() -> str | None:
    try:
        import faiss
    except Exception as e:  # noqa: BLE001 - ImportError, or an OSError of a CUDA library: the reason
        return f"faiss does not import: {type(e).__name__}: {e}"
    if not hasattr(faiss, "StandardGpuResources"):
        return f"faiss {getattr(faiss, '__version__', '?')} has no GPU support (faiss-cpu?): install faiss-gpu-cu12"
    if faiss.get_num_gpus() < 1:
        return "faiss sees no GPU"
    return None


def _info(faiss, km) -> dict:
    cp = km.cp
    return {"faiss": getattr(faiss, "__version__", "?"), "device": "cuda (flat GPU index; host update)",
            "input": "host array", "niter": int(cp.niter), "seed": int(cp.seed),
            "max_points_per_centroid": int(cp.max_points_per_centroid), "nredo": int(cp.nredo)}


def prepare_lloyd(X, X_host, seeds, n_iter, opts):
    import faiss

    init = seeds.detach().cpu().numpy()
    K, d = init.shape
    N = X_host.shape[0]

    def run() -> KMeansFit:
        km = faiss.Kmeans(d, K, niter=n_iter, gpu=True, verbose=False,
                          max_points_per_centroid=math.ceil(N / K) + 1, min_points_per_centroid=1)
        km.train(X_host, init_centroids=init)
        return KMeansFit(km.centroids, len(km.iteration_stats), dict(_info(faiss, km), obj=float(km.obj[-1])))

    return run


def prepare_fit(X, X_host, K, opts):
    import faiss

    d = X_host.shape[1]

    def run() -> KMeansFit:
        km = faiss.Kmeans(d, K, gpu=True, seed=opts["seed"], verbose=False)
        km.train(X_host)
        return KMeansFit(km.centroids, len(km.iteration_stats), dict(_info(faiss, km), obj=float(km.obj[-1])))

    return run
