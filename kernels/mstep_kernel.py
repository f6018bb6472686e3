"""The float64 M-step of :mod:`kernels.mstep` as one small kernel, writing in place.

One program per component reads its statistics (n_k, [s_k | u_k] about the
center) and overwrites that component's weight, mean and variance, so the fit
loop's parameter buffers are updated without a dozen torch launches and copies
per iteration. It also stores ell into the iteration's slot and counts the
floored variance entries (same rule and guard as :func:`kernels.mstep.mstep`).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.mstep import EPS64


@triton.jit
def _mstep_kernel(
    n, su, ll, center,  # statistics (K_PAD,), (K_PAD, 2*D_PAD), (1,) f64; center (d,) f64
    weights, means, variances, ll_out, floored,  # out: (K,), (K, d), (K, d), (1,) f64; floored (1,) int64 (added to)
    N, K, d, reg_covar: tl.float64, guard: tl.float64,
    D_PAD: tl.constexpr,
):
    k = tl.program_id(0)
    c = tl.arange(0, D_PAD)
    ok = c < d
    nk = tl.load(n + k)
    denom = nk + guard
    mu = tl.load(su + k * (2 * D_PAD) + c, mask=ok, other=0.0) / denom
    spread = tl.load(su + k * (2 * D_PAD) + D_PAD + c, mask=ok, other=0.0) / denom - mu * mu
    negative = ok & (spread < 0.0)
    tl.store(weights + k, nk / N)
    tl.store(means + k * d + c, mu + tl.load(center + c, mask=ok, other=0.0), mask=ok)
    tl.store(variances + k * d + c, tl.maximum(spread, 0.0) + reg_covar, mask=ok)
    tl.atomic_add(floored, tl.sum(negative.to(tl.int64), 0), sem="relaxed")
    tl.store(ll_out, tl.load(ll), mask=k == 0)


def mstep_into(n: torch.Tensor, su: torch.Tensor, ll: torch.Tensor, N: int, center: torch.Tensor,
               reg_covar: float, weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
               ll_out: torch.Tensor, floored: torch.Tensor) -> None:
    """New (weights, means, variances) written into those float64 buffers from the
    padded float64 statistics; ``ll_out`` (1,) <- ll; ``floored`` (1,) int64 += entries floored."""
    K, d = means.shape
    d_pad = su.shape[1] // 2
    _mstep_kernel[(K,)](n, su, ll, center, weights, means, variances, ll_out, floored,
                        N, K, d, float(reg_covar), 10.0 * EPS64, D_PAD=d_pad, num_warps=1,
                        enable_fp_fusion=False)  # no FMA contraction: the same roundings as kernels/mstep.py
