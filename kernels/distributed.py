"""Data-parallel EM with torch.distributed: every rank holds a shard of the rows.

An EM iteration needs the data only through sums over rows (:mod:`kernels.estep`),
so each rank runs the fused E-step on its shard, the float64 statistics
(n, s, u, ell) are all-reduced in one call, and every rank runs the same M-step on
the same sums -- the parameters stay identical on every rank without being sent.
The center of the in-kernel shift is the global column mean, one more all-reduce.
NCCL on GPUs (one rank per GPU), gloo on CPUs (kernels in the Triton interpreter
under TRITON_INTERPRET=1, else the float64 torch fallback).

    torchrun --nproc_per_node=2 -m kernels.distributed --N 20000000 --K 32 --dim 32 --backend nccl

Each rank generates only its rows of ``harness.data.make_dataset(N, K, d, seed)``
(counter-based generator) and centers them by the all-reduced global mean, so the
data are make_dataset's bit for bit; the initialization is ``shared_init``'s.
Rank 0 prints the per-iteration time (all-reduce included) and the fit.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from kernels.records import Init
from kernels.datasets import generate_rows, validate_shape
from kernels.em import interpreter_mode
from kernels.estep import BlockStatistics, Statistics, mstep_diag
from kernels.streaming import rows_per_chunk, streamed_statistics


@dataclass
class ShardedFit:
    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihoods: list  # sum over all ranks' rows, at each iteration's incoming parameters
    iteration_seconds: list
    n_floored: int
    algorithm: str


def shard_bounds(N: int, rank: int, world: int) -> tuple[int, int]:
    """Rows [r0, r1) of rank ``rank``: contiguous, sizes differ by at most one."""
    base, extra = divmod(N, world)
    r0 = rank * base + min(rank, extra)
    return r0, r0 + base + (rank < extra)


def _all_reduce(t: torch.Tensor, comm_device: torch.device, group=None) -> torch.Tensor:
    """Sum over ranks, on the device the backend communicates from (CPU for gloo)."""
    buf = t.to(comm_device)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    return buf.to(t.device)


def _comm_device(device: torch.device, group=None) -> torch.device:
    return device if dist.get_backend(group) == "nccl" else torch.device("cpu")


def column_sums(X_shard, device: torch.device, rows: int = 1 << 20) -> torch.Tensor:
    """(2, d) float64 [sum x | sum x^2] of this rank's rows (tensor or host array), in row blocks."""
    out = torch.zeros(2, X_shard.shape[1], dtype=torch.float64, device=device)
    for r0 in range(0, X_shard.shape[0], rows):
        block = X_shard[r0 : r0 + rows]
        x = (block if isinstance(block, torch.Tensor) else torch.as_tensor(np.asarray(block))).to(device).double()
        out[0] += x.sum(0)
        out[1] += (x * x).sum(0)
    return out


def global_column_mean(X_shard, N: int, device: torch.device, group=None) -> torch.Tensor:
    """float64 (d,) mean of the rows of every rank."""
    return _all_reduce(column_sums(X_shard, device)[0], _comm_device(device, group), group) / N


def fit_sharded(X_shard, init, n_iter: int, N: int, *, center: torch.Tensor | None = None, reg_covar: float = 1e-6,
                backend: str | None = None, algorithm: str = "auto", precision: str = "tf32x3",
                max_device_bytes: int | None = None, device=None, group=None) -> ShardedFit:
    """``n_iter`` EM iterations over the union of every rank's ``X_shard`` (N rows in all).

    X_shard: this rank's rows, a float32 tensor on ``device`` or a host array that
    is streamed through ``max_device_bytes`` (:mod:`kernels.streaming`). init: an
    ``arms.Init`` or (weights, means, variances), the same on every rank. backend: "triton" or
    "torch" (default: triton on CUDA or in the interpreter, else torch).
    """
    device = torch.device(device) if device is not None else (
        X_shard.device if isinstance(X_shard, torch.Tensor) else torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    backend = backend or ("triton" if device.type == "cuda" or interpreter_mode() else "torch")
    comm = _comm_device(device, group)
    if center is None:
        center = global_column_mean(X_shard, N, device, group)
    if isinstance(init, Init):
        init = (init.weights, init.means, init.variances)
    w, m, v = (torch.as_tensor(np.asarray(a), device=device).double() for a in init)
    K, d = m.shape
    block = BlockStatistics(K, d, center, backend, algorithm, precision)
    host = isinstance(X_shard, np.ndarray)
    rows = rows_per_chunk(max_device_bytes, d, K, backend) if host and max_device_bytes else X_shard.shape[0]
    lls, seconds, floored = [], [], 0
    for _ in range(n_iter):
        t0 = time.perf_counter()
        if host:
            st = streamed_statistics(X_shard, block, (w, m, v), rows, device)
        else:
            st = block(X_shard, w, m, v)
        total = Statistics.from_flat(_all_reduce(st.flat(), comm, group), K, d)
        w, m, v, f = mstep_diag(total, N, center, reg_covar)
        floored += int(f)
        lls.append(float(total.ll))  # synchronizes: the iteration is over on this rank
        seconds.append(time.perf_counter() - t0)
    return ShardedFit(w, m, v, lls, seconds, floored, block.algorithm)


def sharded_shared_init(X_shard, r0: int, N: int, K: int, seed: int, device: torch.device, group=None) -> Init:
    """harness.data.shared_init(X, K, seed) for X split over ranks: the same K rows
    (gathered from their owners by one all-reduce) and the global per-dimension variance."""
    d = X_shard.shape[1]
    comm = _comm_device(device, group)
    idx = np.sort(np.random.default_rng(seed).choice(N, size=K, replace=False))
    mine = (idx >= r0) & (idx < r0 + X_shard.shape[0])
    means = torch.zeros(K, d, dtype=torch.float64, device=device)
    rows = np.asarray(X_shard[idx[mine] - r0] if isinstance(X_shard, np.ndarray) else X_shard[idx[mine] - r0].cpu())
    means[torch.as_tensor(np.flatnonzero(mine), device=device)] = torch.as_tensor(rows, device=device).double()
    means = _all_reduce(means, comm, group)
    sums = _all_reduce(column_sums(X_shard, device), comm, group)
    mean = sums[0] / N
    var = (sums[1] / N - mean * mean).cpu().numpy()
    return Init(weights=np.full(K, 1.0 / K, dtype=np.float32), means=means.cpu().numpy().astype(np.float32),
                variances=np.broadcast_to(var, (K, d)).astype(np.float32).copy())


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
    p = argparse.ArgumentParser(prog="torchrun --nproc_per_node=G -m kernels.distributed",
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
                      "streamed": not isinstance(X, torch.Tensor), "algorithm": r.algorithm,
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
