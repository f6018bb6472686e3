"""The lift of Lemma 1 as one kernel, fused with clearing the statistics.

One program per padded component builds its column of W and its b in float64 from the parameters and the
center, stores them in the kernels' dtype, and zeroes that component's statistics (program 0 also ell):
one launch where the torch ops and zeroing took ~15 an iteration."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .lift import SENTINEL


# d is not specialized: at d = 1 Triton would pass it as the constant 1, a Python int with no .to
@triton.jit(do_not_specialize=["d"])
def _lift_kernel(
    weights, means, variances, center,  # (K,), (K, d), (K, d), (d,) any float dtype, contiguous
    W, b, n, su, ll,  # out: W (2*D_PAD, K_PAD), b (K_PAD,) f32 or f64 (fp64); cleared: n (K_PAD,), su (K_PAD, 2*D_PAD), ll (1,) f64
    K, d, stride_wl, stride_wk, half_log_2pi: tl.float64,  # W's strides (turbo_gmm.diag.lift.weights_buffer)
    D_PAD: tl.constexpr, SENTINEL_VALUE: tl.constexpr,
):
    k = tl.program_id(0)
    c = tl.arange(0, D_PAD)
    real = k < K
    ok = (c < d) & real
    mu = tl.load(means + k * d + c, mask=ok, other=0.0).to(tl.float64) - tl.load(center + c, mask=ok, other=0.0).to(tl.float64)
    var = tl.load(variances + k * d + c, mask=ok, other=1.0).to(tl.float64)
    tau = 1.0 / var
    tl.store(W + c * stride_wl + k * stride_wk, tl.where(ok, mu * tau, 0.0).to(W.dtype.element_ty))
    tl.store(W + (D_PAD + c) * stride_wl + k * stride_wk, tl.where(ok, -0.5 * tau, 0.0).to(W.dtype.element_ty))
    weight = tl.load(weights + k, mask=real, other=1.0).to(tl.float64)
    log_w = tl.log(tl.where(weight > 0.0, weight, 1.0))  # finite; a weight of 0 takes the sentinel below
    terms = tl.where(ok, 0.5 * tl.log(var) + 0.5 * mu * mu * tau, 0.0)
    bias = log_w - d.to(tl.float64) * half_log_2pi - tl.sum(terms, 0)  # the interpreter would round d * (a float) to float32
    # padded components and components of weight 0 score the finite sentinel (log 0 = -inf: NaN in -inf - -inf)
    tl.store(b + k, tl.where(real & (weight > 0.0), bias, SENTINEL_VALUE).to(b.dtype.element_ty))
    tl.store(n + k, 0.0)
    tl.store(su + k * (2 * D_PAD) + c, tl.zeros([D_PAD], tl.float64))
    tl.store(su + k * (2 * D_PAD) + D_PAD + c, tl.zeros([D_PAD], tl.float64))
    tl.store(ll, tl.zeros([], tl.float64), mask=k == 0)


def lift_into(weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor, center: torch.Tensor,
              W: torch.Tensor, b: torch.Tensor, n: torch.Tensor, su: torch.Tensor, ll: torch.Tensor) -> None:
    """W, b of (weights, means - center, variances) into the given buffers (shapes of :func:`turbo_gmm.diag.lift.lift`),
    and n, su, ll (:class:`turbo_gmm.diag.em.Workspace`'s) zeroed."""
    K, d = means.shape
    k_pad, d_pad = b.shape[0], W.shape[0] // 2
    _lift_kernel[(k_pad,)](
        weights.contiguous(), means.contiguous(), variances.contiguous(), center.contiguous(), W, b, n, su, ll,
        K, d, *W.stride(), 0.5 * math.log(2.0 * math.pi), D_PAD=d_pad, SENTINEL_VALUE=SENTINEL, num_warps=1,
        enable_fp_fusion=False,  # no FMA contraction: the roundings of kernels/diag/lift.py
    )
