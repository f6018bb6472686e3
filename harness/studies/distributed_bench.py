"""Data-parallel EM (turbo_gmm.distributed) on the seeded data: per-iteration time and the fit, from rank 0.

    torchrun --nproc_per_node=2 -m harness.studies.distributed_bench --N 20000000 --K 32 --dim 32 --backend nccl

Each rank generates only its rows of ``turbo_gmm.datasets.make_dataset(N, K, d, seed)``
(counter-based generator) and centers them by the all-reduced global mean, so the
data are make_dataset's bit for bit; the initialization is ``shared_init``'s
(:func:`turbo_gmm.distributed.sharded_shared_init`). A shard larger than
``--max-device-bytes`` stays on the host and is streamed. Rank 0 prints one JSON line:
the per-iteration time (all-reduce included) and the fit; ``--out`` saves its parameters.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch
import torch.distributed as dist

from turbo_gmm.datasets import generate_rows, validate_shape
from turbo_gmm.distributed import fit_sharded, global_column_mean, shard_bounds, sharded_shared_init


def _shard(a, rank, world, device):
    """This rank's rows of make_dataset(N, K, d, seed), centered by the global mean: on
    the device when they fit max_device_bytes, else generated there in slices and kept
    on the host (to be streamed)."""
    r0, r1 = shard_bounds(a.N, rank, world)
    resident = a.max_device_bytes is None or (r1 - r0) * a.d * 4 <= a.max_device_bytes
    if resident:
        X = generate_rows(a.K, a.d, a.seed, r0, r1, device)
    else:
        X = np.empty((r1 - r0, a.d), np.float32)
        step = max(1, a.max_device_bytes // (8 * a.d))
        for s0 in range(r0, r1, step):
            X[s0 - r0 : min(r1, s0 + step) - r0] = generate_rows(a.K, a.d, a.seed, s0, min(r1, s0 + step), device).cpu().numpy()
    mean = global_column_mean(X, a.N, device).float()
    if resident:
        X -= mean
    else:
        X -= mean.cpu().numpy()
    return X, r0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="torchrun --nproc_per_node=G -m harness.studies.distributed_bench",
                                description="Data-parallel EM on make_dataset(N, K, d, seed); rank 0 reports.")
    p.add_argument("--N", type=int, required=True)
    p.add_argument("--K", type=int, required=True)
    p.add_argument("--dim", dest="d", type=int, required=True,
                   help="d, the number of features (--d would clash with torchrun's own --duplicate-* options)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--max-device-bytes", type=int, default=None,
                   help="device bytes a rank's rows may take; a larger shard stays on the host and is streamed")
    p.add_argument("--reg-covar", type=float, default=1e-6)
    p.add_argument("--algorithm", default="auto")
    p.add_argument("--precision", default="tf32x3")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first (kernel compilation)")
    p.add_argument("--out", default=None, help="rank 0 writes the fitted parameters here (.npz)")
    a = p.parse_args(argv)
    validate_shape(a.N, a.K, a.d)
    if a.backend == "nccl":  # one GPU per rank, chosen before the process group binds to it
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(a.backend)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        X, r0 = _shard(a, rank, world, device)
        init = sharded_shared_init(X, r0, a.N, a.K, a.seed, device)
        kw = dict(reg_covar=a.reg_covar, algorithm=a.algorithm, precision=a.precision,
                  max_device_bytes=a.max_device_bytes, device=device)
        center = global_column_mean(X, a.N, device)
        if a.warmup:
            fit_sharded(X, init, a.warmup, a.N, center=center, **kw)
        r = fit_sharded(X, init, a.n_iter, a.N, center=center, **kw)
        if rank == 0:
            ms = [1e3 * s for s in r.iteration_seconds]
            report = {"world_size": world, "backend": a.backend, "N": a.N, "K": a.K, "d": a.d,
                      "streamed": not isinstance(X, torch.Tensor), "algorithm": r.algorithm, "precision": r.precision,
                      "ms_per_iter": ms, "ms_per_iter_min": min(ms) if ms else None,
                      "ll_per_point": r.log_likelihoods[-1] / a.N if ms else None, "n_floored": r.n_floored}
            print(json.dumps(report), flush=True)
            if a.out:
                np.savez(a.out, weights=r.weights.cpu().numpy(), means=r.means.cpu().numpy(),
                         variances=r.variances.cpu().numpy(), log_likelihoods=np.array(r.log_likelihoods))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
