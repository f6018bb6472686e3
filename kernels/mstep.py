"""The M-step from the statistics (n, s, u), in float64 on the device.

V = u/n - mu*mu cancels: a collapsed component (1M_4096_32 grows components
holding one point) has true spread ~0 while u/n and mu*mu are O(|x|^2), so the
float32 rounding of the fused statistics (~1e-7 |x|^2) can exceed reg_covar and
make V negative -- measured on the H200 for Flash-GMM's dataflow, which then
turns NaN. Remedy chosen here: the statistics are committed in float64, the
arithmetic below runs in float64 on data centered in-kernel, and what rounding
still leaves negative is floored at 0 before reg_covar is added, i.e.
V >= reg_covar always. Every floored entry is counted and reported per fit
(``n_floored``), so a floor that fires is never silent.

A model the M-step cannot define -- a variance that is not finite or not > 0 (after
reg_covar; reg_covar = 0 lets a collapsed component reach 0), or any parameter
that is not finite -- is scikit-learn's ``ValueError`` with scikit-learn's advice
(:class:`IllDefinedCovarianceError`, text from ``sklearn.mixture._gaussian_mixture.
_compute_precision_cholesky``), never a NaN model.
"""
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


def mstep(n: torch.Tensor, su: torch.Tensor, N: int, K: int, d: int, center: torch.Tensor, reg_covar: float):
    """(weights, means, variances, n_floored) from padded float64 statistics.

    n (k_pad,), su (k_pad, 2*d_pad) = [s | u] about ``center`` (d_pad,). Divides by
    n_k + 10*eps64 as scikit-learn does; means are returned in data coordinates.
    """
    d_pad = su.shape[1] // 2
    nk = n[:K]
    denom = (nk + 10.0 * EPS64)[:, None]
    mu = su[:K, :d] / denom
    spread = su[:K, d_pad : d_pad + d] / denom - mu * mu
    n_floored = (spread < 0).sum()
    variances = spread.clamp_min(0.0) + reg_covar
    return nk / N, mu + center[:d].double(), variances, n_floored
