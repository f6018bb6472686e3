"""Public API: one fused EM iteration (`em_step`) and a fixed-length fit (`fit`).

Both take X as a float32, contiguous (N, d) CUDA tensor (a CPU tensor when
Triton runs in interpreter mode, TRITON_INTERPRET=1); under ``precision="fp64"``
float64 X too, read where it is (float32 X is converted in registers). The kernels evaluate the
lifted score on data shifted by a center c inside the kernel (x - c is formed in
registers, no copy of X): the lift loses about one decimal digit per decade of
|mean|/std (paper Appendix C), so by default c is the column mean of X.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import torch

from .column_sums import column_sums, non_finite_message
from .dispatch import ALGORITHMS, choose_algorithm, launch_config
from .launch import LaunchConfig
from .lift import FP64, lift_dtype, pow2_at_least_16, weights_buffer
from .lift_kernel import lift_into
from .mstep import IllDefinedCovarianceError
from .mstep_kernel import ESTEP_NOT_FINITE, NO_FAILURE, decode_failure, mstep_into
from . import one_pass, two_pass
from .one_pass import one_pass_statistics
from .precision import FLOAT32_PRECISIONS, SCORE_TOLERANCE, Float32LiftWarning, data_radius, \
    keep_column_extremes, lift_error_bound, lift_warning
from .two_pass import two_pass_statistics

FLOAT32_PRECISIONS = ("tf32x3", "ieee")  # what kernels/full and kernels/tied compute (no fp64 there yet)
PRECISIONS = (*FLOAT32_PRECISIONS, FP64)
MAX_UNCENTERED_OFFSET = 10.0  # |column mean| / column std allowed with center=False
PARAMETER_NAMES = ("weights", "means", "variances")


@dataclass
class StepResult:
    """New parameters (float64, data coordinates) and ell at the incoming ones."""

    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihood: torch.Tensor  # float64 scalar tensor: sum_i L_i
    n_floored: torch.Tensor  # int64 scalar tensor: variance entries floored at reg_covar
    algorithm: str


@dataclass
class FitResult:
    weights: torch.Tensor
    means: torch.Tensor
    variances: torch.Tensor
    log_likelihoods: torch.Tensor  # (n_iter,) float64, each at that iteration's incoming parameters
    n_floored: int
    algorithm: str
    precision: str
    kernel: str  # the statistics kernel that ran (:func:`statistics_kernel`)
    log_likelihoods_host: list | None = None  # the same values as host floats where the fit read them (graphed loop)


def interpreter_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_data(X: torch.Tensor, precision: str = "tf32x3") -> None:
    """Reject what the kernels cannot take, naming the problem. float64 X only under fp64: the other
    precisions compute in float32 and would round it."""
    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have shape (N, d) with N, d >= 1, got {tuple(X.shape)}")
    if X.dtype not in ((torch.float32, torch.float64) if precision == FP64 else (torch.float32,)):
        raise TypeError(f"X must be float32 (or float64 with precision='fp64'), got {X.dtype} with precision {precision!r}")
    if not X.is_contiguous():
        raise ValueError("X must be contiguous (call .contiguous())")
    want = "cpu" if interpreter_mode() else "cuda"
    if X.device.type != want:
        raise ValueError(f"X must be on {want} (TRITON_INTERPRET={int(interpreter_mode())}), got {X.device}")


def column_moments(X: torch.Tensor):
    """(mean, std) per column in float64, on X's device, after checking every entry is finite.

    One read of X (:func:`turbo_gmm.column_sums.column_sums`: float64 sums and squares and the columns'
    extremes, then the mean and spread, in two launches) and one host sync, to raise a ValueError that
    counts the rows holding NaN or infinity. The extremes are kept for the float32 lift's bound
    (:func:`turbo_gmm.precision.column_extremes`), which then reads X no more."""
    sums = column_sums(X)
    if not sums.finite():
        raise ValueError(non_finite_message(X))
    keep_column_extremes(X, (sums.low, sums.high))
    return sums.mean, sums.std


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
    """(4,) int64 on the parameters' device: weights, means, variances finite; all weights and variances > 0.
    No host sync, so a CUDA graph can hold it (see :class:`_GraphedLoop`)."""
    named = (weights, means, variances)
    return torch.stack([torch.isfinite(t).all() for t in named] + [(weights > 0).all() & (variances > 0).all()]).long()


def raise_if_invalid(flags) -> None:
    """The error for the first failed check of :func:`parameter_flags` (as host ints)."""
    for name, ok in zip(PARAMETER_NAMES, flags[:3]):
        if not ok:
            raise ValueError(f"{name} has non-finite entries")
    if not flags[3]:
        raise ValueError("weights and variances must be > 0")


class Float32RangeError(ValueError):
    """The kernels' float32 E-step gave a non-finite ell at finite parameters: the lifted score of some
    row left float32's range (|x - c|^2 / V beyond ~1e38, as for data ~1e20 with a variance floor ~1)."""

    ESTEP = ("The float32 E-step of the kernels overflowed (a non-finite log-likelihood at finite parameters): the "
             "squared spread of X over the smallest variance does not fit float32's exponent range. Scale the input "
             "data, increase reg_covar, or fit in float64 (GaussianMixture(device='cpu')).")

    def __init__(self, message: str = ESTEP):
        super().__init__(message)


def raise_if_failed(failure: int) -> None:
    """The error for a fit's first failure recorded by the M-step kernel (:mod:`turbo_gmm.mstep_kernel`)."""
    first = decode_failure(failure)
    if first is None:
        return
    if first[1] == ESTEP_NOT_FINITE:
        raise Float32RangeError()
    raise IllDefinedCovarianceError()


def check_parameters(X, weights, means, variances) -> None:
    check_parameter_shapes(X, weights, means, variances)
    raise_if_invalid(parameter_flags(weights, means, variances).tolist())  # one host sync for the four checks


def data_center(X: torch.Tensor, center) -> torch.Tensor:
    """The in-kernel shift (float64, (d,)), after validating X's values.

    center=True: the column mean. center=False: zero, after checking the data is
    close enough to the origin for the lift (else a ValueError that says why).
    A tensor is used as given (callers that validated X already)."""
    if isinstance(center, torch.Tensor):
        return center.to(device=X.device, dtype=torch.float64)
    mean, std = column_moments(X)
    if center:
        return mean
    ratio = float((mean.abs() / std.clamp_min(1e-30)).max())
    if ratio > MAX_UNCENTERED_OFFSET:
        raise ValueError(
            f"X is far from the origin (max |mean|/std = {ratio:.3g} > {MAX_UNCENTERED_OFFSET}): the lifted score "
            "S = [X|X*X] W + b cancels terms of size |x|^2/V and loses about one digit per decade of offset; "
            "pass center=True (the default) or center X yourself")
    return torch.zeros_like(mean)


class Workspace:
    """Per-fit buffers reused across iterations (lifted parameters, statistics, padded center, L).

    The center is zero until :meth:`set_center`; L (two-pass only) holds X.shape[0] rows. W, b, the padded
    center and L are in the kernels' arithmetic, :func:`turbo_gmm.lift.lift_dtype` of ``precision``."""

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
    """n_iter EM iterations captured once as a CUDA graph and replayed per fit.

    An iteration is three launches (lift, sweep, M-step; four for Algorithm 3, plus
    under tf32x3 the few torch ops of pass 1's transposed TF32 split of W),
    but at small N even those cost more to launch than to run; replaying a graph
    pays the launch overhead once. At N = 20 000 what is left is the fit's fixed work
    around the replay (0.6-0.8 ms on the H200, more than ten replayed iterations), so a
    fit is the copies in, the replay, one copy out and one host sync: parameters and ell
    share one static buffer, and the graph itself checks the incoming parameters
    (:func:`parameter_flags`), clears the floored count and the first-failure code the
    M-step kernel lowers (:mod:`turbo_gmm.mstep_kernel`).
    """

    def __init__(self, X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight=None, total=None):
        d, dev, f64 = X.shape[1], X.device, torch.float64
        self.ws = Workspace(X, K, algorithm, precision)
        self.sizes = (K, K * d, K * d, n_iter)
        self.flat = torch.ones(sum(self.sizes), dtype=f64, device=dev)  # weights | means | variances | ell
        *self.params, self.lls = self.split(self.flat)
        self.status = torch.zeros(6, dtype=torch.int64, device=dev)  # floored count | parameter_flags | failure

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


def resolve_algorithm(K, d, algorithm, precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if algorithm == "auto":
        return choose_algorithm(K, d, precision=precision)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'auto' or one of {ALGORITHMS}, got {algorithm!r}")
    return algorithm


def statistics_kernel(X, ws: Workspace, algorithm: str, precision: str, cfg: LaunchConfig) -> str:
    """The kernel that computes the statistics of X under these settings, weighted or not: "one_pass"
    (Triton), "one_pass_ws" (warp-specialized, Gluon) or "two_pass" / "two_pass_ws" (Algorithm 3 with the
    Triton or the warp-specialized pass 2)."""
    module = one_pass if algorithm == "one_pass" else two_pass
    return module.kernel_name(X, ws.W, cfg, precision)


def estep_statistics(X, weights, means, variances, ws: Workspace, algorithm, precision, cfg: LaunchConfig,
                     sample_weight=None):
    """One fused E-step into ``ws``'s float64 buffers (the lift kernel zeroes them
    first): returns (n (k_pad,), su (k_pad, 2*d_pad) = [s | u] about ws's center, ell (1,)); with
    ``sample_weight`` (N,) (:func:`check_sample_weight`) every statistic and ell weighted."""
    out = (ws.n, ws.su, ws.ll)
    lift_into(weights, means, variances, ws.center64, ws.W, ws.b, *out)
    if algorithm == "one_pass":
        one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, precision, out=out, sample_weight=sample_weight)
    else:
        two_pass_statistics(X, ws.center, ws.W, ws.b, means.shape[0], cfg, precision, out=out, L_buffer=ws.L,
                            sample_weight=sample_weight)
    return out


def check_sample_weight(X: torch.Tensor, sample_weight):
    """sample_weight as an (N,) tensor of X's dtype on X's device (None stays None), after the checks scikit-learn's
    _check_sample_weight makes: one finite weight >= 0 per row, not all zero."""
    if sample_weight is None:
        return None
    w = torch.as_tensor(sample_weight, device=X.device)
    if w.ndim != 1 or w.shape[0] != X.shape[0]:
        raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {tuple(w.shape)}")
    w = w.to(X.dtype).contiguous()
    if not bool(torch.isfinite(w).all()):
        raise ValueError("sample_weight has non-finite entries")
    if bool((w < 0).any()):
        raise ValueError("sample_weight must be >= 0")
    if not bool((w > 0).any()):
        raise ValueError("sample_weight must have at least one positive entry")
    return w


def total_weight(X: torch.Tensor, sample_weight) -> float:
    """The M-step's divisor of n_k: N, or the sum of the sample weights (one host read)."""
    return float(X.shape[0]) if sample_weight is None else float(sample_weight.double().sum())


def _iterate(X, params, ws: Workspace, lls, floored, failure, algorithm, precision, reg_covar, cfg: LaunchConfig,
             sample_weight=None, total=None):
    """len(lls) EM iterations updating ``params`` = [weights, means, variances] (float64
    buffers) in place; lls[i] <- ell at iteration i's incoming parameters; floored += floored entries;
    failure (1,) int64 <- the first failure's code (left as it is if none, see :mod:`turbo_gmm.mstep_kernel`).
    ``total``: the weights' divisor (:func:`total_weight`), N when None."""
    for i in range(lls.shape[0]):
        estep_statistics(X, *params, ws, algorithm, precision, cfg, sample_weight)
        mstep_into(ws.n, ws.su, ws.ll, X.shape[0] if total is None else total, ws.center64, reg_covar, *params,
                   lls[i : i + 1], floored, failure, i)


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
    """One fused EM iteration.

    X (N, d) float32 (float32 or float64 under ``precision="fp64"``); weights (K,), means (K, d),
    variances (K, d) on X's device.
    Returns the updated parameters (float64) and ell = sum_i log p(x_i) at the
    incoming parameters. ``center``: True (column mean), False (refuse data far
    from the origin) or a (d,) tensor. Unless ``center`` is a tensor, X is
    validated and its mean taken on every call (one extra read of X); loops
    should call :func:`fit`, which does that once. ``sample_weight`` (N,), finite and >= 0: every
    statistic weighted, weights normalized by the weights' sum, ell = sum_i w_i log p(x_i).
    """
    check_data(X, precision)
    check_parameters(X, weights, means, variances)
    sample_weight = check_sample_weight(X, sample_weight)
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
    return StepResult(*params, ll[0], floored[0], algorithm)


def lift_bound(X, means, variances, shift, precision):
    """The float32 lift's error bound at (means, variances) as a device scalar (no host sync; None under fp64,
    which does not lift in float32): :func:`turbo_gmm.precision.lift_error_bound`."""
    if precision not in FLOAT32_PRECISIONS:
        return None
    return lift_error_bound(data_radius(X, shift), means, variances, shift)


def warn_if_beyond(bound, where, stacklevel=3) -> bool:
    """Warn (:class:`turbo_gmm.precision.Float32LiftWarning`) when ``bound`` (from :func:`lift_bound`) exceeds
    the tolerance (:mod:`turbo_gmm.precision`); reading it is a host sync. True if it warned."""
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
    """Exactly ``n_iter`` EM iterations from ``init`` = (weights, means, variances)
    (tensors or arrays). No early stopping; nothing synchronizes with the host
    inside the loop. ``center`` as in :func:`em_step`; X's values are checked once.
    On CUDA the loop is captured as a CUDA graph on first use and replayed by
    later fits of the same X and settings (``cuda_graph=False`` runs it eagerly).
    A model that breaks on the way is an error after the loop, never NaN parameters:
    an M-step with an ill-defined covariance is scikit-learn's ValueError
    (:class:`turbo_gmm.mstep.IllDefinedCovarianceError`), an E-step that left float32's
    range a :class:`Float32RangeError` (a ValueError), whichever came first. ``precision``: "tf32x3",
    "ieee" or "fp64" (float64 lift, score, normalizer and sums; float64 X accepted). ``sample_weight`` as in
    :func:`em_step` (one more stream of X's dtype beside X; graphs are keyed by its address and sum too).
    Under a float32 precision the lift's error bound (:func:`turbo_gmm.precision.lift_error_bound`) is checked
    at the initial parameters and, if that passed, at the final ones: above the tolerance it is a
    :class:`turbo_gmm.precision.Float32LiftWarning` (``lift_check=False`` skips it, for a caller that
    checks the bound itself, as ``GaussianMixture(precision="auto")`` does)."""
    check_data(X, precision)
    sample_weight = check_sample_weight(X, sample_weight)
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
    # host sync stalls the device before the loop (a read of it there slowed Table 1 at 1c3b02c)
    initial = lift_bound(X, means, variances, shift, precision) if lift_check else None
    if graphed:
        loop = _graphed_loop(X, K, n_iter, algorithm, precision, reg_covar, cfg, sample_weight, total)
        (weights, means, variances, lls), (floored, *flags, failure), lls_host = loop.run((weights, means, variances),
                                                                                          shift)
        raise_if_invalid(flags)
        raise_if_failed(failure)
        if lift_check and not warn_if_beyond(initial, "initial"):
            warn_if_lift_inexact(X, means, variances, shift, precision, "final")
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
    return FitResult(*params, lls, floored, algorithm, precision,
                     statistics_kernel(X, ws, algorithm, precision, cfg))
