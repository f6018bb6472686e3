"""How much the float32 lift can lose: the error bound that ``dispatch.auto_precision`` reads.

The lifted score sums 2d + 1 terms of the sizes of (x - c)^2 tau / 2, (x - c)(mu - c) tau and
(mu - c)^2 tau / 2 while S is their difference; float32 rounds each at u = 2^-24 of its size, so at the
worst row the error is at most E = LIFT_ERROR_CONSTANT * u * max_k B_k with

    B_k = 1/2 sum_j (r_j + |mu_kj - c_j|)^2 tau_kj,   r_j = max_i |x_ij - c_j|,

in log-density units (exp(+-E) on a responsibility). A near-constant feature floored at reg_covar
(tau = 1e6) with a few large values makes B ~ 1e8: the lift then loses every digit."""
from __future__ import annotations

import weakref

import torch

from ..dispatch import FLOAT32_PRECISIONS, SCORE_TOLERANCE  # noqa: F401 (the tolerance the bound is held to)

U32 = 2.0**-24  # float32's unit roundoff
# The worst |S_float32 - S_float64| / (U32 B) measured on Appendix C's case study: 5.1 (float32 form), 6.7
# (the kernels' one product against a float32 W), 8.0 (tf32x3's halves); 10 covers them with a margin.
LIFT_ERROR_CONSTANT = 10.0


class Float32LiftWarning(UserWarning):
    """The float32 lift's error bound at these parameters exceeds SCORE_TOLERANCE: the fit may reach
    another optimum than float64 EM."""


_EXTREMES: dict = {}  # id(X) -> (weak reference to X, its version, (min, max))
_MAX_EXTREMES = 4


def column_extremes(X: torch.Tensor):
    """(min, max) of X's columns, kept for the last few X (weakly, at their version): the validation pass's, else
    one read of X, so repeated fits of one X do not read it again."""
    held = _EXTREMES.get(id(X))
    if held is not None and held[0]() is X and held[1] == X._version:
        return held[2]
    return keep_column_extremes(X, torch.aminmax(X, dim=0))


def keep_column_extremes(X: torch.Tensor, extremes):
    """Remember (min, max) per column of X (tensors on X's device) for :func:`column_extremes`; returns them."""
    while len(_EXTREMES) >= _MAX_EXTREMES:
        _EXTREMES.pop(next(iter(_EXTREMES)))
    _EXTREMES[id(X)] = (weakref.ref(X), X._version, extremes)
    return extremes


def data_radius(X: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
    """r_j = max_i |x_ij - c_j| (float64, (d,), on X's device) from :func:`column_extremes`."""
    low, high = column_extremes(X)
    center = center.to(device=X.device, dtype=torch.float64)
    return torch.maximum(high.double() - center, center - low.double())


def lift_error_bound(radius: torch.Tensor, means: torch.Tensor, variances: torch.Tensor,
                     center: torch.Tensor) -> torch.Tensor:
    """E = LIFT_ERROR_CONSTANT * U32 * max_k 1/2 sum_j (r_j + |mu_kj - c_j|)^2 / V_kj, a float64 scalar
    tensor on the parameters' device (O(Kd), no host sync): the float32 lifted score's absolute error
    bound at (means, variances (K, d)) for data of ``radius`` about ``center``, in data coordinates."""
    reach = radius.double()[None, :] + (means.double() - center.double()[None, :]).abs()
    return LIFT_ERROR_CONSTANT * U32 * (0.5 * reach.square() / variances.double()).sum(1).max()


def covariance_lift_error_bound(radius: torch.Tensor, means: torch.Tensor, precisions_cholesky: torch.Tensor,
                                center: torch.Tensor) -> torch.Tensor:
    """:func:`lift_error_bound` through full and tied precisions Cholesky U: E = LIFT_ERROR_CONSTANT * U32 * max_k
    1/2 a_k^T |U_k| |U_k|^T a_k, a_k = r + |mu_k - c| (for a diagonal U exactly :func:`lift_error_bound`)."""
    U = precisions_cholesky.double().abs()
    K = means.shape[0]
    U = U.expand(K, *U.shape[-2:]) if U.ndim == 2 else U
    reach = radius.double()[None, :] + (means.double() - center.double()[None, :]).abs()  # (K, d)
    y = torch.einsum("kd,kde->ke", reach, U)
    return LIFT_ERROR_CONSTANT * U32 * (0.5 * y.square().sum(1)).max()


def lift_warning(bound: float, where: str) -> str:
    """The text of the :class:`Float32LiftWarning` for a bound of ``bound`` at ``where``."""
    return (f"The float32 lift's score error bound at the {where} parameters is {bound:.3g} log-density units, above "
            f"{SCORE_TOLERANCE} (turbo_gmm.dispatch.SCORE_TOLERANCE): features with tiny variances and a wide range "
            "(e.g. near-constant columns at the reg_covar floor) cancel terms far larger than the score, and EM may "
            "reach another optimum than in float64. Use precision='fp64', increase reg_covar, or let "
            "GaussianMixture(precision='auto') choose.")
