"""Data-parallel EM with torch.distributed: every rank holds a shard of the rows.

Each rank runs the fused E-step on its shard, the float64 statistics (n, s, u, ell) are all-reduced in one
call and every rank runs the same M-step, so the parameters stay identical without being sent; the center
is the global column mean (one more all-reduce). NCCL on GPUs, gloo on CPUs. Under ``torchrun``, call
:func:`fit_sharded` on every rank; :func:`sharded_shared_init` is ``datasets.shared_init`` over shards."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ._interpreter import interpreter_mode
from .diag.estep import BlockStatistics, Statistics, mstep_diag
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


def _all_reduce(t: torch.Tensor, comm_device: torch.device, group=None, op=dist.ReduceOp.SUM) -> torch.Tensor:
    """Sum (or ``op``) over ranks, on the device the backend communicates from (CPU for gloo)."""
    buf = t.to(comm_device)
    dist.all_reduce(buf, op=op, group=group)
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
    """(this rank's weights at mean 1 over all ranks, float64 on ``device``; their total; the scale back to the
    caller's units) after scikit-learn's checks, normalized globally in float64 as
    :func:`turbo_gmm._data.unit_mean_weights` does on one process."""
    w = torch.as_tensor(np.asarray(sample_weight) if not isinstance(sample_weight, torch.Tensor) else sample_weight,
                        device=device).double()
    if w.ndim != 1 or w.shape[0] != X_shard.shape[0]:
        raise ValueError(f"sample_weight must have shape ({X_shard.shape[0]},), got {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("sample_weight must be finite and >= 0")
    top = w.max().reshape(1) if w.numel() else torch.zeros(1, dtype=torch.float64, device=device)
    top = float(_all_reduce(top, comm, group, op=dist.ReduceOp.MAX))
    if not top > 0:
        raise ValueError("sample_weight must have at least one positive entry")
    v = w / top
    sums = _all_reduce(torch.stack([v.sum(), torch.tensor(float(w.shape[0]), dtype=torch.float64, device=device)]),
                       comm, group)
    total, N = float(sums[0]), float(sums[1])
    return v * (N / total), N, top * (total / N)


def fit_sharded(X_shard, init, n_iter: int, N: int, *, sample_weight=None, center: torch.Tensor | None = None,
                reg_covar: float = 1e-6, backend: str | None = None, algorithm: str = "auto", precision: str = "tf32x3",
                max_device_bytes: int | None = None, device=None, group=None) -> ShardedFit:
    """``n_iter`` diagonal EM iterations over the union of every rank's rows; call it on every rank.

    Parameters
    ----------
    X_shard : torch.Tensor or ndarray
        This rank's rows: a float32 tensor on ``device`` (float64 too under "fp64"), or a host array streamed
        through ``max_device_bytes``.
    init : Init or tuple
        (weights, means, variances), the same on every rank.
    n_iter : int
        Iterations.
    N : int
        Rows over all ranks.
    sample_weight : array-like, optional
        This rank's rows' weights, normalized to mean 1 over all ranks (:func:`shard_weights`).
    center : torch.Tensor, optional
        The in-kernel shift; default the global (weighted) column mean.
    reg_covar, algorithm, precision
        As in :func:`turbo_gmm.fit`.
    backend : {"triton", "torch"}, optional
        Default: triton on CUDA or in the interpreter, else torch.
    max_device_bytes, device, group
        Streaming budget, the rank's device, the process group.

    Returns
    -------
    ShardedFit
        The parameters (identical on every rank) and ell per iteration in the caller's units."""
    device = torch.device(device) if device is not None else (
        X_shard.device if isinstance(X_shard, torch.Tensor) else torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    backend = backend or ("triton" if device.type == "cuda" or interpreter_mode() else "torch")
    comm = _comm_device(device, group)
    sw, total_weight, scale = (None, N, 1.0) if sample_weight is None else shard_weights(X_shard, sample_weight,
                                                                                          device, comm, group)
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
        lls.append(float(total.ll) * scale)  # synchronizes: the iteration is over on this rank
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
