"""Algorithm 3: two sweeps of the component axis, for K beyond the on-chip budget.

Pass 1 (row tiles on the grid) sweeps the component tiles with the online (m, lambda) merge and writes
L = m + log(lambda) (N floats) and ell. Pass 2 puts component tiles on the grid, split over rows: each program
keeps one tile's lifted parameters and accumulators on chip, recomputes the score of its rows, forms
Gamma = exp(S - L), adds each row tile's statistics into float32 running sums (at most
LaunchConfig.sum_tiles tiles a sum) and commits them with one atomic add. X is read 1 + ceil(K / BLOCK_K) times.

Under tf32x3 each operand is split into TF32 halves once: the row tile once for both dots, W once a pass-2
program; pass 1 streams W^T already split and transposed, so wgmma reads it from the pipeliner's shared
copy without bank conflicts. Under fp64 everything is float64."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _interpreter as interpreter_compat, tf32x3
from ..launch import LaunchConfig, statistics_pass_grid, weight_arguments
from .lift import (SENTINEL, accumulate_statistics, commit_statistics, gathers_rows, lifted_score, split_rows,
    split_weights, statistics_accumulators, weight_tile)

interpreter_compat.install()  # runtime range() bounds in the interpreter on NumPy >= 2.4


@triton.jit
def _normalizer_kernel(
    X, center, W, WT_split, b, L_out, ll_out,  # WT_split (2, K_PAD, 2*D_PAD): W^T's TF32 halves (tf32x3 only)
    N, d, K, stride_x, stride_wl, stride_wk,  # W's strides (turbo_gmm.diag.lift.weight_tile)
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr, GATHER: tl.constexpr, SENTINEL_VALUE: tl.constexpr,
    sw=None, WEIGHTED: tl.constexpr = False,  # sw (N,): the sample weights, read only when WEIGHTED
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    HALVES: tl.constexpr = D_PAD >= 64  # the lift's halves contracted apart, as in one_pass.py
    lanes = tl.arange(0, 2 * D_PAD)
    cols = tl.arange(0, D_PAD)
    x_hi, x_lo, q_hi, q_lo, row_ok = split_rows(X, center, rows, N, d, stride_x, D_PAD, PRECISION, HALVES, GATHER)
    acc = tl.float64 if PRECISION == "fp64" else tl.float32
    m = tl.full([BLOCK_N], SENTINEL_VALUE, dtype=acc)
    lam = tl.zeros([BLOCK_N], dtype=acc)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        if HALVES:
            if PRECISION == "tf32x3":  # W^T rows: [mean half | precision half], each D_PAD lanes
                hi = WT_split + kk[:, None] * (2 * D_PAD) + cols[None, :]
                lo = WT_split + (K_PAD + kk[:, None]) * (2 * D_PAD) + cols[None, :]
                wm_hi, wm_lo = tl.trans(tl.load(hi)), tl.trans(tl.load(lo))
                wq_hi, wq_lo = tl.trans(tl.load(hi + D_PAD)), tl.trans(tl.load(lo + D_PAD))
            else:
                wm_hi = weight_tile(W, cols, kk, stride_wl, stride_wk)
                wq_hi = weight_tile(W, D_PAD + cols, kk, stride_wl, stride_wk)
                wm_lo, wq_lo = wm_hi, wq_hi
        else:
            if PRECISION == "tf32x3":
                wm_hi = tl.trans(tl.load(WT_split + kk[:, None] * (2 * D_PAD) + lanes[None, :]))
                wm_lo = tl.trans(tl.load(WT_split + (K_PAD + kk[:, None]) * (2 * D_PAD) + lanes[None, :]))
            else:
                wm_hi = weight_tile(W, lanes, kk, stride_wl, stride_wk)
                wm_lo = wm_hi
            wq_hi, wq_lo = wm_hi, wm_lo
        s = lifted_score(x_hi, x_lo, q_hi, q_lo, wm_hi, wm_lo, wq_hi, wq_lo,
                         tl.zeros([BLOCK_N, BLOCK_K], acc), PRECISION, HALVES)
        s += tl.load(b + kk)[None, :]
        m_new = tl.maximum(m, tl.max(s, 1))
        lam = lam * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), 1)
        m = m_new
    L = m + tl.log(lam)
    tl.store(L_out + rows, L, mask=row_ok)
    ell = tl.where(row_ok, L, 0.0)
    if WEIGHTED:  # ell = sum_i w_i L_i; L itself stays unweighted for pass 2
        ell *= tl.load(sw + rows, mask=row_ok, other=0.0)
    tl.atomic_add(ll_out, tl.sum(ell.to(tl.float64), 0), sem="relaxed")


# the grid's size (n_splits) is not specialized on (== 1, divisible by 16): it varies with N by whole waves
# (launch.sum_bounded), and one compile serves every N
@triton.jit(do_not_specialize=["n_splits"])
def _statistics_kernel(
    X, center, W, b, L, n_out, su_out,
    N, d, stride_x, stride_wl, stride_wk, n_tiles, n_splits,  # stride_wl, stride_wk: W's (turbo_gmm.diag.lift.weight_tile)
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr, GATHER: tl.constexpr,
    sw=None, WEIGHTED: tl.constexpr = False,  # sw (N,): the sample weights, read only when WEIGHTED
):
    kk = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    split = tl.program_id(1)
    HALVES: tl.constexpr = D_PAD >= 64  # the lift's halves contracted apart, as in one_pass.py
    wm_hi, wm_lo, wq_hi, wq_lo = split_weights(W, kk, stride_wl, stride_wk, K_PAD, D_PAD, PRECISION, HALVES)
    s_sum, u_sum = statistics_accumulators(D_PAD, BLOCK_K, HALVES, PRECISION)
    bias = tl.load(b + kk)  # its dtype (float64 under fp64) is the score's and the sums'
    n_sum = tl.zeros([BLOCK_K], dtype=bias.dtype)
    for tile in range(split, n_tiles, n_splits):
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        x_hi, x_lo, q_hi, q_lo, row_ok = split_rows(X, center, rows, N, d, stride_x, D_PAD, PRECISION, HALVES, GATHER)
        Lr = tl.load(L + rows, mask=row_ok, other=0.0)
        s = lifted_score(x_hi, x_lo, q_hi, q_lo, wm_hi, wm_lo, wq_hi, wq_lo,
                         tl.zeros([BLOCK_N, BLOCK_K], bias.dtype), PRECISION, HALVES)
        g = tl.where(row_ok[:, None], tl.exp(s + bias[None, :] - Lr[:, None]), 0.0)
        if WEIGHTED:  # a row's weight scales its responsibilities
            g *= tl.load(sw + rows, mask=row_ok, other=0.0)[:, None]
        n_sum += tl.sum(g, 0)
        g_hi, g_lo = tf32x3.split(g, PRECISION)
        s_sum, u_sum = accumulate_statistics(x_hi, x_lo, g_hi, g_lo, s_sum, u_sum, PRECISION, HALVES)
    commit_statistics(n_out, su_out, kk, n_sum, s_sum, u_sum, D_PAD, HALVES)


def two_pass_statistics(X: torch.Tensor, center: torch.Tensor, W: torch.Tensor, b: torch.Tensor, K: int,
                        cfg: LaunchConfig, precision: str, out=None, L_buffer=None, sample_weight=None):
    """Statistics of one E-step by Algorithm 3, as :func:`turbo_gmm.diag.one_pass.one_pass_statistics`;
    ``L_buffer`` (N,) in W's dtype is the row-normalizer scratch."""
    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    if out is None:
        f64 = torch.float64
        out = (torch.zeros(k_pad, dtype=f64, device=X.device), torch.zeros(k_pad, 2 * d_pad, dtype=f64, device=X.device),
               torch.zeros(1, dtype=f64, device=X.device))
    n, su, ll = out
    L = L_buffer if L_buffer is not None else torch.empty(N, dtype=W.dtype, device=X.device)
    normalizer_pass(X, center, W, b, K, cfg, precision, L, ll, sample_weight)
    statistics_pass(X, center, W, b, K, cfg, precision, L, n, su, sample_weight)
    return n, su, ll


def normalizer_pass(X, center, W, b, K: int, cfg: LaunchConfig, precision: str, L, ll, sample_weight=None) -> None:
    """Pass 1: L[i] = m_i + log(lambda_i) for every row, ll += sum_i w_i L[i] (w_i = 1 without weights)."""
    N, d = X.shape
    meta = normalizer_meta(cfg, W.shape[1], W.shape[0] // 2, precision)
    WT_split = tf32x3.split_transposed(W) if precision == "tf32x3" else W  # ieee, fp64: W itself, WT_split unused
    _normalizer_kernel[(triton.cdiv(N, meta["BLOCK_N"]),)](X, center, W, WT_split, b, L, ll, N, d, K, X.stride(0),
                                                           *W.stride(), **meta, **weight_arguments(sample_weight))


def kernel_name(X: torch.Tensor, W: torch.Tensor, cfg: LaunchConfig, precision: str) -> str:
    """"two_pass_ws" where the config routes pass 2 there and that kernel takes it, else "two_pass"."""
    if cfg.warp_specialized_pass2 and precision == "tf32x3":
        from . import two_pass_ws  # Gluon: Hopper only

        if two_pass_ws.refusal(X, W, cfg) is None:
            return "two_pass_ws"
    return "two_pass"


def statistics_pass(X, center, W, b, K: int, cfg: LaunchConfig, precision: str, L, n, su, sample_weight=None) -> None:
    """Pass 2: n, [s | u] += the statistics of w_i exp(S - L), component tiles x row splits."""
    if kernel_name(X, W, cfg, precision) == "two_pass_ws":
        from . import two_pass_ws  # Gluon: Hopper only

        return two_pass_ws.statistics_pass_ws(X, center, W, b, K, cfg, L, n, su, sample_weight)
    N, d = X.shape
    meta = statistics_meta(cfg, W.shape[1], W.shape[0] // 2, precision)
    n_tiles = triton.cdiv(N, meta["BLOCK_N"])
    k_tiles, n_splits = statistics_pass_grid(K, meta["BLOCK_K"], n_tiles, X.device, cfg)
    _statistics_kernel[(k_tiles, n_splits)](X, center, W, b, L, n, su, N, d, X.stride(0), *W.stride(), n_tiles,
                                            n_splits, **meta, **weight_arguments(sample_weight))


def normalizer_meta(cfg: LaunchConfig, k_pad: int, d_pad: int, precision: str) -> dict:
    """Pass 1's compile-time parameters and launch options (also what harness.studies.resources compiles)."""
    return dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.normalizer_block_n or cfg.block_n,
                BLOCK_K=min(cfg.normalizer_block_k or cfg.block_k, k_pad), PRECISION=precision,
                GATHER=gathers_rows(precision),
                SENTINEL_VALUE=SENTINEL, num_warps=cfg.normalizer_warps or cfg.num_warps, num_stages=cfg.num_stages)


def statistics_meta(cfg: LaunchConfig, k_pad: int, d_pad: int, precision: str) -> dict:
    """Pass 2's compile-time parameters and launch options (also what harness.studies.resources compiles)."""
    block_k = min(cfg.block_k, k_pad)
    return dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, PRECISION=precision,
                GATHER=gathers_rows(precision),
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, **cfg.register_cap())
