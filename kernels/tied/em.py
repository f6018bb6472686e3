"""Tied covariance: ``em_step``, ``fit`` and ``estep_statistics`` as kernels/full/em.py, with one shared
precision Cholesky U (d, d) (scikit-learn's tied ``precisions_cholesky_``).

A kernel of its own rather than the diag kernels on whitened X: whitening the row tile in registers saves
two N x d passes over HBM, scores with inner size d (not the lift's 2d) and skips u. Algorithm rule and tiles
are diag's (``dispatch``), whose per-program state bounds tied's. M-step: Sigma = (weighted scatter of X about
c, taken once per fit - sum_k n_k mu'_k mu'_k^T) / sum_k n_k + reg_covar I, as scikit-learn's
_estimate_gaussian_covariances_tied about c rather than the origin (same matrix, better conditioned)."""
from __future__ import annotations

import math

import torch

from .._data import check_data, data_center, normalized_sample_weight
from ..dispatch import FLOAT32_PRECISIONS, launch_config, resolve_algorithm
from ..full.em import FitResult, StepResult, check_parameters
from .._graph_loop import GraphedFit, cached
from ..full.parameters import EPS64, cholesky_precisions, log_det_cholesky, padded_sizes, split_tf32
from ..diag.lift import SENTINEL
from ..full.reference import ILL_DEFINED_COVARIANCE
from .one_pass import one_pass_statistics
from .two_pass import two_pass_statistics

SCATTER_ROWS = 1 << 18  # rows per float64 chunk of the scatter


def tied_parameters(weights, means, U, center, k_pad: int, d_pad: int, precision: str):
    """(Uz, uz_lo, V, v_lo, bt): U (d_pad, d_pad) and nu^T = ((mu - c) U)^T (d_pad, k_pad) host-split
    (turbo_gmm.full.parameters.split_tf32) with their low halves' offsets, bt (k_pad,) float32."""
    K, d = means.shape
    f64, dev = torch.float64, U.device
    Uz = torch.zeros(d_pad, d_pad, dtype=f64, device=dev)
    Uz[:d, :d] = U
    nu = (means - center) @ U
    V = torch.zeros(d_pad, k_pad, dtype=f64, device=dev)
    V[:d, :K] = nu.T
    bt = torch.full((k_pad,), SENTINEL, dtype=f64, device=dev)
    bt[:K] = torch.where(weights > 0,  # a component of weight 0 scores as a padded one (log 0 = -inf: NaN downstream)
                         torch.log(weights) + log_det_cholesky(U) - 0.5 * d * math.log(2.0 * math.pi)
                         - 0.5 * (nu * nu).sum(1), SENTINEL)
    Uz, V = split_tf32(Uz, precision), split_tf32(V, precision)
    return Uz, Uz[-1].numel(), V, V[-1].numel(), bt.float()


def centered_scatter(X, sample_weight, center64) -> torch.Tensor:
    """sum_i w_i (x_i - c)(x_i - c)^T (d, d) in float64, in chunks of SCATTER_ROWS rows."""
    out = torch.zeros(X.shape[1], X.shape[1], dtype=torch.float64, device=X.device)
    for r0 in range(0, X.shape[0], SCATTER_ROWS):
        x = X[r0 : r0 + SCATTER_ROWS].double() - center64
        xw = x if sample_weight is None else x * sample_weight[r0 : r0 + SCATTER_ROWS, None].double()
        out += xw.T @ x
    return out


def mstep_tied(n, s, scatter64, center64, reg_covar: float, guard: float | None = None):
    """(weights, means, covariance, precisions_cholesky, ok) in float64 from (n, s about c) and the scatter;
    ``guard``: scikit-learn's 10 eps64 added to n_k (:func:`turbo_gmm.diag.mstep.mstep_guard`, relative to the
    mean row weight)."""
    nk = n + (10.0 * EPS64 if guard is None else guard)
    mu = s / nk[:, None]
    cov = (scatter64 - (nk[:, None] * mu).T @ mu) / nk.sum()
    cov = cov + reg_covar * torch.eye(cov.shape[0], dtype=cov.dtype, device=cov.device)
    U, ok = cholesky_precisions(cov)
    return nk / nk.sum(), mu + center64, cov, U, ok


class Workspace:
    """Padded sizes, the center, Algorithm 3's L and (``scatter``) the weighted scatter of X about the center;
    a caller summing the scatter over chunks itself (kernels/tied/estep.py) passes ``scatter=False``."""

    def __init__(self, X, K, algorithm, center64, sample_weight, scatter: bool = True):
        self.K, self.d = K, X.shape[1]
        self.k_pad, self.d_pad = padded_sizes(K, self.d)
        self.center64 = center64
        self.center = torch.zeros(self.d_pad, dtype=torch.float32, device=X.device)
        self.center[: self.d] = center64
        self.scatter64 = centered_scatter(X, sample_weight, center64) if scatter else None
        self.L = torch.empty(X.shape[0], dtype=torch.float32, device=X.device) if algorithm == "two_pass" else None


def workspace_statistics(X, sample_weight, weights, means, U, ws: Workspace, algorithm, precision, cfg):
    """(n (K,), s (K, d) about ws.center64, ell) in float64."""
    params = tied_parameters(weights, means, U, ws.center64, ws.k_pad, ws.d_pad, precision)
    if algorithm == "one_pass":
        table, ll = one_pass_statistics(X, ws.center, sample_weight, params, ws.k_pad, precision, cfg)
    else:
        table, ll = two_pass_statistics(X, ws.center, sample_weight, params, ws.k_pad, precision, cfg, L_buffer=ws.L)
    return table[0, : ws.K], table[1 : 1 + ws.d, : ws.K].T, ll


def _iterate(X, sample_weight, state, ws, lls, ok, algorithm, precision, reg_covar, cfg) -> None:
    weights, means, cov, U = state
    for i in range(lls.shape[0]):
        n, s, ll = workspace_statistics(X, sample_weight, weights, means, U, ws, algorithm, precision, cfg)
        new = mstep_tied(n, s, ws.scatter64, ws.center64, reg_covar)
        for buf, value in zip(state, new[:4]):  # a failed Cholesky keeps the last parameters: no NaN downstream
            buf.copy_(torch.where(new[4], value, buf))
        lls[i] = ll
        ok &= new[4]


def _prepared(X, init, sample_weight, algorithm, precision, center, config):
    check_data(X)
    weights, means, U = (torch.as_tensor(a, device=X.device).double() for a in init)
    check_parameters(X, weights, means, U, tied=True)
    sample_weight, scale = normalized_sample_weight(X, sample_weight)  # mean 1 before float32 (turbo_gmm._data)
    K, d = means.shape
    if precision not in FLOAT32_PRECISIONS:
        raise ValueError(f"precision must be one of {FLOAT32_PRECISIONS} for full and tied covariances, got {precision!r}")
    algorithm = resolve_algorithm(K, d, algorithm, precision)  # diag's rule and tiles
    cfg = config or launch_config(algorithm, K, d)
    ws = Workspace(X, K, algorithm, data_center(X, center), sample_weight)
    ws.weight_scale = scale  # sum w / N: the sums over rows back in the caller's units
    return weights, means, U, sample_weight, algorithm, cfg, ws


def estep_statistics(X, weights, means, precisions_cholesky, *, sample_weight=None, algorithm: str = "auto",
                     precision: str = "tf32x3", center=True, config=None):
    """(n (K,), s (K, d), ell, center (d,)) in float64, s = sum_i w_i gamma_ik (x_i - c)."""
    weights, means, U, sw, algorithm, cfg, ws = _prepared(X, (weights, means, precisions_cholesky), sample_weight,
                                                          algorithm, precision, center, config)
    sums = workspace_statistics(X, sw, weights, means, U, ws, algorithm, precision, cfg)
    return (*(t * ws.weight_scale for t in sums), ws.center64)


def em_step(X, weights, means, precisions_cholesky, *, sample_weight=None, reg_covar: float = 1e-6,
            algorithm: str = "auto", precision: str = "tf32x3", center=True, config=None) -> StepResult:
    """One fused tied EM iteration from (weights (K,), means (K, d), precisions_cholesky (d, d)); dataflow
    in the result is "whitened"."""
    weights, means, U, sw, algorithm, cfg, ws = _prepared(X, (weights, means, precisions_cholesky), sample_weight,
                                                          algorithm, precision, center, config)
    n, s, ll = workspace_statistics(X, sw, weights, means, U, ws, algorithm, precision, cfg)
    new_w, new_m, cov, new_U, ok = mstep_tied(n, s, ws.scatter64, ws.center64, reg_covar)
    if not bool(ok):
        raise ValueError(ILL_DEFINED_COVARIANCE)
    return StepResult(new_w, new_m, cov, new_U, ll * ws.weight_scale, algorithm, "whitened")


def _state(K, d, dev):
    """The graphed loop's parameter buffers: weights, means, covariances, precisions Cholesky."""
    f64 = torch.float64
    return [torch.ones(K, dtype=f64, device=dev), torch.zeros(K, d, dtype=f64, device=dev),
            torch.zeros(d, d, dtype=f64, device=dev), torch.eye(d, dtype=f64, device=dev)]


def fit(X, init, n_iter: int, *, sample_weight=None, reg_covar: float = 1e-6, algorithm: str = "auto",
        precision: str = "tf32x3", center=True, config=None, cuda_graph: bool = True) -> FitResult:
    """Exactly ``n_iter`` tied EM iterations from ``init`` = (weights, means, precisions_cholesky (d, d)).
    The weighted scatter of X is taken once per fit, before the loop, and copied into a cached graph's buffers
    (graphs are keyed by X's and the sample weights' addresses, as in kernels/diag/em.py)."""
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    weights, means, U, sw, algorithm, cfg, ws = _prepared(X, init, sample_weight, algorithm, precision, center, config)
    K = means.shape[0]
    graphed = X.is_cuda and cuda_graph and n_iter > 0
    if graphed:
        key = ("tied", X.data_ptr(), tuple(X.shape), X.device, None if sw is None else sw.data_ptr(), K, n_iter,
               algorithm, precision, reg_covar, cfg)
        g = cached(key, lambda: GraphedFit(_state(K, X.shape[1], X.device), n_iter, ws, lambda state, lls, ok: _iterate(
            X, sw, state, ws, lls, ok, algorithm, precision, reg_covar, cfg)))
        g.ws.scatter64.copy_(ws.scatter64)
        state, lls, ok = g.run(weights, means, U, ws.center64)
    else:
        d = X.shape[1]
        state = [weights.clone(), means.clone(), torch.zeros(d, d, dtype=torch.float64, device=X.device), U.clone()]
        lls = torch.zeros(n_iter, dtype=torch.float64, device=X.device)
        ok_t = torch.ones((), dtype=torch.bool, device=X.device)
        _iterate(X, sw, state, ws, lls, ok_t, algorithm, precision, reg_covar, cfg)
        ok = bool(ok_t)
    if not ok:
        raise ValueError(ILL_DEFINED_COVARIANCE)
    return FitResult(state[0], state[1], state[2] if n_iter > 0 else None, state[3], lls * ws.weight_scale, algorithm,
                     "whitened", precision, graphed)
