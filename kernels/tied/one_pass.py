"""Tied covariance, Algorithm 2: one sweep with the whole component axis on chip.

A persistent launch as kernels/diag/one_pass.py: per row tile x - c is loaded once and whitened by one
product, the score is one product against nu^T, (m, lambda) is completed in the tile, Gamma =
exp(S - m) / lambda (times the sample weight) reuses the exponentials, and n, s = (x - c)^T Gamma
are summed in registers; each program writes its sums to its own slot (summed in float64 after)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _interpreter as interpreter_compat, tf32x3
from ..full.tiles import row_weights
from ..launch import program_count
from .tiles import tied_score, whitened_tile

interpreter_compat.install()


@triton.jit
def _tied_one_pass_kernel(
    X, center, w, Uz, uz_lo, V, v_lo, bt,  # Uz (·, D_PAD, D_PAD), V (·, D_PAD, K_PAD) host-split; bt (K_PAD,)
    part, ll_part,  # out: part (P, 1 + D_PAD, K_PAD) f32 = [n | s^T] per program; ll_part (P,) f64
    N, d, stride_x, n_tiles, num_programs,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr,
    WEIGHTED: tl.constexpr,
):
    pid = tl.program_id(0)
    kk = tl.arange(0, K_PAD)
    n_acc = tl.zeros([K_PAD], dtype=tl.float32)
    s_acc = tl.zeros([D_PAD, K_PAD], dtype=tl.float32)
    ll_acc = tl.zeros([BLOCK_N], dtype=tl.float64)
    for tile in range(pid, n_tiles, num_programs):
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        x_hi, x_lo, z_hi, z_lo, zz = whitened_tile(X, center, Uz, uz_lo, rows, N, d, stride_x, D_PAD, BLOCK_N,
                                                   PRECISION)
        s = tied_score(z_hi, z_lo, zz, V, v_lo, bt, 0, K_PAD, D_PAD, BLOCK_N, K_PAD, PRECISION)
        wr = row_weights(w, rows, N, WEIGHTED)
        m = tl.max(s, 1)
        p = tl.exp(s - m[:, None])
        lam = tl.sum(p, 1)
        g = p * (wr / lam)[:, None]
        n_acc += tl.sum(g, 0)
        g_hi, g_lo = tf32x3.split(g, PRECISION)
        s_acc = tf32x3.dot(tl.trans(x_hi), tl.trans(x_lo), g_hi, g_lo, s_acc, PRECISION)
        ll_acc += (wr * (m + tl.log(lam))).to(tl.float64)
    base = part + pid.to(tl.int64) * (1 + D_PAD) * K_PAD
    tl.store(base + kk, n_acc)
    tl.store(base + (1 + tl.arange(0, D_PAD))[:, None] * K_PAD + kk[None, :], s_acc)
    tl.store(ll_part + pid, tl.sum(ll_acc, 0))


def one_pass_statistics(X, center, sample_weight, params, k_pad: int, precision: str, cfg):
    """(table (1 + d_pad, k_pad) float64 = [n | s^T] about the center, ell) of one tied E-step by Algorithm 2.
    params = :func:`turbo_gmm.tied.em.tied_parameters`; cfg a turbo_gmm.launch.LaunchConfig (diag's tiles)."""
    N, d = X.shape
    d_pad = center.shape[0]
    n_tiles = triton.cdiv(N, cfg.block_n)
    P = program_count(n_tiles, X.device, cfg.programs_per_sm)
    part = torch.empty(P, 1 + d_pad, k_pad, dtype=torch.float32, device=X.device)
    ll_part = torch.empty(P, dtype=torch.float64, device=X.device)
    _tied_one_pass_kernel[(P,)](X, center, X if sample_weight is None else sample_weight, *params, part, ll_part, N, d,
                                X.stride(0), n_tiles, P, K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n,
                                PRECISION=precision, WEIGHTED=sample_weight is not None, num_warps=cfg.num_warps,
                                num_stages=cfg.num_stages, **cfg.register_cap())
    return part.sum(0, dtype=torch.float64), ll_part.sum()
