"""The lift of Lemma 1: the whole score matrix as one product plus an offset.

S = [X | X*X] @ W + b, W = [M*tau | -tau/2]^T (2 d_pad, K_pad), b_k = log pi_k - d/2 log 2pi -
1/2 sum_c log V_kc - 1/2 sum_c mu_kc^2 tau_kc. Built in float64 each iteration, stored in float32 (float64
under "fp64"), zero-padded to powers of two; padded components get the finite sentinel -3e38 in b (never
-inf, whose difference is NaN).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .. import tf32x3
from ..dispatch import FP64
from ..launch import pow2_at_least_16  # noqa: F401 (the kernels' padding, re-exported beside the lift)

SENTINEL = -3.0e38


def lift_dtype(precision: str) -> torch.dtype:
    """The dtype of W, b, the padded center and Algorithm 3's L under ``precision``: the kernels' arithmetic."""
    return torch.float64 if precision == FP64 else torch.float32


def weights_buffer(k_pad: int, d_pad: int, precision: str, device) -> torch.Tensor:
    """An uninitialized W (2 d_pad, k_pad) in :func:`lift_dtype`; under fp64 lanes-contiguous (a transposed
    view), whose shared-memory swizzle is conflict-free for the float64 products where component-major is not."""
    if precision == FP64:
        return torch.empty((k_pad, 2 * d_pad), dtype=torch.float64, device=device).t()
    return torch.empty((2 * d_pad, k_pad), dtype=lift_dtype(precision), device=device)


def lift(weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor, k_pad: int, d_pad: int,
         precision: str = "tf32x3"):
    """(W (2 d_pad, k_pad), b (k_pad,)) in :func:`lift_dtype`; ``means`` already centered."""
    K, d = means.shape
    dtype = lift_dtype(precision)
    w64, m64, v64 = weights.double(), means.double(), variances.double()
    tau = 1.0 / v64
    W = weights_buffer(k_pad, d_pad, precision, means.device).zero_()
    W[:d, :K] = (m64 * tau).T.to(dtype)
    W[d_pad : d_pad + d, :K] = (-0.5 * tau).T.to(dtype)
    b = torch.full((k_pad,), SENTINEL, dtype=dtype, device=means.device)
    b[:K] = torch.where(  # a component of weight 0 scores as a padded one: log 0 = -inf would make NaN of -inf - -inf
        w64 > 0,
        torch.log(w64) - 0.5 * d * math.log(2.0 * math.pi) - 0.5 * torch.log(v64).sum(1) - 0.5 * (m64 * m64 * tau).sum(1),
        SENTINEL).to(dtype)
    return W, b



@triton.jit
def _centered(X, center, rows, src, N, d, stride_x):
    """x - c at rows x columns ``src`` (0 past d) in the center's dtype, and the mask of rows that exist."""
    col_ok = src < d
    row_ok = rows < N
    c = tl.load(center + src)
    offsets = rows.to(tl.int64)[:, None] * stride_x + src[None, :]  # int64: N*d may pass 2**31 elements
    x = tl.load(X + offsets, mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    return tl.where(col_ok[None, :], x.to(c.dtype) - c[None, :], 0.0), row_ok


@triton.jit
def lifted_rows(X, center, rows, N, d, stride_x, D_PAD: tl.constexpr, GATHER: tl.constexpr = False):
    """Row tile of [x - c | (x - c)^2] formed in registers (X*X never stored), 0 in padded lanes, and the row
    mask. GATHER loads X's columns once and gathers them into both halves (fewer shared-memory wavefronts under fp64).
    """
    lanes = tl.arange(0, 2 * D_PAD)
    if GATHER:
        x, row_ok = _centered(X, center, rows, tl.arange(0, D_PAD), N, d, stride_x)
        x = tl.gather(x, tl.broadcast_to((lanes % D_PAD)[None, :], [x.shape[0], 2 * D_PAD]), axis=1)
    else:
        x, row_ok = _centered(X, center, rows, lanes % D_PAD, N, d, stride_x)
    return tl.where(lanes[None, :] < D_PAD, x, x * x), row_ok


@triton.jit
def centered_rows(X, center, rows, N, d, stride_x, D_PAD: tl.constexpr):
    """Row tile of x - c alone (zero in padded columns) and the mask of rows that exist: for a
    kernel that contracts the lift's two halves separately and squares x - c where it needs it."""
    return _centered(X, center, rows, tl.arange(0, D_PAD), N, d, stride_x)


def gathers_rows(precision: str) -> bool:
    """Whether the lifted tile gathers X's columns (:func:`lifted_rows`): under fp64, where it measured faster."""
    return precision == FP64


@triton.jit
def split_rows(X, center, rows, N, d, stride_x, D_PAD: tl.constexpr, PRECISION: tl.constexpr, HALVES: tl.constexpr,
               GATHER: tl.constexpr):
    """The row tile's A operands split into TF32 (high, low), and the row mask: with HALVES x - c and (x - c)^2 apart,
    else the lifted tile's pair (returned twice)."""
    if HALVES:
        xc, row_ok = centered_rows(X, center, rows, N, d, stride_x, D_PAD)
        x_hi, x_lo = tf32x3.split(xc, PRECISION)
        q_hi, q_lo = tf32x3.split(xc * xc, PRECISION)
    else:
        xt, row_ok = lifted_rows(X, center, rows, N, d, stride_x, D_PAD, GATHER)
        x_hi, x_lo = tf32x3.split(xt, PRECISION)
        q_hi, q_lo = x_hi, x_lo
    return x_hi, x_lo, q_hi, q_lo, row_ok


@triton.jit
def weight_tile(W, lanes, kk, stride_wl, stride_wk):
    """W[lanes, kk] through W's strides (row-major, or lanes-contiguous under fp64); a stride of 1 is specialized
    at compile time, so each storage order gets its own loads."""
    return tl.load(W + lanes[:, None] * stride_wl + kk[None, :] * stride_wk)


@triton.jit
def split_weights(W, kk, stride_wl, stride_wk, K_PAD: tl.constexpr, D_PAD: tl.constexpr, PRECISION: tl.constexpr,
                  HALVES: tl.constexpr):
    """W's components kk split as :func:`split_rows` splits the row tile: the lanes of x - c and of
    (x - c)^2 apart when HALVES, else all 2*D_PAD lanes, returned for both pairs (the second one unused)."""
    if HALVES:
        cols = tl.arange(0, D_PAD)
        wm_hi, wm_lo = tf32x3.split(weight_tile(W, cols, kk, stride_wl, stride_wk), PRECISION)
        wq_hi, wq_lo = tf32x3.split(weight_tile(W, D_PAD + cols, kk, stride_wl, stride_wk), PRECISION)
    else:
        lanes = tl.arange(0, 2 * D_PAD)
        wm_hi, wm_lo = tf32x3.split(weight_tile(W, lanes, kk, stride_wl, stride_wk), PRECISION)
        wq_hi, wq_lo = wm_hi, wm_lo
    return wm_hi, wm_lo, wq_hi, wq_lo


@triton.jit
def lifted_score(x_hi, x_lo, q_hi, q_lo, wm_hi, wm_lo, wq_hi, wq_lo, acc, PRECISION: tl.constexpr,
                 HALVES: tl.constexpr):
    """acc + [x - c | (x - c)^2] @ W from the operands of :func:`split_rows` and :func:`split_weights`."""
    acc = tf32x3.dot(x_hi, x_lo, wm_hi, wm_lo, acc, PRECISION)
    if HALVES:
        acc = tf32x3.dot(q_hi, q_lo, wq_hi, wq_lo, acc, PRECISION)
    return acc


@triton.jit
def statistics_accumulators(D_PAD: tl.constexpr, BLOCK_K: tl.constexpr, HALVES: tl.constexpr,
                            PRECISION: tl.constexpr):
    """Zeroed running sums for :func:`accumulate_statistics` (float64 under fp64, else float32): s^T and u^T
    (D_PAD, BLOCK_K) when HALVES, else [s | u]^T (2*D_PAD, BLOCK_K) and an unused placeholder."""
    acc = tl.float64 if PRECISION == "fp64" else tl.float32
    if HALVES:
        s_sum = tl.zeros([D_PAD, BLOCK_K], dtype=acc)
        u_sum = tl.zeros([D_PAD, BLOCK_K], dtype=acc)
    else:
        s_sum = tl.zeros([2 * D_PAD, BLOCK_K], dtype=acc)
        u_sum = tl.zeros([1, 1], dtype=acc)
    return s_sum, u_sum


@triton.jit
def _statistics_product(a_hi, a_lo, g_hi, g_lo, running, PRECISION: tl.constexpr):
    """running += a^T @ Gamma: the product into a fresh accumulator, then added on the CUDA cores. wgmma truncates as
    it accumulates, so an accumulator carried across tiles lost ~1e-4 a component; each tile now costs one float32
    rounding. Under fp64 the sums are float64 and need no bound on the tiles they add."""
    fresh = tl.zeros([a_hi.shape[1], g_hi.shape[1]], dtype=running.dtype)
    return running + tf32x3.dot(tl.trans(a_hi), tl.trans(a_lo), g_hi, g_lo, fresh, PRECISION)


@triton.jit
def accumulate_statistics(x_hi, x_lo, g_hi, g_lo, s_sum, u_sum, PRECISION: tl.constexpr, HALVES: tl.constexpr):
    """[s | u]^T += lifted^T @ Gamma (:func:`_statistics_product`), Gamma staged without bank conflicts; with
    HALVES (x - c)^2 is squared again from x - c's halves rather than held across the exponentials."""
    s_sum = _statistics_product(x_hi, x_lo, g_hi, g_lo, s_sum, PRECISION)
    if HALVES:
        xr = tf32x3.join(x_hi, x_lo, PRECISION)
        q_hi, q_lo = tf32x3.split(xr * xr, PRECISION)
        u_sum = _statistics_product(q_hi, q_lo, g_hi, g_lo, u_sum, PRECISION)
    return s_sum, u_sum


@triton.jit
def commit_statistics(n_out, su_out, kk, n_sum, s_sum, u_sum, D_PAD: tl.constexpr, HALVES: tl.constexpr):
    """n[kk], su[kk] += the running sums in float64, by relaxed atomics: fire-and-forget reductions (the default
    acq_rel adds a fence and an L1 invalidate each); kernel completion publishes them."""
    tl.atomic_add(n_out + kk, n_sum.to(tl.float64), sem="relaxed")
    if HALVES:
        cols = tl.arange(0, D_PAD)
        tl.atomic_add(su_out + kk[None, :] * (2 * D_PAD) + cols[:, None], s_sum.to(tl.float64), sem="relaxed")
        tl.atomic_add(su_out + kk[None, :] * (2 * D_PAD) + D_PAD + cols[:, None], u_sum.to(tl.float64), sem="relaxed")
    else:
        lanes = tl.arange(0, 2 * D_PAD)
        tl.atomic_add(su_out + kk[None, :] * (2 * D_PAD) + lanes[:, None], s_sum.to(tl.float64), sem="relaxed")
