"""Data-parallel EM with torch.distributed: every rank holds a shard of the rows.

An EM iteration needs the data only through sums over rows (:mod:`turbo_gmm.estep`),
so each rank runs the fused E-step on its shard, the float64 statistics
(n, s, u, ell) are all-reduced in one call, and every rank runs the same M-step on
the same sums -- the parameters stay identical on every rank without being sent.
The center of the in-kernel shift is the global column mean, one more all-reduce.
NCCL on GPUs (one rank per GPU), gloo on CPUs (kernels in the Triton interpreter
under TRITON_INTERPRET=1, else the float64 torch fallback).

A script started by ``torchrun`` initializes the process group, gives each rank its
rows and calls :func:`fit_sharded` on every rank; :func:`sharded_shared_init` is
:func:`turbo_gmm.datasets.shared_init` for rows split over ranks. The benchmark on the
seeded data, each rank generating only its shard, is harness/studies/distributed_bench.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from .em import interpreter_mode
from .estep import BlockStatistics, Statistics, mstep_diag
from .records import Init
from .streaming import rows_per_chunk, streamed_statistics


@dataclass
class ShardedFit:
    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihoods: list  # sum over all ranks' rows, at each iteration's incoming parameters
    iteration_seconds: list
    n_floored: int
    algorithm: str
    precision: str  # the kernels' ("tf32x3", "ieee", "fp64"), or "ieee" for the float64 torch fallback


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


def column_sums(X_shard, device: torch.device, rows: int = 1 << 20, sample_weight=None) -> torch.Tensor:
    """(2, d) float64 [sum w x | sum w x^2] of this rank's rows (tensor or host array), in row blocks; w = 1
    without ``sample_weight`` (a float64 (rows,) tensor on ``device``)."""
    out = torch.zeros(2, X_shard.shape[1], dtype=torch.float64, device=device)
    for r0 in range(0, X_shard.shape[0], rows):
        block = X_shard[r0 : r0 + rows]
        x = (block if isinstance(block, torch.Tensor) else torch.as_tensor(np.asarray(block))).to(device).double()
        wx = x if sample_weight is None else x * sample_weight[r0 : r0 + rows, None]
        out[0] += wx.sum(0)
        out[1] += (wx * x).sum(0)
    return out


def global_column_mean(X_shard, N: int, device: torch.device, group=None) -> torch.Tensor:
    """float64 (d,) mean of the rows of every rank."""
    return _all_reduce(column_sums(X_shard, device)[0], _comm_device(device, group), group) / N


def shard_weights(X_shard, sample_weight, device: torch.device, comm: torch.device, group=None):
    """(this rank's weights as float64 on ``device``, the sum of every rank's) after scikit-learn's checks of
    ``_check_sample_weight`` (finite, >= 0, one per row; positive somewhere over all ranks -- a shard may be all 0)."""
    w = torch.as_tensor(np.asarray(sample_weight) if not isinstance(sample_weight, torch.Tensor) else sample_weight,
                        device=device).double()
    if w.ndim != 1 or w.shape[0] != X_shard.shape[0]:
        raise ValueError(f"sample_weight must have shape ({X_shard.shape[0]},), got {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("sample_weight must be finite and >= 0")
    total = float(_all_reduce(w.sum().reshape(1), comm, group))
    if not total > 0:
        raise ValueError("sample_weight must have at least one positive entry")
    return w, total


def fit_sharded(X_shard, init, n_iter: int, N: int, *, sample_weight=None, center: torch.Tensor | None = None,
                reg_covar: float = 1e-6, backend: str | None = None, algorithm: str = "auto", precision: str = "tf32x3",
                max_device_bytes: int | None = None, device=None, group=None) -> ShardedFit:
    """``n_iter`` EM iterations over the union of every rank's ``X_shard`` (N rows in all).

    X_shard: this rank's rows, a float32 tensor on ``device`` (float32 or float64 under ``precision="fp64"``)
    or a host array that is streamed through ``max_device_bytes`` (:mod:`turbo_gmm.streaming`, float32 chunks). init: a
    :class:`turbo_gmm.records.Init` or (weights, means, variances), the same on every rank. sample_weight: this
    rank's rows' weights or None: every statistic weighted as in :func:`turbo_gmm.fit`, the weights' sum over all
    ranks normalizing n_k, and the default center the weighted mean. backend: "triton" or "torch" (default:
    triton on CUDA or in the interpreter, else torch).
    """
    device = torch.device(device) if device is not None else (
        X_shard.device if isinstance(X_shard, torch.Tensor) else torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    backend = backend or ("triton" if device.type == "cuda" or interpreter_mode() else "torch")
    comm = _comm_device(device, group)
    sw, total_weight = (None, N) if sample_weight is None else shard_weights(X_shard, sample_weight, device, comm, group)
    if center is None:
        center = _all_reduce(column_sums(X_shard, device, sample_weight=sw)[0], comm, group) / total_weight
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
            st = streamed_statistics(X_shard, block, (w, m, v), rows, device,
                                     sample_weight=None if sw is None else sw.cpu().numpy())
        else:
            st = block(X_shard, w, m, v, sample_weight=sw)
        total = Statistics.from_flat(_all_reduce(st.flat(), comm, group), K, d)
        w, m, v, f = mstep_diag(total, total_weight, center, reg_covar)
        floored += int(f)
        lls.append(float(total.ll))  # synchronizes: the iteration is over on this rank
        seconds.append(time.perf_counter() - t0)
    return ShardedFit(w, m, v, lls, seconds, floored, block.algorithm, block.precision)


def sharded_shared_init(X_shard, r0: int, N: int, K: int, seed: int, device: torch.device, group=None) -> Init:
    """turbo_gmm.datasets.shared_init(X, K, seed) for X split over ranks: the same K rows
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
