"""How much the float32 lift can lose, and the precision that keeps a fit within a tolerance (issue 20).

The lifted score S_ik = [x - c | (x - c)^2] . [mu tau | -tau/2]_k + b_k sums 2d + 1 terms whose sizes
are those of the centered form's expansion, (x - c)^2 tau / 2, (x - c)(mu - c) tau and (mu - c)^2 tau / 2,
while S itself is their difference. Float32 rounds each at u = 2^-24 of its size, so the score's absolute
error is a multiple of u times the sum of the terms' magnitudes (Higham's dot-product bound); at the
worst row that sum is at most

    B_k = 1/2 sum_j (r_j + |mu_kj - c_j|)^2 tau_kj,   r_j = max_i |x_ij - c_j|,

and the bound is E = LIFT_ERROR_CONSTANT * u * max_k B_k, in log-density units: exp(+-E) is the
relative error it allows in a responsibility (and E the error in a row's log-likelihood). Features
that are (nearly) constant within a component get the variance floor reg_covar, tau = 1e6, and a few
large values in such a column make B ~ 1e8 or more: the lift then loses every digit of the score.
"""
from __future__ import annotations

import weakref

import torch

U32 = 2.0**-24  # float32's unit roundoff
# The measured ratio |S_float32 - S_float64| / (U32 * B) at the worst row and component, on Appendix C's
# case study (harness/studies/conditioning.py; d = 64, offsets 0 to 1e5): 5.1 at most for the study's
# float32 form (its committed results/h200/conditioning.csv, reproduced to the bit by NumPy on any CPU),
# 6.7 for the kernels' form (one product against W rounded to float32) and 8.0 with tf32x3's split into
# TF32 halves (kernels/tests/test_precision.py measures all three); 10 covers them with a margin.
LIFT_ERROR_CONSTANT = 10.0
# The score error a float32 fit may carry: exp(0.05) - 1 = 5% on a responsibility, at the worst row and
# component (rows near the centre carry far less). Measured at every iterate of scikit-learn's fits (K = 2
# to 10, diag and spherical, random_state 0): iris, wine and breast_cancer, raw and standardized, and
# digits spherical at E <= 0.014; the generator's data (turbo_gmm.datasets, d up to 128, at its true
# parameters) at E <= 0.01; the failures -- digits diag (issue 20's near-constant pixels) at E >= 1.4e2 and
# breast_cancer raw at K = 10 (a component collapsed to the floor) at 1.7e7 -- over three decades above it.
SCORE_TOLERANCE = 0.05
FLOAT32_PRECISIONS = ("tf32x3", "ieee")  # the precisions that score through the float32 lift
# Up to this much work per sweep (N K d multiply-adds of the score) an fp64 EM iteration costs what a tf32x3
# one does, both at the kernels' launch floor, so precision="auto" takes float64 -- scikit-learn's arithmetic,
# X kept in float64 -- for the whole fit. Table 1 on the H200, ms/iter, fp64 at 1c3b02c vs tf32x3 at ac2a7c6
# (1c3b02c's tf32x3 rows, 0.11 ms/iter at 20K, carry a per-fit lift check): 20K_16_32 0.057 vs 0.052 and 20K_32_32
# 0.067 vs 0.066 (N K d = 1.0e7, 2.0e7), 20K_64_32 0.094 vs 0.061 (4.1e7: 1.5x), 1M_32_32 0.469 vs 0.203
# (1.0e9: 2.3x). The data sets that ship with scikit-learn (iris to digits, N K d <= 1.2e6 at K = 10) are
# far below it.
FP64_FLOOR_WORK = 2**25


# Full and tied covariances have no float64 kernels: their float64 E-step is torch ops on X's device
# (turbo_gmm.estep_full, (N, K, d) float64 temporaries), whose work is the score's N K d^2 multiply-adds
# (tied's shared factor taken per component as well). Up to this much work, and N K d <= FP64_FLOOR_WORK
# (each temporary at most 2^25 float64 numbers, 256 MiB, whatever d), it is a few batched products, so
# launches, not the products, set its time, as they set the fused float32 kernels' at these sizes; the data
# sets that ship with scikit-learn are below both (digits at K = 10: N K d^2 7.4e7, N K d 1.2e6). Chosen by
# that reasoning; not yet timed on the H200.
MATRIX_FP64_FLOOR_WORK = 2**27


def fp64_costs_nothing(N: int, K: int, d: int, covariance_type: str = "diag") -> bool:
    """Whether a float64 E-step of N rows, K components and d features costs what a float32 one does: at
    the kernels' launch floor for diag and spherical (FP64_FLOOR_WORK), within MATRIX_FP64_FLOOR_WORK
    too for full and tied."""
    if covariance_type in ("full", "tied") and N * K * d * d > MATRIX_FP64_FLOOR_WORK:
        return False
    return N * K * d <= FP64_FLOOR_WORK


class Float32LiftWarning(UserWarning):
    """The float32 lift's error bound at these parameters exceeds SCORE_TOLERANCE: the fit may reach
    another optimum than float64 EM (issue 20)."""


_EXTREMES: dict = {}  # id(X) -> (weak reference to X, its version, (min, max))
_MAX_EXTREMES = 4


def column_extremes(X: torch.Tensor):
    """(min, max) of every column of X, kept for the last few X (the tensor itself, by a weak reference, at
    torch's in-place version counter): those of X's validation pass (:func:`keep_column_extremes`, from
    :func:`turbo_gmm.column_sums.column_sums`), else one read of X, so a fit that validated X, and a
    benchmark's repeated fits of one X, do not read it again."""
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


def lift_warning(bound: float, where: str) -> str:
    """The text of the :class:`Float32LiftWarning` for a bound of ``bound`` at ``where``."""
    return (f"The float32 lift's score error bound at the {where} parameters is {bound:.3g} log-density units, above "
            f"{SCORE_TOLERANCE} (turbo_gmm.precision.SCORE_TOLERANCE): features with tiny variances and a wide range "
            "(e.g. near-constant columns at the reg_covar floor) cancel terms far larger than the score, and EM may "
            "reach another optimum than in float64. Use precision='fp64', increase reg_covar, or let "
            "GaussianMixture(precision='auto') choose.")
