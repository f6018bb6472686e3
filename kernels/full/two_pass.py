"""Full covariance, Algorithm 3: row normalizers first, then the statistics by component tile.

Pass 1 scores every component tile of its rows and writes L = m + log(lambda) and ell; pass 2 puts
component tiles x row splits on the grid, recomputes the score, forms Gamma = exp(S - L) times the sample
weight and adds the statistics into its slab slot, so a program's state is one component tile whatever K."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _interpreter as interpreter_compat, tf32x3
from .parameters import PAIR_BLOCK, slab_table, statistics_rows, zero_slab
from .tiles import (accumulate_statistics, centered_tile, prefetch_rows, resident_products_score, resident_weights,
    row_weights, score_tile)
from ..launch import program_count, statistics_grid
from ..diag.lift import SENTINEL

interpreter_compat.install()


@triton.jit
def _full_normalizer_kernel(
    X, center, w, Wa, wa_lo, Wb, wb_lo, bias, pair_i, pair_j, L_out, ll_part,  # L_out (N,) f32; ll_part (tiles,) f64
    n_pairs, N, d, stride_x,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F: tl.constexpr,
    COLS: tl.constexpr, DATAFLOW: tl.constexpr, PRECISION: tl.constexpr, WEIGHTED: tl.constexpr,
    SENTINEL_VALUE: tl.constexpr,
):
    tile = tl.program_id(0)
    rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    x_hi, x_lo = tf32x3.split(centered_tile(X, center, rows, tl.arange(0, D_PAD), N, d, stride_x), PRECISION)
    m = tl.full([BLOCK_N], SENTINEL_VALUE, dtype=tl.float32)
    lam = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K_PAD, BLOCK_K):
        s = score_tile(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb, wb_lo,
                       bias, k0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, F, COLS, DATAFLOW, PRECISION)
        m_new = tl.maximum(m, tl.max(s, 1))
        lam = lam * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), 1)
        m = m_new
    L = m + tl.log(lam)
    tl.store(L_out + rows, L, mask=rows < N)
    tl.store(ll_part + tile, tl.sum((row_weights(w, rows, N, WEIGHTED) * L).to(tl.float64), 0))


@triton.jit
def _full_statistics_kernel(
    X, center, w, Wa, wa_lo, Wb, wb_lo, bias, shift, pair_i, pair_j, L, slab,  # slab: turbo_gmm.full.parameters.zero_slab
    n_pairs, N, d, stride_x, n_tiles, n_splits, slab_rows,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F: tl.constexpr,
    COLS: tl.constexpr, DATAFLOW: tl.constexpr, PRECISION: tl.constexpr, WEIGHTED: tl.constexpr,
    SHIFTED: tl.constexpr, RESIDENT: tl.constexpr, PREFETCH: tl.constexpr,
):
    k_tile = tl.program_id(0)
    split = tl.program_id(1)
    k0 = k_tile * BLOCK_K
    my_slab = slab + (k_tile * n_splits + split).to(tl.int64) * slab_rows * BLOCK_K
    if RESIDENT:  # this component tile's products weights, in shared memory over the program's row tiles
        his, los = resident_weights(Wa, wa_lo, k0, D_PAD, BLOCK_K, COLS, PRECISION)
    for tile in range(split, n_tiles, n_splits):
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        prefetch_rows(X, rows + n_splits * BLOCK_N, N, stride_x, D_PAD, PREFETCH)
        x_hi, x_lo = tf32x3.split(centered_tile(X, center, rows, tl.arange(0, D_PAD), N, d, stride_x), PRECISION)
        if RESIDENT:
            s = resident_products_score(x_hi, x_lo, his, los, Wb, bias, k0, D_PAD, BLOCK_N, BLOCK_K, COLS,
                                        PRECISION)
        else:
            s = score_tile(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb,
                           wb_lo, bias, k0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, F, COLS, DATAFLOW, PRECISION)
        Lr = tl.load(L + rows, mask=rows < N, other=0.0)
        g = tl.exp(s - Lr[:, None]) * row_weights(w, rows, N, WEIGHTED)[:, None]
        accumulate_statistics(my_slab, BLOCK_K, slab_rows, 0, g, x_hi, x_lo, X, center, shift + k0 * D_PAD, rows,
                              pair_i, pair_j, n_pairs, N, d, stride_x, D_PAD, BLOCK_N, BLOCK_K, F, PRECISION, SHIFTED)


def two_pass_statistics(X, center, sample_weight, params, shift, pairs, k_pad: int, dataflow: str, precision: str,
                        cfg, L_buffer=None):
    """Same contract as :func:`turbo_gmm.full.one_pass.one_pass_statistics`; ``L_buffer`` (N,) float32 is the
    row-normalizer scratch (allocated when not given)."""
    N, d = X.shape
    d_pad = center.shape[0]
    block_k = min(cfg.block_k, k_pad)
    if cfg.resident_weights and dataflow != "products":
        raise ValueError(f"resident_weights needs the products dataflow, got {dataflow!r}")
    n_pairs = pairs[0].shape[0]
    rows = statistics_rows(d_pad, n_pairs)
    weights = X if sample_weight is None else sample_weight
    meta = dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, F=PAIR_BLOCK, COLS=cfg.cols,
                DATAFLOW=dataflow, PRECISION=precision, WEIGHTED=sample_weight is not None,
                num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    n_tiles = triton.cdiv(N, cfg.block_n)
    L = L_buffer if L_buffer is not None else torch.empty(N, dtype=torch.float32, device=X.device)
    ll_part = torch.empty(n_tiles, dtype=torch.float64, device=X.device)
    _full_normalizer_kernel[(n_tiles,)](X, center, weights, *params, pairs[0], pairs[1], L, ll_part, n_pairs, N, d,
                                        X.stride(0), SENTINEL_VALUE=SENTINEL, **meta)
    k_tiles, n_splits = statistics_grid(k_pad, block_k, program_count(n_tiles, X.device, cfg.programs_per_sm))
    slab = zero_slab((k_tiles, n_splits), rows, block_k, shift is not None, cfg.slab_dtype, X.device)
    _full_statistics_kernel[(k_tiles, n_splits)](X, center, weights, *params, center if shift is None else shift,
                                                 pairs[0], pairs[1], L, slab, n_pairs, N, d, X.stride(0), n_tiles,
                                                 n_splits, rows, SHIFTED=shift is not None,
                                                 RESIDENT=bool(cfg.resident_weights),
                                                 PREFETCH=not triton.knobs.runtime.interpret, **meta)
    return slab_table(slab.sum(1, dtype=torch.float64), shift is not None), ll_part.sum()
