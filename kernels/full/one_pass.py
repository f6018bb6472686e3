"""Full covariance, Algorithm 2: X read once, the score computed once.

A persistent launch striding over row tiles with the whole component axis: prefetch the next tile, load and
split x - c once, score every component tile, merge (m, lambda) online, form Gamma = exp(S - L) times the
sample weight, and add the tile's statistics into the program's slab slot. Score tiles wait in a
per-program scratch (no N x K matrix) when there is more than one component tile."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _interpreter as interpreter_compat, tf32x3
from .parameters import PAIR_BLOCK, slab_table, statistics_rows, zero_slab
from .tiles import (accumulate_statistics, centered_tile, prefetch_rows, resident_products_score, resident_weights,
    row_weights, score_tile)
from ..launch import program_count
from ..diag.lift import SENTINEL

interpreter_compat.install()


@triton.jit
def _full_one_pass_kernel(
    X, center, w, Wa, wa_lo, Wb, wb_lo, bias, shift, pair_i, pair_j,  # X (N, d) f32; w (N,) f32 when WEIGHTED;
    # shift (K_PAD, D_PAD) f32: the moments' per-component shifts when SHIFTED (kernels/full/tiles.py)
    scratch, slab, ll_part,  # scratch (P, BLOCK_N, K_PAD) f32; slab (P, rows, K_PAD) (zero_slab); ll_part (P,) f64
    n_pairs, N, d, stride_x, n_tiles, num_programs, slab_rows,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, F: tl.constexpr,
    COLS: tl.constexpr, DATAFLOW: tl.constexpr, PRECISION: tl.constexpr, WEIGHTED: tl.constexpr,
    SENTINEL_VALUE: tl.constexpr, SHIFTED: tl.constexpr, RESIDENT: tl.constexpr, PREFETCH: tl.constexpr,
):
    pid = tl.program_id(0)
    my_slab = slab + pid.to(tl.int64) * slab_rows * K_PAD
    my_scratch = scratch + pid.to(tl.int64) * BLOCK_N * K_PAD
    rr = tl.arange(0, BLOCK_N)
    kl = tl.arange(0, BLOCK_K)
    ll_acc = tl.zeros([BLOCK_N], dtype=tl.float64)
    if RESIDENT:  # the products' weights, in shared memory for the whole sweep (one component tile)
        his, los = resident_weights(Wa, wa_lo, 0, D_PAD, BLOCK_K, COLS, PRECISION)
    for tile in range(pid, n_tiles, num_programs):
        rows = tile * BLOCK_N + rr
        prefetch_rows(X, rows + num_programs * BLOCK_N, N, stride_x, D_PAD, PREFETCH)
        x_hi, x_lo = tf32x3.split(centered_tile(X, center, rows, tl.arange(0, D_PAD), N, d, stride_x), PRECISION)
        wr = row_weights(w, rows, N, WEIGHTED)
        if BLOCK_K == K_PAD:
            if RESIDENT:
                s = resident_products_score(x_hi, x_lo, his, los, Wb, bias, 0, D_PAD, BLOCK_N, BLOCK_K, COLS,
                                            PRECISION)
            else:
                s = score_tile(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb,
                               wb_lo, bias, 0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, F, COLS, DATAFLOW, PRECISION)
            m = tl.max(s, 1)
            p = tl.exp(s - m[:, None])
            lam = tl.sum(p, 1)
            g = p * (wr / lam)[:, None]
            ll_acc += (wr * (m + tl.log(lam))).to(tl.float64)
            accumulate_statistics(my_slab, K_PAD, slab_rows, 0, g, x_hi, x_lo, X, center, shift, rows, pair_i, pair_j,
                                  n_pairs, N, d, stride_x, D_PAD, BLOCK_N, BLOCK_K, F, PRECISION, SHIFTED)
        else:
            m = tl.full([BLOCK_N], SENTINEL_VALUE, dtype=tl.float32)
            lam = tl.zeros([BLOCK_N], dtype=tl.float32)
            for k0 in range(0, K_PAD, BLOCK_K):
                s = score_tile(x_hi, x_lo, X, center, rows, pair_i, pair_j, n_pairs, N, d, stride_x, Wa, wa_lo, Wb,
                               wb_lo, bias, k0, K_PAD, D_PAD, BLOCK_N, BLOCK_K, F, COLS, DATAFLOW, PRECISION)
                tl.store(my_scratch + rr[:, None] * K_PAD + (k0 + kl)[None, :], s)
                m_new = tl.maximum(m, tl.max(s, 1))
                lam = lam * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), 1)
                m = m_new
            L = m + tl.log(lam)
            ll_acc += (wr * L).to(tl.float64)
            tl.debug_barrier()  # the score tiles stored by every thread, before they are read back
            for k0 in range(0, K_PAD, BLOCK_K):
                s = tl.load(my_scratch + rr[:, None] * K_PAD + (k0 + kl)[None, :])
                g = tl.exp(s - L[:, None]) * wr[:, None]
                accumulate_statistics(my_slab, K_PAD, slab_rows, k0, g, x_hi, x_lo, X, center, shift + k0 * D_PAD,
                                      rows, pair_i, pair_j, n_pairs, N, d, stride_x, D_PAD, BLOCK_N, BLOCK_K, F,
                                      PRECISION, SHIFTED)
            tl.debug_barrier()  # this tile's scratch reads, before the next tile's writes (the slab's sums are atomics)
    tl.store(ll_part + pid, tl.sum(ll_acc, 0))


def one_pass_statistics(X, center, sample_weight, params, shift, pairs, k_pad: int, dataflow: str, precision: str,
                        cfg):
    """(statistics table (rows x k_pad) float64, ell) of one full E-step by Algorithm 2.

    params: :func:`turbo_gmm.full.parameters.score_parameters` for ``dataflow``; shift None (moments about the
    center) or the per-component shifts (k_pad, d_pad) the moments are summed about; cfg a FullConfig."""
    N, d = X.shape
    d_pad = center.shape[0]
    block_k = min(cfg.block_k, k_pad)
    if cfg.resident_weights and (dataflow != "products" or block_k < k_pad):
        raise ValueError(f"resident_weights needs the products dataflow and one component tile in the one pass "
                         f"(block_k >= K_pad = {k_pad}), got dataflow={dataflow!r}, block_k={cfg.block_k}")
    rows = statistics_rows(d_pad, pairs[0].shape[0])
    n_tiles = triton.cdiv(N, cfg.block_n)
    P = program_count(n_tiles, X.device, cfg.programs_per_sm)
    slab = zero_slab((P,), rows, k_pad, shift is not None, cfg.slab_dtype, X.device)
    scratch = torch.empty(P if block_k < k_pad else 1, cfg.block_n, k_pad, dtype=torch.float32, device=X.device)
    ll_part = torch.empty(P, dtype=torch.float64, device=X.device)
    _full_one_pass_kernel[(P,)](
        X, center, X if sample_weight is None else sample_weight, *params, center if shift is None else shift, pairs[0],
        pairs[1], scratch, slab, ll_part,
        pairs[0].shape[0], N, d, X.stride(0), n_tiles, P, rows,
        K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, F=PAIR_BLOCK, COLS=cfg.cols, DATAFLOW=dataflow,
        PRECISION=precision, WEIGHTED=sample_weight is not None, SENTINEL_VALUE=SENTINEL, SHIFTED=shift is not None,
        RESIDENT=bool(cfg.resident_weights), PREFETCH=not triton.knobs.runtime.interpret, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages)
    return slab_table(slab.sum(0, dtype=torch.float64)[None], shift is not None), ll_part.sum()
