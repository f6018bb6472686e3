"""Tied covariance, Algorithm 3: row normalizers, then component tiles x row splits.

Pass 1 whitens each row tile once and merges (m, lambda) over the component tiles into L; pass 2
whitens again per component-tile program (N d^2 per tile: cheap beside the score at d <= K), forms
Gamma = exp(S - L) times the sample weight and sums n, s = (x - c)^T Gamma in registers."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _interpreter as interpreter_compat, tf32x3
from ..full.tiles import row_weights
from ..launch import program_count, statistics_grid
from ..diag.lift import SENTINEL
from .tiles import tied_score, whitened_tile

interpreter_compat.install()


@triton.jit
def _tied_normalizer_kernel(
    X, center, w, Uz, uz_lo, V, v_lo, bt, L_out, ll_part,  # L_out (N,) f32; ll_part (row tiles,) f64
    N, d, stride_x,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
    WEIGHTED: tl.constexpr, SENTINEL_VALUE: tl.constexpr,
):
    tile = tl.program_id(0)
    rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    _, _, z_hi, z_lo, zz = whitened_tile(X, center, Uz, uz_lo, rows, N, d, stride_x, D_PAD, BLOCK_N, PRECISION)
    m = tl.full([BLOCK_N], SENTINEL_VALUE, dtype=tl.float32)
    lam = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K_PAD, BLOCK_K):
        s = tied_score(z_hi, z_lo, zz, V, v_lo, bt, k0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, PRECISION)
        m_new = tl.maximum(m, tl.max(s, 1))
        lam = lam * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), 1)
        m = m_new
    L = m + tl.log(lam)
    tl.store(L_out + rows, L, mask=rows < N)
    tl.store(ll_part + tile, tl.sum((row_weights(w, rows, N, WEIGHTED) * L).to(tl.float64), 0))


@triton.jit
def _tied_statistics_kernel(
    X, center, w, Uz, uz_lo, V, v_lo, bt, L, part,  # part (k_tiles, splits, 1 + D_PAD, BLOCK_K) f32
    N, d, stride_x, n_tiles, n_splits,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
    WEIGHTED: tl.constexpr,
):
    k_tile = tl.program_id(0)
    split = tl.program_id(1)
    kl = tl.arange(0, BLOCK_K)
    n_acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    s_acc = tl.zeros([D_PAD, BLOCK_K], dtype=tl.float32)
    for tile in range(split, n_tiles, n_splits):
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        x_hi, x_lo, z_hi, z_lo, zz = whitened_tile(X, center, Uz, uz_lo, rows, N, d, stride_x, D_PAD, BLOCK_N,
                                                   PRECISION)
        s = tied_score(z_hi, z_lo, zz, V, v_lo, bt, k_tile * BLOCK_K, K_PAD, D_PAD, BLOCK_N, BLOCK_K, PRECISION)
        Lr = tl.load(L + rows, mask=rows < N, other=0.0)
        g = tl.exp(s - Lr[:, None]) * row_weights(w, rows, N, WEIGHTED)[:, None]
        n_acc += tl.sum(g, 0)
        g_hi, g_lo = tf32x3.split(g, PRECISION)
        s_acc = tf32x3.dot(tl.trans(x_hi), tl.trans(x_lo), g_hi, g_lo, s_acc, PRECISION)
    base = part + (k_tile * n_splits + split).to(tl.int64) * (1 + D_PAD) * BLOCK_K
    tl.store(base + kl, n_acc)
    tl.store(base + (1 + tl.arange(0, D_PAD))[:, None] * BLOCK_K + kl[None, :], s_acc)


def two_pass_statistics(X, center, sample_weight, params, k_pad: int, precision: str, cfg, L_buffer=None):
    """Same contract as :func:`turbo_gmm.tied.one_pass.one_pass_statistics`; ``L_buffer`` (N,) float32 scratch."""
    N, d = X.shape
    d_pad = center.shape[0]
    block_k = min(cfg.block_k, k_pad)
    weights = X if sample_weight is None else sample_weight
    meta = dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, PRECISION=precision,
                WEIGHTED=sample_weight is not None, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    n_tiles = triton.cdiv(N, cfg.block_n)
    L = L_buffer if L_buffer is not None else torch.empty(N, dtype=torch.float32, device=X.device)
    ll_part = torch.empty(n_tiles, dtype=torch.float64, device=X.device)
    _tied_normalizer_kernel[(n_tiles,)](X, center, weights, *params, L, ll_part, N, d, X.stride(0),
                                        SENTINEL_VALUE=SENTINEL, **meta)
    k_tiles, n_splits = statistics_grid(k_pad, block_k, program_count(n_tiles, X.device, cfg.programs_per_sm))
    part = torch.empty(k_tiles, n_splits, 1 + d_pad, block_k, dtype=torch.float32, device=X.device)
    _tied_statistics_kernel[(k_tiles, n_splits)](X, center, weights, *params, L, part, N, d, X.stride(0), n_tiles,
                                                 n_splits, **meta, **cfg.register_cap())
    return part.sum(1, dtype=torch.float64).permute(1, 0, 2).reshape(1 + d_pad, k_pad), ll_part.sum()
