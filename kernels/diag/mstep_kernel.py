"""The float64 M-step of :mod:`turbo_gmm.diag.mstep` as one kernel writing the parameters in place.

One program per component: its weight, mean and variance from (n_k, [s_k | u_k]), ell stored in the
iteration's slot, floored entries counted (a dozen torch launches an iteration saved). It records the
fit's first failure (:func:`failure_code`: a non-finite ell, or a non-finite or non-positive parameter), so
a broken model raises after the loop's one host read instead of leaving NaN parameters."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .mstep import EPS64

FLOAT64_MAX = 1.7976931348623157e308
NO_FAILURE = 1 << 62  # exact as a double too (the status may be read back through a float64 buffer)
ESTEP_NOT_FINITE, MSTEP_ILL_DEFINED = 1, 2


def failure_code(iteration: int, kind: int) -> int:
    """Ordered by iteration, then E-step before M-step: the smallest code is the first failure."""
    return 2 * iteration + kind


def decode_failure(code: int):
    """(iteration, kind) of a :func:`failure_code`, or None for :data:`NO_FAILURE`."""
    if code == NO_FAILURE:
        return None
    return (code - 1) // 2, ESTEP_NOT_FINITE if code % 2 else MSTEP_ILL_DEFINED


@triton.jit
def _mstep_kernel(
    n, su, ll, center,  # statistics (K_PAD,), (K_PAD, 2*D_PAD), (1,) f64; center (d,) f64
    weights, means, variances, ll_out, floored, failure,  # out: (K,), (K, d), (K, d), (1,) f64; (1,) int64 (added
    # to); failure (1,) int64 (lowered to this iteration's code where it fails)
    N: tl.float64, K, d, reg_covar: tl.float64, guard: tl.float64, iteration, no_failure: tl.int64,  # N: the
    # weights' divisor N + K guard (turbo_gmm.diag.mstep.mstep_weights)
    D_PAD: tl.constexpr, FINITE_MAX: tl.constexpr,
):
    k = tl.program_id(0)
    c = tl.arange(0, D_PAD)
    ok = c < d
    nk = tl.load(n + k)
    denom = nk + guard
    mu = tl.load(su + k * (2 * D_PAD) + c, mask=ok, other=0.0) / denom
    spread = tl.load(su + k * (2 * D_PAD) + D_PAD + c, mask=ok, other=0.0) / denom - mu * mu
    negative = ok & (spread < 0.0)
    weight = denom / N  # scikit-learn's (n_k + guard) / sum(n_k + guard): an empty component keeps a weight > 0
    mean = mu + tl.load(center + c, mask=ok, other=0.0)
    variance = tl.maximum(spread, 0.0) + reg_covar
    tl.store(weights + k, weight)
    tl.store(means + k * d + c, mean, mask=ok)
    tl.store(variances + k * d + c, variance, mask=ok)
    tl.atomic_add(floored, tl.sum(negative.to(tl.int64), 0), sem="relaxed")
    ell = tl.load(ll)
    tl.store(ll_out, ell, mask=k == 0)
    # NaN fails every comparison; tl.maximum may drop a NaN spread, so the spread itself is checked
    good = (tl.abs(spread) <= FINITE_MAX) & (tl.abs(mean) <= FINITE_MAX) & (variance > 0.0) & (variance <= FINITE_MAX)
    n_bad = tl.sum((ok & ~good).to(tl.int32), 0) + (~(tl.abs(weight) <= FINITE_MAX)).to(tl.int32)
    code = tl.where(~(tl.abs(ell) <= FINITE_MAX), 2 * iteration + 1, tl.where(n_bad > 0, 2 * iteration + 2, no_failure))
    tl.atomic_min(failure, code.to(tl.int64), sem="relaxed")


def mstep_into(n: torch.Tensor, su: torch.Tensor, ll: torch.Tensor, N: float, center: torch.Tensor,
               reg_covar: float, weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
               ll_out: torch.Tensor, floored: torch.Tensor, failure: torch.Tensor, iteration: int,
               guard: float | None = None) -> None:
    """New (weights, means, variances) written into those float64 buffers from the
    padded float64 statistics (weights (n_k + guard) / (N + K guard): N the row count, or the sum of the sample
    weights; ``guard`` :func:`turbo_gmm.diag.mstep.mstep_guard`'s, default scikit-learn's 10 eps64);
    ``ll_out`` (1,) <- ll; ``floored`` (1,) int64 += entries floored;
    ``failure`` (1,) int64 <- min(itself, this ``iteration``'s :func:`failure_code`) where it fails."""
    K, d = means.shape
    d_pad = su.shape[1] // 2
    guard = 10.0 * EPS64 if guard is None else float(guard)
    _mstep_kernel[(K,)](n, su, ll, center, weights, means, variances, ll_out, floored, failure,
                        float(N) + K * guard, K, d, float(reg_covar), guard, iteration, NO_FAILURE, D_PAD=d_pad,
                        FINITE_MAX=FLOAT64_MAX, num_warps=1,
                        enable_fp_fusion=False)  # no FMA contraction: the same roundings as kernels/diag/mstep.py
