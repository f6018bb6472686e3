"""The M-step from the statistics (n, s, u), in float64 on the device.

V = u/n - mu*mu cancels: a collapsed component's true spread is ~0 while u/n and mu*mu are O(|x|^2), so the
statistics' rounding can exceed reg_covar and make V negative (Flash-GMM's dataflow then turns NaN). Here the
statistics are float64 about the in-kernel center, and what rounding leaves negative is floored at 0 before
reg_covar is added: V >= reg_covar, every floored entry counted (``n_floored``). A model the M-step cannot
define is scikit-learn's ValueError (:class:`IllDefinedCovarianceError`), never a NaN model."""
from __future__ import annotations

import numpy as np
import torch

EPS64 = float(np.finfo(np.float64).eps)
ILL_DEFINED_COVARIANCE = (
    "Fitting the mixture model failed because some components have ill-defined empirical covariance (for instance "
    "caused by singleton or collapsed samples). Try to decrease the number of components, increase reg_covar, or "
    "scale the input data.")
FLOAT32_ADVICE = " The numerical accuracy can also be improved by passing float64 data instead of float32."


class IllDefinedCovarianceError(ValueError):
    """scikit-learn's error for a model whose covariances cannot be inverted (its message; for float32
    input scikit-learn adds :data:`FLOAT32_ADVICE`)."""

    def __init__(self, float32_input: bool = False):
        super().__init__(ILL_DEFINED_COVARIANCE + (FLOAT32_ADVICE if float32_input else ""))


def well_defined(weights: torch.Tensor, means: torch.Tensor, variances: torch.Tensor) -> torch.Tensor:
    """() bool tensor on the parameters' device, no host sync: every parameter finite and every variance > 0."""
    return torch.isfinite(weights).all() & torch.isfinite(means).all() & (variances > 0).all() & (
        variances < float("inf")).all()


def mstep_guard(total: float, rows: int | None = None) -> float:
    """scikit-learn's 10 eps64 added to every n_k, in units of the mean row weight (10 eps64 total / rows): exactly
    scikit-learn's for unit weights, and scaling with the weights, so the fit does not depend on their scale."""
    if rows is None or total == rows:
        return 10.0 * EPS64
    return 10.0 * EPS64 * (float(total) / float(rows))


def mstep_weights(nk: torch.Tensor, N: float, guard: float) -> torch.Tensor:
    """scikit-learn's weights (n_k + guard) / (N + K guard), N the rows or the total weight: an empty component keeps
    a weight ~guard / N > 0, as scikit-learn's."""
    return (nk + guard) / (float(N) + nk.shape[0] * guard)


def mstep(n: torch.Tensor, su: torch.Tensor, N: int, K: int, d: int, center: torch.Tensor, reg_covar: float,
          guard: float | None = None):
    """(weights, means (data coordinates), variances, n_floored) from padded float64 statistics n, su = [s | u]
    about ``center``, dividing by n_k + ``guard`` (:func:`mstep_guard`) as scikit-learn does."""
    guard = 10.0 * EPS64 if guard is None else guard
    d_pad = su.shape[1] // 2
    nk = n[:K]
    denom = (nk + guard)[:, None]
    mu = su[:K, :d] / denom
    spread = su[:K, d_pad : d_pad + d] / denom - mu * mu
    n_floored = (spread < 0).sum()
    variances = spread.clamp_min(0.0) + reg_covar
    return mstep_weights(nk, N, guard), mu + center[:d].double(), variances, n_floored
