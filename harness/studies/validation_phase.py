"""GPU diagnostic: why the estimator's "validation" phase read ~2 ms at every N in the e2e rows while
``column_moments`` alone is ~0.6 ms at 1M (issue 19's validation + centering target, <= 2 ms at 20M x 32).

In one process on the same data: ``kernels.em.column_moments`` timed with CUDA events (min and median of
20) bare, while the harness's ``NvmlSampler`` polls, and after ``import jax``; then three estimator fits
from the device tensor with their ``fit_profile_`` in milliseconds.

    python -m harness.studies.validation_phase [--sizes 1M,20M] > validation_phase.log
"""
from __future__ import annotations

import argparse

import torch

from harness.memory import NvmlSampler
from harness.studies.estimator_e2e import SIZES
from kernels import GaussianMixture
from kernels.datasets import make_dataset
from kernels.em import column_moments


def event_ms(fn, reps: int = 20) -> tuple[float, float]:
    """(min, median) ms of ``fn`` between two CUDA events."""
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return min(out), sorted(out)[len(out) // 2]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1M,20M")
    a = p.parse_args(argv)
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
        for _ in range(3):
            gm = GaussianMixture(32, covariance_type="diag", random_state=0, precision="tf32x3").fit(X)
            print(N, "estimator fit_profile_", {k: round(v * 1e3, 3) for k, v in gm.fit_profile_.items()
                                                 if isinstance(v, float)}, flush=True)
        del X
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
