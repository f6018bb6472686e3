"""Full covariance: one fused EM iteration (``em_step``), a fixed-length fit (``fit``) and the E-step alone.

Parameters are scikit-learn's (weights, means, precisions_cholesky U_k, U_k U_k^T = Sigma_k^-1). An iteration:
score operands in float64, one fused E-step on rows centered in registers, the float64 M-step with a batched
Cholesky; a failed Cholesky is flagged on the device and raised after the loop as scikit-learn's ValueError.
``moments``: "center" sums about the data's center on the tensor cores, too coarse (u32 |x - c|^2) for a far
component with fewer points than dimensions; "component" sums about each component's mean; "auto" retries
with "component" where a Cholesky fails."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .._data import check_data, data_center, normalized_sample_weight
from ..dispatch import ALGORITHMS, FLOAT32_PRECISIONS, full_algorithm, full_dataflow, full_launch_config
from .._graph_loop import GraphedFit, cached
from .one_pass import one_pass_statistics
from .parameters import (DATAFLOWS, feature_pairs, moment_shifts, mstep_full, padded_sizes, score_parameters,
    unpack_statistics)
from .two_pass import two_pass_statistics
from .reference import ILL_DEFINED_COVARIANCE


@dataclass
class StepResult:
    """New parameters (float64, data coordinates) and ell at the incoming ones."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    precisions_cholesky: torch.Tensor
    log_likelihood: torch.Tensor  # float64 scalar tensor: sum_i w_i L_i
    algorithm: str
    dataflow: str
    moments: str = "center"  # or "component": where the kernels summed the moments (tied: always "center")


@dataclass
class FitResult:
    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor  # None when n_iter = 0
    precisions_cholesky: torch.Tensor
    log_likelihoods: torch.Tensor  # (n_iter,) float64, each at that iteration's incoming parameters
    algorithm: str
    dataflow: str
    precision: str
    graphed: bool  # the loop ran as a replayed CUDA graph
    moments: str = "center"  # or "component": where the kernels summed the moments (tied: always "center")


def check_parameters(X, weights, means, precisions_cholesky, tied: bool = False) -> None:
    """Shapes, devices and values (one host sync): weights > 0, finite means, U upper triangular with a
    positive diagonal ((K, d, d), or (d, d) when ``tied``)."""
    d = X.shape[1]
    if means.ndim != 2 or means.shape[1] != d:
        raise ValueError(f"means must have shape (K, {d}), got {tuple(means.shape)}")
    K = means.shape[0]
    want = (d, d) if tied else (K, d, d)
    if tuple(weights.shape) != (K,) or tuple(precisions_cholesky.shape) != want:
        raise ValueError(f"weights must be ({K},) and precisions_cholesky {want}; got {tuple(weights.shape)}, "
                         f"{tuple(precisions_cholesky.shape)}")
    for name, t in (("weights", weights), ("means", means), ("precisions_cholesky", precisions_cholesky)):
        if t.device != X.device:
            raise ValueError(f"{name} is on {t.device} but X is on {X.device}")
    U = precisions_cholesky
    flags = torch.stack([torch.isfinite(weights).all() & (weights >= 0).all() & (weights > 0).any(),
                         torch.isfinite(means).all(),
                         torch.isfinite(U).all(), (torch.tril(U, -1) == 0).all(),
                         (torch.diagonal(U, dim1=-2, dim2=-1) > 0).all()]).tolist()
    problems = ["weights must be finite and >= 0 (one > 0)", "means have non-finite entries",
                "precisions_cholesky has non-finite entries",
                "precisions_cholesky must be upper triangular (scikit-learn's precisions_cholesky_)",
                "precisions_cholesky must have a positive diagonal"]
    for ok, problem in zip(flags, problems):
        if not ok:
            raise ValueError(problem)


def resolve(K, d, algorithm, dataflow, precision):
    if precision not in FLOAT32_PRECISIONS:
        raise ValueError(f"precision must be one of {FLOAT32_PRECISIONS} for full and tied covariances, got {precision!r}")
    if algorithm == "auto":
        algorithm = full_algorithm(K, d)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'auto' or one of {ALGORITHMS}, got {algorithm!r}")
    if dataflow == "auto":
        dataflow = full_dataflow(d)
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow must be 'auto' or one of {DATAFLOWS}, got {dataflow!r}")
    return algorithm, dataflow


class Workspace:
    """What an E-step needs besides the parameters: padded sizes, feature pairs, the center, L."""

    def __init__(self, X, K, algorithm, center64):
        N, d = X.shape
        self.K, self.d = K, d
        self.k_pad, self.d_pad = padded_sizes(K, d)
        self.pairs = feature_pairs(d, X.device)
        self.center64 = center64
        self.center = torch.zeros(self.d_pad, dtype=torch.float32, device=X.device)
        self.center[:d] = center64
        self.L = torch.empty(N, dtype=torch.float32, device=X.device) if algorithm == "two_pass" else None


MOMENTS = ("auto", "center", "component")


def workspace_statistics(X, sample_weight, weights, means, U, ws: Workspace, algorithm, dataflow, precision, cfg,
                         moments: str = "center"):
    """(n, s, M2 about ws.center64, ell) in float64 from one fused E-step, the kernels' moments summed about the
    center or about each component's mean (``moments``)."""
    params = score_parameters(dataflow, weights, means, U, ws.center64, ws.k_pad, ws.d_pad, ws.pairs, precision)
    shift = moment_shifts(means, ws.center64, ws.k_pad, ws.d_pad) if moments == "component" else None
    if algorithm == "one_pass":
        stats, ll = one_pass_statistics(X, ws.center, sample_weight, params, shift, ws.pairs, ws.k_pad, dataflow,
                                        precision, cfg)
    else:
        stats, ll = two_pass_statistics(X, ws.center, sample_weight, params, shift, ws.pairs, ws.k_pad, dataflow,
                                        precision, cfg, L_buffer=ws.L)
    return (*unpack_statistics(stats, ws.K, ws.d, ws.pairs, shift), ll)


def _iterate(X, sample_weight, state, ws, lls, ok, algorithm, dataflow, precision, reg_covar, cfg, moments) -> None:
    """len(lls) iterations updating state = [weights, means, covariances, precisions_cholesky] in place;
    lls[i] <- ell at iteration i's incoming parameters; ok &= every Cholesky succeeded."""
    weights, means, cov, U = state
    for i in range(lls.shape[0]):
        n, s, M2, ll = workspace_statistics(X, sample_weight, weights, means, U, ws, algorithm, dataflow, precision,
                                            cfg, moments)
        new = mstep_full(n, s, M2, ws.center64, reg_covar)
        for buf, value in zip(state, new[:4]):  # a failed Cholesky keeps the last parameters: no NaN downstream
            buf.copy_(torch.where(new[4], value, buf))
        lls[i] = ll
        ok &= new[4]


def _prepared(X, init, sample_weight, algorithm, dataflow, precision, center, config, moments="center"):
    if moments not in MOMENTS:
        raise ValueError(f"moments must be one of {MOMENTS}, got {moments!r}")
    check_data(X)
    weights, means, U = (torch.as_tensor(a, device=X.device).double() for a in init)
    check_parameters(X, weights, means, U)
    sample_weight, scale = normalized_sample_weight(X, sample_weight)  # mean 1 before float32 (turbo_gmm._data)
    K, d = means.shape
    algorithm, dataflow = resolve(K, d, algorithm, dataflow, precision)
    cfg = config or full_launch_config(algorithm, K, d, dataflow)
    ws = Workspace(X, K, algorithm, data_center(X, center))
    ws.weight_scale = scale  # sum w / N: the sums over rows back in the caller's units
    return weights, means, U, sample_weight, algorithm, dataflow, cfg, ws


def estep_statistics(X, weights, means, precisions_cholesky, *, sample_weight=None, algorithm: str = "auto",
                     dataflow: str = "auto", precision: str = "tf32x3", center=True, config=None,
                     moments: str = "center"):
    """(n (K,), s (K, d), M2 (K, d, d), ell, center (d,)) in float64: the fused E-step's statistics about
    ``center`` (s = sum g (x - c), M2 = sum g (x - c)(x - c)^T, g = w gamma), for callers with their own M-step;
    ``moments`` "center" or "component" (no M-step here to fall back from)."""
    if moments == "auto":
        raise ValueError("estep_statistics takes moments 'center' or 'component' ('auto' falls back on an M-step)")
    weights, means, U, sw, algorithm, dataflow, cfg, ws = _prepared(
        X, (weights, means, precisions_cholesky), sample_weight, algorithm, dataflow, precision, center, config,
        moments)
    sums = workspace_statistics(X, sw, weights, means, U, ws, algorithm, dataflow, precision, cfg, moments)
    return (*(t * ws.weight_scale for t in sums), ws.center64)


def em_step(X, weights, means, precisions_cholesky, *, sample_weight=None, reg_covar: float = 1e-6,
            algorithm: str = "auto", dataflow: str = "auto", precision: str = "tf32x3", center=True,
            config=None, moments: str = "auto") -> StepResult:
    """One fused EM iteration from (weights (K,), means (K, d), precisions_cholesky (K, d, d)); the new
    parameters in float64 and ell at the incoming ones. scikit-learn's ValueError if a new covariance is not
    positive definite (under moments "auto", after the step with moments "component" too)."""
    weights, means, U, sw, algorithm, dataflow, cfg, ws = _prepared(
        X, (weights, means, precisions_cholesky), sample_weight, algorithm, dataflow, precision, center, config,
        moments)
    for ran in _moment_attempts(moments):
        n, s, M2, ll = workspace_statistics(X, sw, weights, means, U, ws, algorithm, dataflow, precision, cfg, ran)
        new_w, new_m, cov, new_U, ok = mstep_full(n, s, M2, ws.center64, reg_covar)
        if bool(ok):
            return StepResult(new_w, new_m, cov, new_U, ll * ws.weight_scale, algorithm, dataflow, ran)
    raise ValueError(ILL_DEFINED_COVARIANCE)


def _moment_attempts(moments: str) -> tuple:
    """The moments to try in turn: "auto" is "center", then "component" where an M-step fails."""
    return ("center", "component") if moments == "auto" else (moments,)


def _state(K, d, dev):
    """The graphed loop's parameter buffers: weights, means, covariances, precisions Cholesky."""
    f64 = torch.float64
    return [torch.ones(K, dtype=f64, device=dev), torch.zeros(K, d, dtype=f64, device=dev),
            torch.zeros(K, d, d, dtype=f64, device=dev), torch.eye(d, dtype=f64, device=dev).repeat(K, 1, 1)]


def fit(X, init, n_iter: int, *, sample_weight=None, reg_covar: float = 1e-6, algorithm: str = "auto",
        dataflow: str = "auto", precision: str = "tf32x3", center=True, config=None,
        cuda_graph: bool = True, moments: str = "auto") -> FitResult:
    """Exactly ``n_iter`` EM iterations from ``init`` = (weights, means, precisions_cholesky), as a CUDA graph on
    CUDA (replayed for the same X and settings); under ``moments="auto"`` a failed fit reruns with "component"."""
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    weights, means, U, sw, algorithm, dataflow, cfg, ws = _prepared(
        X, init, sample_weight, algorithm, dataflow, precision, center, config, moments)
    K = means.shape[0]
    graphed = X.is_cuda and cuda_graph and n_iter > 0
    for ran in _moment_attempts(moments):
        if graphed:
            key = (X.data_ptr(), tuple(X.shape), X.device, None if sw is None else sw.data_ptr(), K, n_iter,
                   algorithm, dataflow, precision, reg_covar, cfg, ran)
            g = cached(key, lambda: GraphedFit(_state(K, X.shape[1], X.device), n_iter, ws,
                                               lambda state, lls, ok: _iterate(X, sw, state, ws, lls, ok, algorithm,
                                                                               dataflow, precision, reg_covar, cfg,
                                                                               ran)))
            state, lls, ok = g.run(weights, means, U, ws.center64)
        else:
            state = [weights.clone(), means.clone(), torch.zeros(K, X.shape[1], X.shape[1], dtype=torch.float64,
                                                                 device=X.device), U.clone()]
            lls = torch.zeros(n_iter, dtype=torch.float64, device=X.device)
            ok_t = torch.ones((), dtype=torch.bool, device=X.device)
            _iterate(X, sw, state, ws, lls, ok_t, algorithm, dataflow, precision, reg_covar, cfg, ran)
            ok = bool(ok_t)
        if ok:
            return FitResult(state[0], state[1], state[2] if n_iter > 0 else None, state[3], lls * ws.weight_scale,
                             algorithm, dataflow, precision, graphed, ran)
    raise ValueError(ILL_DEFINED_COVARIANCE)
