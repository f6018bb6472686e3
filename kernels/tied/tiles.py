"""Triton pieces of the tied-covariance kernels: the whitened row tile and its diagonal-style score.

With one precision Cholesky U for every component, z = (x - c) U and nu_k = (mu_k - c) U make the
score the unit-variance diagonal one: S_ik = bt_k + z_i . nu_k - ||z_i||^2 / 2 with
bt_k = log pi_k + log|U| - d/2 log 2pi - ||nu_k||^2 / 2. The whitening is one d x d product per
row tile, shared by all components (N d^2 multiply-adds per pass, not N K d^2); the score is then
one product of inner size d, half the diag lift's 2d."""
from __future__ import annotations

import triton
import triton.language as tl

from .. import tf32x3
from ..full.tiles import centered_tile, load_split


@triton.jit
def whitened_tile(X, center, Uz, uz_lo, rows, N, d, stride_x, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                  PRECISION: tl.constexpr):
    """(x - c split (high, low), z = (x - c) U split (high, low), ||z||^2) for the row tile."""
    dd = tl.arange(0, D_PAD)
    x_hi, x_lo = tf32x3.split(centered_tile(X, center, rows, dd, N, d, stride_x), PRECISION)
    u_hi, u_lo = load_split(Uz, uz_lo, dd[:, None] * D_PAD + dd[None, :], PRECISION)
    z = tf32x3.dot(x_hi, x_lo, u_hi, u_lo, tl.zeros([BLOCK_N, D_PAD], tl.float32), PRECISION)
    z_hi, z_lo = tf32x3.split(z, PRECISION)
    return x_hi, x_lo, z_hi, z_lo, tl.sum(z * z, 1)


@triton.jit
def tied_score(z_hi, z_lo, zz, V, v_lo, bt, k0, K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """S[:, k0 : k0 + BLOCK_K] = z nu^T - ||z||^2 / 2 + bt (padded components at the sentinel through bt)."""
    kk = k0 + tl.arange(0, BLOCK_K)
    v_hi, v_lo = load_split(V, v_lo, tl.arange(0, D_PAD)[:, None] * K_PAD + kk[None, :], PRECISION)
    s = tf32x3.dot(z_hi, z_lo, v_hi, v_lo, tl.zeros([BLOCK_N, BLOCK_K], tl.float32), PRECISION)
    return s + tl.load(bt + kk)[None, :] - 0.5 * zz[:, None]
