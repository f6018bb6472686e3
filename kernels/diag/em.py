"""Diagonal-covariance EM on the fused kernels: ``em_step`` (one iteration) and ``fit`` (a fixed number).

X is a float32 contiguous (N, d) CUDA tensor (a CPU tensor under TRITON_INTERPRET=1; float64 too under
"fp64"). The kernels score x - c, c the column mean by default, formed in registers: the lift loses about a
digit per decade of |mean| / std (paper Appendix C). On CUDA ``fit``'s loop is a CUDA graph, replayed."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .._data import (check_data, check_sample_weight, column_moments, data_center,  # noqa: F401
                     normalized_sample_weight, total_weight)
from .._interpreter import interpreter_mode  # noqa: F401 (re-exported)
from ..dispatch import FLOAT32_PRECISIONS, PRECISIONS, SCORE_TOLERANCE, launch_config, resolve_algorithm  # noqa: F401
from ..launch import LaunchConfig
from .lift import lift_dtype, pow2_at_least_16, weights_buffer
from .lift_kernel import lift_into
from .mstep import IllDefinedCovarianceError, mstep_guard
from .mstep_kernel import ESTEP_NOT_FINITE, NO_FAILURE, decode_failure, mstep_into
from . import one_pass, two_pass
from .one_pass import one_pass_statistics
from .precision import Float32LiftWarning, data_radius, lift_error_bound, lift_warning
from .two_pass import two_pass_statistics

PARAMETER_NAMES = ("weights", "means", "variances")


@dataclass
class StepResult:
    """One EM iteration's result.

    Attributes
    ----------
    weights, means, variances : torch.Tensor
        The new parameters, float64, in data coordinates: (K,), (K, d), (K, d).
    log_likelihood : torch.Tensor
        sum_i w_i log p(x_i) at the incoming parameters, a float64 scalar tensor.
    n_floored : torch.Tensor
        Variance entries floored at ``reg_covar``, an int64 scalar tensor.
    algorithm : str
        "one_pass" or "two_pass"."""

    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihood: torch.Tensor  # float64 scalar tensor: sum_i L_i
    n_floored: torch.Tensor  # int64 scalar tensor: variance entries floored at reg_covar
    algorithm: str


@dataclass
class FitResult:
    """A fixed-length fit's result.

    Attributes
    ----------
    weights, means, variances : torch.Tensor
        The final parameters, float64, in data coordinates.
    log_likelihoods : torch.Tensor
        (n_iter,) float64, each at that iteration's incoming parameters.
    n_floored : int
        Variance entries floored at ``reg_covar`` over the fit.
    algorithm, precision : str
        What ran.
    kernel : str
        The statistics kernel that ran: "one_pass", "one_pass_ws", "two_pass" or "two_pass_ws".
    log_likelihoods_host : list of float or None
        The same values as host floats, where the graphed loop read them."""

    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihoods: torch.Tensor  # (n_iter,) float64, each at that iteration's incoming parameters
    n_floored: int
    algorithm: str
    precision: str
    kernel: str  # the statistics kernel that ran (:func:`statistics_kernel`)
    log_likelihoods_host: list | None = None  # the same values as host floats where the fit read them (graphed loop)


def check_parameter_shapes(X, weights, means, variances) -> None:
    """Shapes and devices: no GPU work."""
    d = X.shape[1]
    if means.ndim != 2 or means.shape[1] != d:
        raise ValueError(f"means must have shape (K, {d}), got {tuple(means.shape)}")
    K = means.shape[0]
    if tuple(weights.shape) != (K,) or tuple(variances.shape) != (K, d):
        raise ValueError(f"weights must be ({K},) and variances ({K}, {d}); got {tuple(weights.shape)}, {tuple(variances.shape)}")
    for name, t in zip(PARAMETER_NAMES, (weights, means, variances)):
        if t.device != X.device:
            raise ValueError(f"{name} is on {t.device} but X is on {X.device}")


def parameter_flags(weights, means, variances) -> torch.Tensor:
    """(4,) int64: weights, means, variances finite; weights >= 0 with one > 0 (a 0 weight takes no rows) and
    variances > 0. No host sync, so a CUDA graph can hold it."""
    named = (weights, means, variances)
    positive = (weights >= 0).all() & (weights > 0).any() & (variances > 0).all()
    return torch.stack([torch.isfinite(t).all() for t in named] + [positive]).long()


def raise_if_invalid(flags) -> None:
    """The error for the first failed check of :func:`parameter_flags` (as host ints)."""
    for name, ok in zip(PARAMETER_NAMES, flags[:3]):
        if not ok:
            raise ValueError(f"{name} has non-finite entries")
    if not flags[3]:
        raise ValueError("weights must be >= 0 (one > 0) and variances > 0")


class Float32RangeError(ValueError):
    """The kernels' float32 E-step gave a non-finite ell at finite parameters: the lifted score of some
    row left float32's range (``|x - c|^2 / V`` beyond ~1e38, as for data ~1e20 with a variance floor ~1)."""

    ESTEP = ("The float32 E-step of the kernels overflowed (a non-finite log-likelihood at finite parameters): the "
             "squared spread of X over the smallest variance does not fit float32's exponent range. Scale the input "
             "data, increase reg_covar, or fit in float64 (GaussianMixture(device='cpu')).")

    def __init__(self, message: str = ESTEP):
        super().__init__(message)


def raise_if_failed(failure: int) -> None:
    """The error for a fit's first failure recorded by the M-step kernel (:mod:`turbo_gmm.diag.mstep_kernel`)."""
    first = decode_failure(failure)
    if first is None:
        return
    if first[1] == ESTEP_NOT_FINITE:
        raise Float32RangeError()
    raise IllDefinedCovarianceError()


def check_parameters(X, weights, means, variances) -> None:
    check_parameter_shapes(X, weights, means, variances)
    raise_if_invalid(parameter_flags(weights, means, variances).tolist())  # one host sync for the four checks


class Workspace:
    """Per-fit buffers reused across iterations (W, b, statistics, padded center, Algorithm 3's L), in the
    kernels' dtype (:func:`turbo_gmm.diag.lift.lift_dtype`); the center is zero until :meth:`set_center`."""

    def __init__(self, X, K, algorithm, precision: str = "tf32x3"):
        N, d = X.shape
        self.k_pad, self.d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
        lifted, f64, dev = lift_dtype(precision), torch.float64, X.device
        self.W = weights_buffer(self.k_pad, self.d_pad, precision, dev)
        self.b = torch.empty(self.k_pad, dtype=lifted, device=dev)
        self.n = torch.zeros(self.k_pad, dtype=f64, device=dev)
        self.su = torch.zeros(self.k_pad, 2 * self.d_pad, dtype=f64, device=dev)
        self.ll = torch.zeros(1, dtype=f64, device=dev)
        self.center64 = torch.zeros(d, dtype=f64, device=dev)
        self.center = torch.zeros(self.d_pad, dtype=lifted, device=dev)
        self.L = torch.empty(N, dtype=lifted, device=dev) if algorithm == "two_pass" else None

    def set_center(self, center: torch.Tensor) -> None:
        self.center64.copy_(center)
        self.center[: center.shape[0]].copy_(center)


class _GraphedLoop:
    """n_iter EM iterations (lift, sweep, M-step launches) captured once as a CUDA graph and replayed per fit: at
    small N launches cost more than the work, so a fit is the copies in, the replay, one copy out and one host
    sync; the graph checks the incoming parameters and records the first failure itself."""

    def __init__(self, X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight=None, total=None):
        d, dev, f64 = X.shape[1], X.device, torch.float64
        self.ws = Workspace(X, K, algorithm, precision)
        self.sizes = (K, K * d, K * d, n_iter)
        self.flat = torch.ones(sum(self.sizes), dtype=f64, device=dev)  # weights | means | variances | ell
        *self.params, self.lls = self.split(self.flat)
        self.status = torch.zeros(6, dtype=torch.int64, device=dev)  # floored count | parameter_flags | failure
        self.sample_weight = sample_weight  # held: the graph reads it, and its address keys the cache

        def loop():
            self.status[1:5].copy_(parameter_flags(*self.params))
            self.status[:1].zero_()
            self.status[5:].fill_(NO_FAILURE)
            _iterate(X, self.params, self.ws, self.lls, self.status[:1], self.status[5:], algorithm, precision,
                     reg_covar, cfg, sample_weight, total)

        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):  # compile and allocate outside the capture
            loop()
        torch.cuda.current_stream(dev).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            loop()

    def split(self, flat):
        K = self.sizes[0]
        w, m, v, ll = flat.split(self.sizes)
        return [w, m.view(K, -1), v.view(K, -1), ll]

    def run(self, params, center):
        """(weights, means, variances, ell) as new tensors, [floored, *parameter_flags, failure] as host ints
        and ell as host floats: status and ell come back in one device-to-host read (the fit's one sync)."""
        for p, q in zip(self.params, params):
            p.copy_(q)
        self.ws.set_center(center)
        self.graph.replay()
        host = torch.cat([self.status.double(), self.lls]).tolist()
        n_status = self.status.shape[0]
        return self.split(self.flat.clone()), [int(v) for v in host[:n_status]], host[n_status:]


_GRAPHS: dict = {}
_MAX_GRAPHS = 4


def statistics_kernel(X, ws: Workspace, algorithm: str, precision: str, cfg: LaunchConfig) -> str:
    """The statistics kernel these settings run: "one_pass", "one_pass_ws", "two_pass" or "two_pass_ws"."""
    module = one_pass if algorithm == "one_pass" else two_pass
    return module.kernel_name(X, ws.W, cfg, precision)


def estep_statistics(X, weights, means, variances, ws: Workspace, algorithm, precision, cfg: LaunchConfig,
                     sample_weight=None):
    """One fused E-step into ``ws``'s float64 buffers: (n (k_pad,), su = [s | u] (k_pad, 2 d_pad) about the center,
    ell (1,)), every statistic weighted by ``sample_weight`` when given."""
    out = (ws.n, ws.su, ws.ll)
    lift_into(weights, means, variances, ws.center64, ws.W, ws.b, *out)
    if algorithm == "one_pass":
        one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, precision, out=out, sample_weight=sample_weight)
    else:
        two_pass_statistics(X, ws.center, ws.W, ws.b, means.shape[0], cfg, precision, out=out, L_buffer=ws.L,
                            sample_weight=sample_weight)
    return out


def _iterate(X, params, ws: Workspace, lls, floored, failure, algorithm, precision, reg_covar, cfg: LaunchConfig,
             sample_weight=None, total=None):
    """len(lls) EM iterations on ``params`` in place: lls[i] <- ell at iteration i's incoming parameters, floored +=
    floored entries, failure <- the first failure's code; ``total``: the weights' divisor (N when None)."""
    N = X.shape[0] if total is None else total
    guard = mstep_guard(N, X.shape[0])
    for i in range(lls.shape[0]):
        estep_statistics(X, *params, ws, algorithm, precision, cfg, sample_weight)
        mstep_into(ws.n, ws.su, ws.ll, N, ws.center64, reg_covar, *params, lls[i : i + 1], floored, failure, i,
                   guard)


def _graphed_loop(X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight=None, total=None) -> _GraphedLoop:
    """The cached graph for this X (by address and shape), these sample weights (by address and sum) and settings."""
    weights_key = None if sample_weight is None else (sample_weight.data_ptr(), total)
    key = (X.data_ptr(), tuple(X.shape), X.device, K, n_iter, algorithm, precision, reg_covar, cfg, weights_key)
    if key not in _GRAPHS:
        while len(_GRAPHS) >= _MAX_GRAPHS:
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = _GraphedLoop(X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight, total)
    return _GRAPHS[key]


def forget_graphs(X: torch.Tensor) -> None:
    """Drop the cached graphs of X: each holds X (and its workspace) alive until evicted, so a
    caller that made X for one fit (the estimator's device copy of a host array) frees it here."""
    for key in [k for k in _GRAPHS if k[0] == X.data_ptr() and k[1] == tuple(X.shape) and k[2] == X.device]:
        del _GRAPHS[key]


def em_step(X, weights, means, variances, *, sample_weight=None, reg_covar: float = 1e-6, algorithm: str = "auto",
            precision: str = "tf32x3", center=True, config: LaunchConfig | None = None) -> StepResult:
    """One fused EM iteration on diagonal covariances.

    Parameters
    ----------
    X : torch.Tensor
        (N, d) float32, contiguous, on CUDA (CPU under TRITON_INTERPRET=1); float64 too under "fp64".
    weights, means, variances : torch.Tensor
        (K,), (K, d), (K, d) on X's device.
    sample_weight : torch.Tensor, optional
        (N,) finite, >= 0: every statistic weighted; the step depends on the weights only up to their scale.
    reg_covar : float
        Added to every variance after the M-step (variances below it are floored and counted).
    algorithm : {"auto", "one_pass", "two_pass"}
        Algorithm 2 or 3; "auto": :func:`turbo_gmm.choose_algorithm`.
    precision : {"tf32x3", "ieee", "fp64"}
        The kernels' arithmetic.
    center : bool or torch.Tensor
        True: score about the column mean; False: about 0 (refused for data far from it); a (d,) tensor: as
        given (X is then not validated: loops should call :func:`fit`, which validates once).
    config : LaunchConfig, optional
        Tiles other than :func:`turbo_gmm.dispatch.launch_config`'s.

    Returns
    -------
    StepResult
        The new parameters and the log-likelihood at the incoming ones.

    Examples
    --------
    >>> import torch, turbo_gmm
    >>> device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU runs the kernels under TRITON_INTERPRET=1
    >>> X = torch.randn(256, 4, device=device)
    >>> step = turbo_gmm.em_step(X, torch.full((2,), 0.5, device=device), X[:2].clone(), torch.ones(2, 4, device=device))
    >>> step.means.shape, step.log_likelihood.dtype
    (torch.Size([2, 4]), torch.float64)"""
    check_data(X, precision)
    check_parameters(X, weights, means, variances)
    sample_weight, scale = normalized_sample_weight(X, sample_weight)
    K, d = means.shape
    algorithm = resolve_algorithm(K, d, algorithm, precision)
    ws = Workspace(X, K, algorithm, precision)
    ws.set_center(data_center(X, center))
    cfg = config or launch_config(algorithm, K, d, precision)
    params = [torch.as_tensor(a, device=X.device).double().clone() for a in (weights, means, variances)]
    ll = torch.zeros(1, dtype=torch.float64, device=X.device)
    floored = torch.zeros(1, dtype=torch.int64, device=X.device)
    failure = torch.full((1,), NO_FAILURE, dtype=torch.int64, device=X.device)
    _iterate(X, params, ws, ll, floored, failure, algorithm, precision, reg_covar, cfg, sample_weight,
             total_weight(X, sample_weight))
    raise_if_failed(int(failure))
    return StepResult(*params, ll[0] * scale, floored[0], algorithm)


def lift_bound(X, means, variances, shift, precision):
    """The float32 lift's error bound at (means, variances) as a device scalar (no host sync; None under fp64,
    which does not lift in float32): :func:`turbo_gmm.diag.precision.lift_error_bound`."""
    if precision not in FLOAT32_PRECISIONS:
        return None
    return lift_error_bound(data_radius(X, shift), means, variances, shift)


def warn_if_beyond(bound, where, stacklevel=3) -> bool:
    """Warn (:class:`turbo_gmm.diag.precision.Float32LiftWarning`) when ``bound`` (from :func:`lift_bound`) exceeds
    the tolerance (:mod:`turbo_gmm.diag.precision`); reading it is a host sync. True if it warned."""
    value = None if bound is None else float(bound)
    if value is None or not value > SCORE_TOLERANCE:
        return False
    warnings.warn(lift_warning(value, where), Float32LiftWarning, stacklevel=stacklevel)
    return True


def warn_if_lift_inexact(X, means, variances, shift, precision, where) -> bool:
    """:func:`warn_if_beyond` at (means, variances): one host sync. True if it warned."""
    return warn_if_beyond(lift_bound(X, means, variances, shift, precision), where, stacklevel=4)


def fit(X, init, n_iter: int, *, sample_weight=None, reg_covar: float = 1e-6, algorithm: str = "auto",
        precision: str = "tf32x3", center=True, config: LaunchConfig | None = None, cuda_graph: bool = True,
        lift_check: bool = True) -> FitResult:
    """Exactly ``n_iter`` EM iterations on diagonal covariances, no host sync inside the loop.

    Parameters
    ----------
    X : torch.Tensor
        As in :func:`em_step`; validated once.
    init : tuple
        (weights, means, variances), tensors or arrays.
    n_iter : int
        Iterations; no early stopping.
    sample_weight, reg_covar, algorithm, precision, center, config
        As in :func:`em_step` (a sample-weighted fit streams the weights beside X).
    cuda_graph : bool
        On CUDA, capture the loop as a CUDA graph on first use and replay it for later fits of the same X and
        settings; False runs it eagerly.
    lift_check : bool
        Under a float32 precision, warn (:class:`turbo_gmm.Float32LiftWarning`) where the lift's error bound
        exceeds the tolerance at the initial or final parameters.

    Returns
    -------
    FitResult
        Final parameters and the log-likelihood of every iteration.

    Raises
    ------
    IllDefinedCovarianceError
        An M-step with an ill-defined covariance (scikit-learn's ValueError), raised after the loop.
    Float32RangeError
        An E-step that left float32's range.

    Examples
    --------
    >>> import torch, turbo_gmm
    >>> device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU runs the kernels under TRITON_INTERPRET=1
    >>> X = torch.randn(512, 8, device=device)
    >>> r = turbo_gmm.fit(X, (torch.full((4,), 0.25), X[:4].cpu(), torch.ones(4, 8)), n_iter=5)
    >>> r.log_likelihoods.shape, round(float(r.weights.sum()), 6)
    (torch.Size([5]), 1.0)"""
    check_data(X, precision)
    sample_weight, scale = normalized_sample_weight(X, sample_weight)  # at mean 1; ell back in the caller's units
    total = total_weight(X, sample_weight)
    weights, means, variances = (torch.as_tensor(a, device=X.device).double() for a in init)
    graphed = X.is_cuda and cuda_graph and n_iter > 0
    if graphed:  # the values are checked inside the graph, and the error raised after it (one host sync per fit)
        check_parameter_shapes(X, weights, means, variances)
    else:
        check_parameters(X, weights, means, variances)
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    K, d = means.shape
    algorithm = resolve_algorithm(K, d, algorithm, precision)
    shift = data_center(X, center)
    cfg = config or launch_config(algorithm, K, d, precision)
    # the bound at the initial parameters is enqueued before the loop and read after the fit's own sync, so no
    # host sync stalls the device before the loop
    initial = lift_bound(X, means, variances, shift, precision) if lift_check else None
    if graphed:
        loop = _graphed_loop(X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight, total)
        (weights, means, variances, lls), (floored, *flags, failure), lls_host = loop.run((weights, means, variances),
                                                                                          shift)
        raise_if_invalid(flags)
        raise_if_failed(failure)
        if lift_check and not warn_if_beyond(initial, "initial"):
            warn_if_lift_inexact(X, means, variances, shift, precision, "final")
        if scale != 1.0:
            lls, lls_host = lls * scale, [v * scale for v in lls_host]
        return FitResult(weights, means, variances, lls, floored, algorithm, precision,
                         statistics_kernel(X, loop.ws, algorithm, precision, cfg), lls_host)
    ws = Workspace(X, K, algorithm, precision)
    ws.set_center(shift)
    params = [weights.clone(), means.clone(), variances.clone()]
    lls = torch.zeros(n_iter, dtype=torch.float64, device=X.device)
    floored = torch.zeros(1, dtype=torch.int64, device=X.device)
    failure = torch.full((1,), NO_FAILURE, dtype=torch.int64, device=X.device)
    _iterate(X, params, ws, lls, floored, failure, algorithm, precision, reg_covar, cfg, sample_weight, total)
    floored, failure = torch.cat([floored, failure]).tolist()  # one host sync
    raise_if_failed(failure)
    if lift_check and not warn_if_beyond(initial, "initial"):
        warn_if_lift_inexact(X, params[1], params[2], shift, precision, "final")
    return FitResult(*params, lls * scale if scale != 1.0 else lls, floored, algorithm, precision,
                     statistics_kernel(X, ws, algorithm, precision, cfg))
