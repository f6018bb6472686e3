"""Fused k-means kernels: Lloyd's assignment with the new centers' sums, and the k-means++ D^2 potentials.

One persistent launch reads each row tile once (the torch-op iteration ran ~12x its arithmetic):

* :func:`assign_and_sum` (Lloyd): the score ``||y_k||^2 + 2 y_k.c - 2 x.y_k`` (y = center - c) against every
  center tile as tf32x3 products (or plain fp32 under "ieee"), a running argmin (ties to the lowest index),
  labels written in place and changes counted; the new centers' sums from the tile's one-hot (exact in TF32)
  contracted on the tensor cores, added in float64 per program (no atomics: deterministic). Float32 scores:
  a row whose two nearest centers tie to float32 rounding may get the other label.
* :func:`candidate_potentials`, :func:`fold_nearest` (k-means++): float64 sums of
  ``min(closest_i, ||x_i - y_t||^2)`` in the direct form (no cancellation), as scikit-learn's cumulative
  sums need.

CUDA, or CPU tensors under TRITON_INTERPRET=1; float32 contiguous X with d <= MAX_FEATURES (:func:`supported`)."""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..launch import program_count
from ..tf32x3 import dot, split

MAX_FEATURES = 256  # d_pad of the row tile held in registers
BIG_SCORE = tl.constexpr(3.0e38)  # the padded centers' bias: never the minimum (constexpr: compiled Triton reads no plain globals)
ASSIGN_PROGRAMS_PER_SM = 1  # 255 registers x 8 warps (sm_90 compile): one program fills an SM
POTENTIAL_PROGRAMS_PER_SM = 4
ASSIGN_WARPS = 8
POTENTIAL_WARPS = 4
POTENTIAL_TILE_ELEMENTS = 4096  # rows x d_pad of one k-means++ row tile (float64 in registers)


def supported(X: torch.Tensor) -> bool:
    """Whether the fused kernels take X: float32, contiguous, d <= MAX_FEATURES, on CUDA (or the interpreter)."""
    interpreted = os.environ.get("TRITON_INTERPRET", "0") == "1"
    return (X.dtype == torch.float32 and X.is_contiguous() and X.ndim == 2 and X.shape[1] <= MAX_FEATURES
            and (X.is_cuda or (interpreted and X.device.type == "cpu")))


def _pad(n: int) -> int:
    return max(16, triton.next_power_of_2(n))


@triton.jit
def _assign_kernel(
    X, W, bias, labels, sums, counts, changed,  # X (N, d) f32; W (D_PAD, K_PAD) f32 = -2 y^T; bias (K_PAD,) f32;
    N, d, n_tiles,                             # labels (N,) i64 in/out; sums (P, K_PAD, D_PAD) f64, counts (P, K_PAD)
    K_PAD: tl.constexpr, D_PAD: tl.constexpr,  # f64 zeroed by the caller; changed (P,) i64
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, UPDATE: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, D_PAD)
    col_ok = cols < d
    n_changed = tl.zeros((BLOCK_M,), tl.int32)
    for t in range(pid, n_tiles, tl.num_programs(0)):
        rows = tl.arange(0, BLOCK_M).to(tl.int64) + t * BLOCK_M  # t * BLOCK_M < N fits int32; rows * d may not
        row_ok = rows < N
        x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        x_hi, x_lo = split(x, PRECISION)
        best = tl.full((BLOCK_M,), BIG_SCORE, tl.float32)
        best_k = tl.zeros((BLOCK_M,), tl.int32)
        for k0 in range(0, K_PAD, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(W + cols[:, None] * K_PAD + kk[None, :])
            w_hi, w_lo = split(w, PRECISION)
            score = dot(x_hi, x_lo, w_hi, w_lo, tl.zeros((BLOCK_M, BLOCK_K), tl.float32), PRECISION)
            score += tl.load(bias + kk)[None, :]
            tile_min = tl.min(score, 1)
            tile_arg = tl.argmin(score, 1, tie_break_left=True) + k0
            better = tile_min < best  # strict: an earlier tile keeps a tie (NumPy's first index)
            best = tl.where(better, tile_min, best)
            best_k = tl.where(better, tile_arg, best_k)
        old = tl.load(labels + rows, mask=row_ok, other=0)
        n_changed += ((old != best_k.to(tl.int64)) & row_ok).to(tl.int32)
        tl.store(labels + rows, best_k.to(tl.int64), mask=row_ok)
        if UPDATE:
            for k0 in range(0, K_PAD, BLOCK_K):
                kk = k0 + tl.arange(0, BLOCK_K)
                onehot_t = tl.trans(((best_k[:, None] == kk[None, :]) & row_ok[:, None]).to(tl.float32))
                if PRECISION == "tf32x3":  # the one-hot is exact in TF32: two products carry x's float32 digits
                    part = tl.dot(onehot_t, x_lo, input_precision="tf32")
                    part = tl.dot(onehot_t, x_hi, part, input_precision="tf32")
                else:
                    part = tl.dot(onehot_t, x, input_precision=PRECISION)
                at = sums + (pid * K_PAD + kk[:, None]) * D_PAD + cols[None, :]
                tl.store(at, tl.load(at) + part.to(tl.float64))
                at_n = counts + pid * K_PAD + kk
                tl.store(at_n, tl.load(at_n) + tl.sum(onehot_t, 1).to(tl.float64))
    tl.store(changed + pid, tl.sum(n_changed, 0).to(tl.int64))


class Assigner:
    """Nearest-center labels of X (N, d) float32 with the per-cluster sums and counts, one launch per call."""

    def __init__(self, X: torch.Tensor, center: torch.Tensor, n_clusters: int, precision: str = "tf32x3"):
        if precision not in ("tf32x3", "ieee"):
            raise ValueError(f"precision must be 'tf32x3' or 'ieee', got {precision!r}")
        N, d = X.shape
        self.X, self.center, self.K, self.precision = X, center, n_clusters, precision
        self.k_pad, self.d_pad = _pad(n_clusters), _pad(d)
        self.block_m = 128 if self.d_pad <= 64 else 64
        self.block_k = min(64 if self.d_pad <= 64 else 32, self.k_pad)  # tf32x3 at d_pad 128: 262 KB of shared at 64
        self.n_tiles = triton.cdiv(N, self.block_m)
        self.programs = program_count(self.n_tiles, X.device, ASSIGN_PROGRAMS_PER_SM)
        self.W = torch.zeros((self.d_pad, self.k_pad), dtype=torch.float32, device=X.device)
        self.bias = torch.full((self.k_pad,), BIG_SCORE.value, dtype=torch.float32, device=X.device)

    def __call__(self, centers: torch.Tensor, labels: torch.Tensor, update: bool = True):
        """Labels in place for ``centers``; (sums (K, d), counts (K,), labels changed), sums None without update."""
        K, d, dev = self.K, self.X.shape[1], self.X.device
        y = centers - self.center
        self.W[:d, :K] = (-2.0 * y).T.float()
        self.bias[:K] = ((y * y).sum(1) + 2.0 * (y @ self.center)).float()
        P = self.programs
        sums = torch.zeros((P if update else 1, self.k_pad, self.d_pad), dtype=torch.float64, device=dev)
        counts = torch.zeros((P if update else 1, self.k_pad), dtype=torch.float64, device=dev)
        changed = torch.empty(P, dtype=torch.int64, device=dev)
        _assign_kernel[(P,)](self.X, self.W, self.bias, labels, sums, counts, changed, self.X.shape[0], d, self.n_tiles,
                             K_PAD=self.k_pad, D_PAD=self.d_pad, BLOCK_M=self.block_m, BLOCK_K=self.block_k,
                             PRECISION=self.precision, UPDATE=update, num_warps=ASSIGN_WARPS)
        if not update:
            return None, None, changed.sum()
        return sums.sum(0)[:K, :d], counts.sum(0)[:K], changed.sum()


@triton.jit
def _potentials_kernel(
    X, candidates, closest, partial,  # X (N, d) f32; candidates (T_PAD, D_PAD) f32 rows; closest (N,) f64;
    N, d, n_tiles,                    # partial (P, T_PAD) f64: per program, sum_i min(closest_i, |x_i - y_t|^2)
    T: tl.constexpr, T_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_M: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, D_PAD)
    col_ok = cols < d
    slots = tl.arange(0, T_PAD)
    pots = tl.zeros((T_PAD,), tl.float64)
    for t in range(pid, n_tiles, tl.num_programs(0)):
        rows = tl.arange(0, BLOCK_M).to(tl.int64) + t * BLOCK_M  # t * BLOCK_M < N fits int32; rows * d may not
        row_ok = rows < N
        x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        x = x.to(tl.float64)
        near = tl.load(closest + rows, mask=row_ok, other=0.0)
        for j in tl.static_range(T):
            y = tl.load(candidates + j * D_PAD + cols).to(tl.float64)
            diff = x - y[None, :]
            dist = tl.minimum(tl.sum(diff * diff, 1), near)
            pots += tl.where(slots == j, tl.sum(tl.where(row_ok, dist, 0.0), 0), 0.0)
    tl.store(partial + pid * T_PAD + slots, pots)


@triton.jit
def _fold_kernel(X, point, closest, N, d, BLOCK_M: tl.constexpr, D_PAD: tl.constexpr):
    """closest_i <- min(closest_i, |x_i - point|^2), point (D_PAD,) f32."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, D_PAD)
    row_ok = rows < N
    x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & (cols < d)[None, :], other=0.0)
    diff = x.to(tl.float64) - tl.load(point + cols).to(tl.float64)[None, :]
    dist = tl.sum(diff * diff, 1)
    near = tl.load(closest + rows, mask=row_ok, other=0.0)
    tl.store(closest + rows, tl.minimum(near, dist), mask=row_ok)


def _potential_block_rows(d_pad: int) -> int:
    return max(16, POTENTIAL_TILE_ELEMENTS // d_pad)


def padded_rows(X: torch.Tensor, rows: torch.Tensor, n_rows: int | None = None) -> torch.Tensor:
    """X[rows] as a zero-padded (n_rows or len(rows), d_pad) float32 block (a device gather, no host sync)."""
    out = torch.zeros((n_rows or rows.shape[0], _pad(X.shape[1])), dtype=torch.float32, device=X.device)
    out[: rows.shape[0], : X.shape[1]] = X[rows]
    return out


def candidate_potentials(X: torch.Tensor, candidates: torch.Tensor, closest: torch.Tensor) -> torch.Tensor:
    """(T,) float64: for each candidate row index, sum_i min(closest_i, ||x_i - X[cand]||^2)."""
    N, d = X.shape
    T = candidates.shape[0]
    t_pad, d_pad = _pad(T), _pad(d)
    block = _potential_block_rows(d_pad)
    n_tiles = triton.cdiv(N, block)
    P = program_count(n_tiles, X.device, POTENTIAL_PROGRAMS_PER_SM)
    partial = torch.empty((P, t_pad), dtype=torch.float64, device=X.device)
    _potentials_kernel[(P,)](X, padded_rows(X, candidates, t_pad), closest, partial, N, d, n_tiles,
                             T=T, T_PAD=t_pad, D_PAD=d_pad, BLOCK_M=block, num_warps=POTENTIAL_WARPS)
    return partial.sum(0)[:T]


def fold_nearest(X: torch.Tensor, row: torch.Tensor, closest: torch.Tensor) -> None:
    """closest <- min(closest, ||x - X[row]||^2) in place; row: (1,) int64 on X's device."""
    N, d = X.shape
    d_pad = _pad(d)
    block = _potential_block_rows(d_pad)
    _fold_kernel[(triton.cdiv(N, block),)](X, padded_rows(X, row)[0], closest, N, d, BLOCK_M=block, D_PAD=d_pad,
                                           num_warps=POTENTIAL_WARPS)
