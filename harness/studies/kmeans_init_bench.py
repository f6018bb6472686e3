"""GPU benchmark: k-means++ seeding and Lloyd's k-means, our fused kernels and torch ops against flash-kmeans and cuVS.

The estimator's default initialization (``init_params="kmeans"``) is k-means++ seeding then
Lloyd to convergence; issue 19 asks to measure a library made for this before keeping our
own (:mod:`turbo_gmm.init.kmeans`). Candidates, each where it imports:

* ``turbo_fused``: :func:`turbo_gmm.init.kmeans.kmeans_plusplus` and :func:`turbo_gmm.init.kmeans.lloyd` with
  ``fused=True`` (the Triton kernels of :mod:`turbo_gmm.init.kmeans_assign`, the estimator's default on CUDA).
* ``turbo_torch``: the same with ``fused=False`` (the torch ops the kernels replace).
* ``flash_kmeans``: ``flash_kmeans.batch_kmeans_Euclid`` (Triton; PyPI ``flash-kmeans``), Lloyd
  only (it seeds uniformly at random), from our seeds; its stop rule is max center shift < tol.
* ``cuvs``: ``cuvs.cluster.kmeans.fit`` (PyPI ``cuvs-cu13``, with pylibraft-cu13, rmm-cu13,
  cuda-bindings, cuda-pathfinder and the libcuvs wheels of the cuvs arm); its seeding is
  scalable k-means++ (k-means||), its stop rule a relative inertia change < tol.

Per shape (N x 32, K in {32, 256}) and candidate, one row per measurement: ``seeding`` (ours:
the k-means++ seeds; cuVS: KMeansPlusPlus with max_iter=1, seeding plus one iteration),
``lloyd_10`` (10 iterations from our seeds, no early stop: per-iteration cost), ``converged``
(from our seeds to the candidate's own convergence rule, max 300 iterations; ours is
scikit-learn's), ``own_fit`` (cuVS only: its own seeding and fit). Every row records the inertia
of the returned centers on X (float64, the same evaluation for all) and the iterations.

The seeds come from ``np.random.RandomState(0)`` (scikit-learn's draws): both of our paths
must pick the same ones (the ``seeding`` row of ``turbo_torch`` says whether they did).

    python -m harness.studies.kmeans_init_bench --out results/h200/kmeans_init  [--sizes 1M,4M,20M]
"""
from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import torch

from harness import env
from turbo_gmm.datasets import make_dataset
import numpy as np

from turbo_gmm.init.kmeans import KMEANS_MAX_ITER, KMEANS_TOL, SCORE_BLOCK_BYTES, kmeans_plusplus, lloyd

SIZES = {"1M": 1_000_000, "4M": 4_000_000, "20M": 20_000_000}
COMPONENTS = (32, 256)
D = 32
DATA_COMPONENTS = 32  # clusters of the generated data
COLUMNS = ("commit", "date", "device", "candidate", "N", "d", "K", "measurement", "seconds", "iterations",
           "inertia", "note")


def _timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t, out


def inertia(X, centers, center) -> float:
    """Sum over rows of the squared distance to the nearest center (float64 sum of float32 blocks)."""
    centers = torch.as_tensor(centers, device=X.device).double().reshape(-1, X.shape[1])
    rows = max(1, SCORE_BLOCK_BYTES // (4 * centers.shape[0]))
    y = centers - center
    W = (-2.0 * y).float().T.contiguous()
    bias = ((y * y).sum(1) + 2.0 * (y @ center)).float()
    c32, total = center.float(), 0.0
    for r0 in range(0, X.shape[0], rows):
        xb = X[r0 : r0 + rows]
        total += float((torch.addmm(bias, xb, W).min(1).values + (xb - c32).square().sum(1)).sum(dtype=torch.float64))
    return total


def _flash():
    try:
        from flash_kmeans import batch_kmeans_Euclid
        from flash_kmeans.kmeans_triton_impl import batch_kmeans_Euclid as triton_impl
    except Exception as e:  # noqa: BLE001 - any import failure is "unavailable" with its reason
        return None, f"flash_kmeans: {type(e).__name__}: {e}"
    if batch_kmeans_Euclid is not triton_impl:
        return None, "flash_kmeans: its Triton implementation did not import (torch fallback)"
    return batch_kmeans_Euclid, None


def _cuvs():
    try:
        from arms import cuvs as cuvs_arm

        reason = cuvs_arm.preload()
        if reason:
            return None, f"cuvs: {reason}"
        cuvs_arm._load_cuda_dependencies()
        from cuvs.cluster import kmeans as cuvs_kmeans
    except Exception as e:  # noqa: BLE001
        return None, f"cuvs: {type(e).__name__}: {e}"
    return cuvs_kmeans, None


def _run_shape(X, K, center, var_mean, flash, cuvs_kmeans, emit, torch_converged=True):
    seeds = None
    for name, fused in (("turbo_fused", True), ("turbo_torch", False)):
        seed_s, rows = _timed(lambda: kmeans_plusplus(X, K, np.random.RandomState(0), center, fused=fused))
        same = "" if seeds is None else f"seeds equal turbo_fused's: {bool((X[rows] == seeds).all())}"
        seeds = X[rows].clone() if seeds is None else seeds
        emit(name, K, "seeding", seed_s, 0, inertia(X, X[rows], center), same)
        t, (_, c, it) = _timed(lambda: lloyd(X, seeds, center, -1.0, max_iter=10, fused=fused))
        emit(name, K, "lloyd_10", t, it, inertia(X, c, center))
        if fused or torch_converged:
            t, (_, c, it) = _timed(lambda: lloyd(X, seeds, center, KMEANS_TOL * var_mean, KMEANS_MAX_ITER, fused=fused))
            emit(name, K, "converged", t, it, inertia(X, c, center), "scikit-learn's rule")
    if flash is not None:
        x3 = X[None]
        t, (_, c, it) = _timed(lambda: flash(x3, K, max_iters=10, tol=0.0, init_centroids=seeds[None].clone()))
        emit("flash_kmeans", K, "lloyd_10", t, it, inertia(X, c[0], center))
        t, (_, c, it) = _timed(lambda: flash(x3, K, max_iters=KMEANS_MAX_ITER, tol=1e-4 * var_mean ** 0.5,
                                              init_centroids=seeds[None].clone()))
        emit("flash_kmeans", K, "converged", t, it, inertia(X, c[0], center), "max center shift < 1e-4 x rms std")
    if cuvs_kmeans is not None:
        P = cuvs_kmeans.KMeansParams

        def fit(**kw):
            centroids = kw.pop("centroids", None)
            out = cuvs_kmeans.fit(P(n_clusters=K, **kw), X, centroids)
            return torch.as_tensor(out.centroids, device=X.device), int(out.n_iter)

        t, (c, it) = _timed(lambda: fit(init_method="KMeansPlusPlus", max_iter=1, tol=0.0))
        emit("cuvs", K, "seeding", t, it, inertia(X, c, center), "k-means|| + 1 iteration")
        t, (c, it) = _timed(lambda: fit(init_method="Array", max_iter=10, tol=0.0, centroids=seeds.clone()))
        emit("cuvs", K, "lloyd_10", t, it, inertia(X, c, center))
        t, (c, it) = _timed(lambda: fit(init_method="Array", max_iter=KMEANS_MAX_ITER, tol=KMEANS_TOL,
                                        centroids=seeds.clone()))
        emit("cuvs", K, "converged", t, it, inertia(X, c, center), "relative inertia change < 1e-4")
        t, (c, it) = _timed(lambda: fit(init_method="KMeansPlusPlus", max_iter=KMEANS_MAX_ITER, tol=KMEANS_TOL))
        emit("cuvs", K, "own_fit", t, it, inertia(X, c, center), "k-means|| + Lloyd")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m harness.studies.kmeans_init_bench")
    p.add_argument("--out", type=Path, required=True, help="folder for kmeans_init.csv (written row by row)")
    p.add_argument("--sizes", default="1M,4M,20M")
    p.add_argument("--torch-converged-max-n", type=int, default=4_000_000,
                   help="run the torch ops to convergence only up to this N (at 20M, K = 256 it took 23.8 s)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("the k-means benchmark needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "kmeans_init.csv"
    commit = env.git_commit()
    meta = dict(commit=commit, date=time.strftime("%Y-%m-%d"), device=torch.cuda.get_device_name())
    flash, flash_reason = _flash()
    cuvs_kmeans, cuvs_reason = _cuvs()
    for reason in (flash_reason, cuvs_reason):
        if reason:
            print("unavailable:", reason)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for name, reason in (("flash_kmeans", flash_reason), ("cuvs", cuvs_reason)):
            if reason:
                w.writerow({**meta, "candidate": name, "measurement": "unavailable", "note": reason})
        warm = make_dataset(100_000, DATA_COMPONENTS, D, seed=1, device="cuda").X  # compile / load everything once
        _run_shape(warm, 32, warm.double().mean(0), float(warm.double().var(0).mean()), flash, cuvs_kmeans,
                   lambda *r, **k: None)
        for size in a.sizes.split(","):
            X = make_dataset(SIZES[size], DATA_COMPONENTS, D, seed=0, device="cuda").X
            center, var_mean = X.double().mean(0), float(X.double().var(0).mean())
            for K in COMPONENTS:
                def emit(cand, K, what, seconds, iterations, inert, note=""):
                    row = {**meta, "candidate": cand, "N": X.shape[0], "d": D, "K": K, "measurement": what,
                           "seconds": f"{seconds:.6f}", "iterations": iterations, "inertia": f"{inert:.9e}", "note": note}
                    w.writerow(row)
                    f.flush()
                    print(f"{size} K={K:4d} {cand:13s} {what:10s} {seconds * 1e3:10.2f} ms  it={iterations:4d}  "
                          f"inertia/N={inert / X.shape[0]:.6f}  {note}", flush=True)
                _run_shape(X, K, center, var_mean, flash, cuvs_kmeans, emit,
                           torch_converged=X.shape[0] <= a.torch_converged_max_n)
            del X
            torch.cuda.empty_cache()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
