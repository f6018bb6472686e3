"""GPU study: Lloyd's iteration, k-means++ and k-means|| seeding and the fit's initialization at the k-means targets.

Per shape (N x d, K; the data of :func:`turbo_gmm.datasets.make_dataset` with 32 true components), from the
k-means++ seeds of ``RandomState(0)``, one CSV row per measurement:

* ``read_x``: one read of X (``X.sum``), the memory floor of a pass;
* ``seeding``: :func:`turbo_gmm.init.kmeans.kmeans_plusplus` (``turbo_fused``: as the estimator runs it;
  ``turbo_fused_one_pass``: one pass over X a step; seconds and per step) and
  :func:`turbo_gmm.init.kmeans.kmeans_parallel` (``turbo_kmeans_parallel``: k-means||, seconds and per round),
  fused kernels, with the seeds' float64 ``inertia`` (labels of float64 distances);
* ``lloyd_<n>``: n Lloyd iterations without early stop (assignment, new centers, one host read each) per
  candidate: our :class:`turbo_gmm.init.kmeans_assign.Assigner` under each precision and launch variant, the
  assignment kernel of another tree (``--baseline-kernel``, e.g. the previous commit's file), flash-kmeans, and
  plain torch (TF32 matmul, argmin, index_add); ms per iteration, and for ours the labels of the first
  assignment against float64 distances (``mismatch``: rows whose label is farther than the exact nearest center);
* ``init``: seeding + :func:`turbo_gmm.init.kmeans.lloyd` to scikit-learn's convergence (the estimator's default
  initialization), per seeding (``turbo_fused``: k-means++, ``turbo_kmeans_parallel``: k-means||), seconds,
  iterations and the final float64 ``inertia``;
* ``fit``: ``GaussianMixture(K, covariance_type=...).fit(X)`` on the CUDA tensor after a warm-up fit at
  200 000 rows, wall seconds and ``fit_profile_``'s phases.

    python -m harness.studies.kmeans_lloyd --out results/<device>/kmeans_lloyd [--shapes 20M_256_32,...]
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import time
from pathlib import Path

import numpy as np
import torch

from harness import env
from harness.studies.kmeans_init_bench import _timed
from turbo_gmm.datasets import make_dataset
from turbo_gmm.init import kmeans_assign
from turbo_gmm.init.kmeans import KMEANS_MAX_ITER, KMEANS_PARALLEL_ROUNDS, KMEANS_TOL
from turbo_gmm.init.kmeans import inertia as kmeans_inertia
from turbo_gmm.init.kmeans import kmeans_parallel, kmeans_plusplus, lloyd

SHAPES = ("20M_256_32", "20M_32_32", "1M_1024_32")  # N_K_d, as conf/shape names them
DATA_COMPONENTS = 32
ITERATIONS = 20
COLUMNS = ("commit", "date", "device", "shape", "N", "d", "K", "measurement", "candidate", "seconds", "per_unit_ms",
           "iterations", "mismatch", "inertia", "note")
def _one_pass_kmeans_plusplus(*args, **kwargs):
    """k-means++ by :class:`turbo_gmm.init.kmeans_assign.SeedingSteps`, one pass over X a step."""
    from turbo_gmm.init import kmeans as kmeans_module

    saved, kmeans_module.ONE_PASS_SEEDING = kmeans_module.ONE_PASS_SEEDING, True
    try:
        return kmeans_plusplus(*args, **kwargs)
    finally:
        kmeans_module.ONE_PASS_SEEDING = saved


SEEDINGS = {"turbo_fused": kmeans_plusplus, "turbo_fused_one_pass": _one_pass_kmeans_plusplus,
            "turbo_kmeans_parallel": kmeans_parallel}  # candidate: fused seeding
VARIANTS = {  # candidate: Assigner keyword arguments
    "turbo_tf32x3": dict(precision="tf32x3"),
    "turbo_tf32x3_w4_p2": dict(precision="tf32x3", num_warps=4, programs_per_sm=2),
    "turbo_tf32": dict(precision="tf32"),
    "turbo_tf32x3_sorted": dict(precision="tf32x3", update="sorted"),  # assignment, then the sorted segment sums
    "turbo_tf32_sorted": dict(precision="tf32", update="sorted"),
}


def parse_shape(name: str) -> tuple[int, int, int]:
    """(N, d, K) of an N_K_d name such as 20M_256_32."""
    n, k, d = name.split("_")
    scale = {"K": 1_000, "M": 1_000_000}
    return (int(float(n[:-1]) * scale[n[-1]]) if n[-1] in scale else int(n)), int(d), int(k)


def exact_labels(X, centers, block_rows: int = 1 << 18):
    """Nearest center by float64 distances (expanded form, then the direct form on the rows it cannot decide)."""
    C = centers.double()
    c2 = (C * C).sum(1)
    out = torch.empty(X.shape[0], dtype=torch.int64, device=X.device)
    for r0 in range(0, X.shape[0], block_rows):
        xb = X[r0 : r0 + block_rows].double()
        out[r0 : r0 + block_rows] = (c2 - 2.0 * xb @ C.T).argmin(1)
    return out


def farther(X, centers, labels, exact) -> int:
    """Rows whose label's center is farther (direct float64 distances) than the exact labels' center."""
    rows = torch.nonzero(labels != exact)[:, 0]
    if rows.numel() == 0:
        return 0
    x, C = X[rows].double(), centers.double()
    d_got = (x - C[labels[rows]]).square().sum(1)
    d_exact = (x - C[exact[rows]]).square().sum(1)
    return int((d_got > d_exact).sum())


def lloyd_iterations(assigner, X, seeds, iterations):
    """``iterations`` assignments from ``seeds`` with the centers' update and one host read each."""
    centers = seeds.double().clone()
    labels = torch.full((X.shape[0],), -1, dtype=torch.int64, device=X.device)
    for _ in range(iterations):
        sums, counts, changed = assigner(centers, labels)
        centers = sums / counts.clamp_min(1.0)[:, None]
        int(changed)
    return centers


def torch_lloyd(X, seeds, iterations, block_rows: int = 1 << 21):
    """Plain torch: TF32 matmul scores, argmin, index_add sums."""
    C = seeds.float().clone()
    K, d = C.shape
    for _ in range(iterations):
        sums = torch.zeros((K, d), dtype=torch.float32, device=X.device)
        counts = torch.zeros(K, dtype=torch.float32, device=X.device)
        for r0 in range(0, X.shape[0], block_rows):
            xb = X[r0 : r0 + block_rows]
            lab = ((C * C).sum(1) - 2.0 * xb @ C.T).argmin(1)
            sums.index_add_(0, lab, xb)
            counts.index_add_(0, lab, torch.ones_like(lab, dtype=torch.float32))
        C = sums / counts.clamp_min(1.0)[:, None]
        int(counts.sum())
    return C


def _flash():
    try:
        from flash_kmeans import batch_kmeans_Euclid
    except Exception as e:  # noqa: BLE001 - any import failure is "unavailable" with its reason
        return None, f"{type(e).__name__}: {e}"
    return batch_kmeans_Euclid, None


def _baseline(path: Path | None):
    """The Assigner of another tree's kmeans_assign.py, imported inside turbo_gmm.init (its relative imports)."""
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("turbo_gmm.init._baseline_assign", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Assigner


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m harness.studies.kmeans_lloyd")
    p.add_argument("--out", type=Path, required=True, help="folder for kmeans_lloyd_<date>_<commit>.csv")
    p.add_argument("--shapes", default=",".join(SHAPES), help="N_K_d names of the k-means rows ('' for none)")
    p.add_argument("--baseline-kernel", type=Path, default=None, help="another tree's kernels/init/kmeans_assign.py")
    p.add_argument("--fits", default="diag,full", help="covariance types of the fit rows ('' for none)")
    p.add_argument("--fit-shapes", default="20M_32_32,20M_256_32")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("the k-means study needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = True  # the plain-torch candidate's TF32 scores
    a.out.mkdir(parents=True, exist_ok=True)
    commit = env.git_commit()
    path = a.out / f"kmeans_lloyd_{time.strftime('%Y-%m-%d')}_{commit[:7]}.csv"
    meta = dict(commit=commit, date=time.strftime("%Y-%m-%d"), device=torch.cuda.get_device_name())
    flash, flash_reason = _flash()
    baseline = _baseline(a.baseline_kernel)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()

        def emit(shape, N, d, K, what, cand, seconds, per_unit=None, iterations="", mismatch="", note="", inertia=None):
            w.writerow({**meta, "shape": shape, "N": N, "d": d, "K": K, "measurement": what, "candidate": cand,
                        "seconds": f"{seconds:.6f}", "per_unit_ms": "" if per_unit is None else f"{per_unit:.4f}",
                        "iterations": iterations, "mismatch": mismatch,
                        "inertia": "" if inertia is None else f"{inertia:.10g}", "note": note})
            f.flush()
            print(f"{shape:12s} {what:9s} {cand:22s} {seconds:9.4f} s  {'' if per_unit is None else f'{per_unit:8.3f} ms'}"
                  f"  it={iterations} mismatch={mismatch} {'' if inertia is None else f'inertia={inertia:.6g} '}{note}",
                  flush=True)

        if flash_reason:
            emit("", 0, 0, 0, "unavailable", "flash_kmeans", 0.0, note=flash_reason)
        for shape in [name for name in a.shapes.split(",") if name]:
            N, d, K = parse_shape(shape)
            X = make_dataset(N, DATA_COMPONENTS, d, seed=0, device="cuda").X
            center, var_mean = X.double().mean(0), float(X.double().var(0).mean())
            t, _ = _timed(lambda: X.sum())
            t, _ = _timed(lambda: X.sum())
            emit(shape, N, d, K, "read_x", "torch_sum", t, t * 1e3)
            seeded = {}
            for cand, seeding in SEEDINGS.items():
                seeding(X[:100_000].contiguous(), K, np.random.RandomState(0), center)  # compile
                t, rows = _timed(lambda seeding=seeding: seeding(X, K, np.random.RandomState(0), center))
                seeded[cand] = X[rows].double()
                per = ((KMEANS_PARALLEL_ROUNDS, "per round") if cand == "turbo_kmeans_parallel"
                       else (max(1, K - 1), "per step"))
                emit(shape, N, d, K, "seeding", cand, t, t * 1e3 / per[0], note=per[1],
                     inertia=kmeans_inertia(X, seeded[cand], exact_labels(X, seeded[cand])))
            seeds = seeded["turbo_fused"]
            exact = exact_labels(X, seeds)
            for cand, kw in VARIANTS.items():
                try:
                    assigner = kmeans_assign.Assigner(X, center, K, **kw)
                    labels = torch.full((N,), -1, dtype=torch.int64, device=X.device)
                    assigner(seeds, labels)
                    bad = farther(X, seeds, labels, exact)
                    lloyd_iterations(assigner, X, seeds, 2)
                    t, _ = _timed(lambda: lloyd_iterations(assigner, X, seeds, ITERATIONS))
                    emit(shape, N, d, K, f"lloyd_{ITERATIONS}", cand, t, t * 1e3 / ITERATIONS, ITERATIONS, bad)
                except Exception as e:  # noqa: BLE001 - a variant that does not compile is a row, not the end
                    emit(shape, N, d, K, f"lloyd_{ITERATIONS}", cand, 0.0, note=f"{type(e).__name__}: {e}"[:300])
            if baseline is not None:
                assigner = baseline(X, center, K)
                labels = torch.full((N,), -1, dtype=torch.int64, device=X.device)
                assigner(seeds, labels)
                bad = farther(X, seeds, labels, exact)
                lloyd_iterations(assigner, X, seeds, 2)
                t, _ = _timed(lambda: lloyd_iterations(assigner, X, seeds, ITERATIONS))
                emit(shape, N, d, K, f"lloyd_{ITERATIONS}", "baseline_kernel", t, t * 1e3 / ITERATIONS, ITERATIONS, bad)
            if flash is not None:
                x3 = X[None]
                flash(x3, K, max_iters=2, tol=0.0, init_centroids=seeds.float()[None].clone())
                t, _ = _timed(lambda: flash(x3, K, max_iters=ITERATIONS, tol=0.0, init_centroids=seeds.float()[None].clone()))
                emit(shape, N, d, K, f"lloyd_{ITERATIONS}", "flash_kmeans", t, t * 1e3 / ITERATIONS, ITERATIONS)
            torch_lloyd(X, seeds, 2)
            t, _ = _timed(lambda: torch_lloyd(X, seeds, ITERATIONS))
            emit(shape, N, d, K, f"lloyd_{ITERATIONS}", "torch_tf32", t, t * 1e3 / ITERATIONS, ITERATIONS)

            for cand, seeding in SEEDINGS.items():
                if cand == "turbo_fused_one_pass":  # the same seeds as turbo_fused: its init row would repeat it
                    continue

                def init(seeding=seeding):
                    r = seeding(X, K, np.random.RandomState(0), center)
                    return lloyd(X, X[r], center, KMEANS_TOL * var_mean, KMEANS_MAX_ITER)
                t, (labels, centers, it) = _timed(init)
                emit(shape, N, d, K, "init", cand, t, iterations=it, inertia=kmeans_inertia(X, centers, labels),
                     note="seeding + Lloyd to scikit-learn's tol")
                del labels, centers
            del X, exact
            torch.cuda.empty_cache()
        fits = [c for c in a.fits.split(",") if c]
        if fits:
            from turbo_gmm import GaussianMixture

            for shape in a.fit_shapes.split(","):
                N, d, K = parse_shape(shape)
                X = make_dataset(N, DATA_COMPONENTS, d, seed=0, device="cuda").X
                for cov in fits:
                    GaussianMixture(K, covariance_type=cov, random_state=0).fit(X[:200_000].contiguous())
                    t, gm = _timed(lambda: GaussianMixture(K, covariance_type=cov, random_state=0).fit(X))
                    prof = " ".join(f"{k}={v:.3f}" for k, v in getattr(gm, "fit_profile_", {}).items()
                                    if isinstance(v, float))
                    emit(shape, N, d, K, f"fit_{cov}", "turbo_gmm", t, iterations=gm.n_iter_, note=prof)
                del X
                torch.cuda.empty_cache()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
