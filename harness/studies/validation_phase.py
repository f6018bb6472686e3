"""GPU diagnostic: why the estimator's "validation" phase read ~2 ms at every N in the e2e rows while
``column_moments`` alone is ~0.6 ms at 1M (issue 19's validation + centering target, <= 2 ms at 20M x 32).

In one process on the same data: ``turbo_gmm.diag.em.column_moments`` timed with CUDA events (min and median of
20) bare, while the harness's ``NvmlSampler`` polls, after ``import jax`` and after the GPU idled 50 ms (as
it does while the host prepares a fit), and ``column_sums`` alone; then three estimator fits from a host
array and three from the device tensor with their ``fit_profile_`` in milliseconds; torch's ``X.sum(0)`` (one
read of X, float32) for the bandwidth a reduction reaches.

    python -m harness.studies.validation_phase [--sizes 1M,20M] > validation_phase.log

``--tiles OUT.csv``: instead, the validation kernel's launch geometry at 20M x 32 (``turbo_gmm._column_sums``: tile
elements, loads a step, programs per SM, warps), each timed alone with CUDA events (min and median of 20)
beside the HBM floor (4 N d bytes at 4.3 TB/s) and torch's ``X.sum(0)`` in the same run, one row each to OUT.csv.

``--trace OUT.json``: also a torch.profiler trace (host ops and CUDA kernels) of one estimator fit from the
device tensor at the first size, to see where the validation phase's time goes beyond its kernel.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import time
from pathlib import Path

import torch

from harness import env
from harness.memory import NvmlSampler
from harness.roofline import ISSUE_23_RATES, read_ms
from harness.studies.estimator_e2e import SIZES
from turbo_gmm import GaussianMixture
from turbo_gmm.datasets import make_dataset
from turbo_gmm._column_sums import column_sums
from turbo_gmm.diag.em import column_moments


def event_ms(fn, reps: int = 20, pause_s: float = 0.0) -> tuple[float, float]:
    """(min, median) ms of ``fn`` between two CUDA events, the GPU idle for ``pause_s`` before each."""
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        time.sleep(pause_s)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return min(out), sorted(out)[len(out) // 2]


def tile_sweep(out: Path, N: int = 20_000_000, d: int = 32) -> None:
    """Every launch geometry of the grid below at (N, d), a CSV row each (a compile failure is a row too)."""
    X = make_dataset(N, 32, d, 0, "cuda").X
    floor_ms = read_ms(4 * N * d, ISSUE_23_RATES)
    grid = itertools.product((1024, 2048, 4096), (1, 2, 4, 8), (1, 2, 4, 8), (4, 8))
    torch_ms = event_ms(lambda: X.sum(0))
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, ["date", "git_commit", "device", "N", "d", "tile_elements", "loads",
                                    "programs_per_sm", "num_warps", "status", "ms_min", "ms_median",
                                    "hbm_floor_ms", "floor_frac", "torch_sum_ms_min"])
        writer.writeheader()
        for tile, loads, pps, warps in grid:
            geometry = dict(tile_elements=tile, loads=loads, programs_per_sm=pps, num_warps=warps)
            row = {"date": datetime.date.today().isoformat(), "git_commit": env.git_commit(),
                   "device": torch.cuda.get_device_name(), "N": N, "d": d, **geometry,
                   "hbm_floor_ms": f"{floor_ms:.4f}", "torch_sum_ms_min": f"{torch_ms[0]:.4f}"}
            try:
                column_sums(X, **geometry)
                lo, med = event_ms(lambda: column_sums(X, **geometry))
                row.update(status="ok", ms_min=f"{lo:.4f}", ms_median=f"{med:.4f}", floor_frac=f"{floor_ms / lo:.3f}")
            except Exception as e:  # out of registers or shared memory: a row, not a crash
                row["status"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            writer.writerow(row)
            f.flush()
            print(row, flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1M,20M")
    p.add_argument("--tiles", type=Path, default=None)
    p.add_argument("--trace", type=Path, default=None)
    a = p.parse_args(argv)
    if a.tiles:
        tile_sweep(a.tiles)
        return
    for size in a.sizes.split(","):
        N = SIZES[size]
        X = make_dataset(N, 32, 32, 0, "cuda").X
        column_moments(X)
        print(N, "bare", event_ms(lambda: column_moments(X)), flush=True)
        sampler = NvmlSampler()
        sampler.start()
        print(N, "with NvmlSampler", event_ms(lambda: column_moments(X)), flush=True)
        sampler.stop()
        import jax  # noqa: F401  (the harness worker imports it for the gmmx arm)
        print(N, "after import jax", event_ms(lambda: column_moments(X)), flush=True)
        print(N, "after the GPU idled 50 ms", event_ms(lambda: column_moments(X), pause_s=0.05), flush=True)
        print(N, "column_sums alone", event_ms(lambda: column_sums(X)), flush=True)
        print(N, "torch X.sum(0), one read of X", event_ms(lambda: X.sum(0)), flush=True)
        for source, data in (("host array", X.cpu().numpy()), ("device tensor", X)):
            for _ in range(3):
                gm = GaussianMixture(32, covariance_type="diag", random_state=0, precision="tf32x3").fit(data)
                print(N, f"estimator fit_profile_ ({source})", {k: round(v * 1e3, 3) for k, v in gm.fit_profile_.items()
                                                                if isinstance(v, float)}, flush=True)
        if a.trace and size == a.sizes.split(",")[0]:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                gm = GaussianMixture(32, covariance_type="diag", random_state=0, precision="tf32x3").fit(X)
            prof.export_chrome_trace(str(a.trace))
            print(N, "traced fit_profile_", {k: round(v * 1e3, 3) for k, v in gm.fit_profile_.items()
                                             if isinstance(v, float)}, flush=True)
        del X
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
