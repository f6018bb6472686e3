"""``GaussianMixture``: scikit-learn's estimator, all four covariance types, on the fused kernels.

The EM loop (:meth:`GaussianMixture._em`) reads like the maths: E-step statistics at the incoming
parameters, then the M-step, until the lower bound -- the mean log-likelihood at the incoming parameters,
exactly scikit-learn's -- changes by less than ``tol``. Where X lives and each iteration's precision:
:mod:`turbo_gmm._fit_data`; what differs per covariance type: :mod:`turbo_gmm._covariance`; the rule for
algorithm, precision and tiles: :mod:`turbo_gmm.dispatch`."""
from __future__ import annotations

import contextlib
import time
import warnings
from numbers import Integral

import numpy as np
import torch
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as _SkGaussianMixture
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted

from ._covariance import COVARIANCE_TYPES, COVARIANCES
from ._data import checked_sample_weight, fitted_input, host_or_device, training_input
from ._fit_data import FitData, PhaseClock
from ._column_sums import non_finite_message
from ._interpreter import interpreter_mode
from .diag.mstep import IllDefinedCovarianceError, mstep_guard
from .dispatch import ALGORITHMS, PRECISIONS
from .init.moments import host_moments, initial_moments
from .streaming import CPU_BLOCK_BYTES

INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")
DEVICES = ("auto", "cuda", "cpu")
INIT_BACKENDS = ("auto", "torch", "sklearn")


class GaussianMixture(DensityMixin, BaseEstimator):
    """Gaussian mixture fitted by EM on the fused Triton kernels, with scikit-learn's API.

    A drop-in for ``sklearn.mixture.GaussianMixture``: the same parameters, methods, fitted attributes,
    convergence rule and errors (an ill-defined covariance raises scikit-learn's ValueError, never a NaN
    model), plus the GPU's knobs below. Inputs may be NumPy-like arrays, torch tensors or device arrays with
    DLPack / ``__cuda_array_interface__`` (CuPy, JAX); device arrays are read in place and predictions come
    back in the input's framework and device.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each component's own full covariance, one shared full covariance, diagonal or single-variance ones.
    tol : float, default=1e-3
        Convergence threshold on the change of the per-sample lower bound.
    reg_covar : float, default=1e-6
        Non-negative regularization added to the diagonal of covariances.
    max_iter : int, default=100
        EM iterations per initialization.
    n_init : int, default=1
        Initializations; the best result is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How the initial responsibilities are drawn.
    weights_init, means_init, precisions_init : array-like, default=None
        User-provided initial weights (K,), means (K, d) and precisions (shape per covariance type).
    random_state : int, RandomState instance or None, default=None
        Seeds the initialization.
    warm_start : bool, default=False
        Start ``fit`` from the previous fit's parameters (then ``n_init`` is ignored).
    verbose, verbose_interval : int, default=0, 10
        Progress output, as scikit-learn's.
    device : {"auto", "cuda", "cpu"}, default="auto"
        "cuda": the Triton kernels; "cpu": float64 torch ops in row blocks; "auto": CUDA if present, else the
        Triton interpreter under ``TRITON_INTERPRET=1``, else the CPU.
    algorithm : {"auto", "one_pass", "two_pass"}, default="auto"
        The kernels' algorithm (:func:`turbo_gmm.choose_algorithm`).
    precision : {"auto", "tf32x3", "ieee", "fp64"}, default="auto"
        The kernels' arithmetic. "auto" takes "fp64" for the whole fit where it costs what float32 does (small
        N K d), else, every iteration, "tf32x3" while the float32 lift's error bound is within tolerance and
        "fp64" beyond it (:mod:`turbo_gmm.dispatch`). An explicit float32 precision warns
        (:class:`turbo_gmm.Float32LiftWarning`) where the bound is exceeded. Full and tied compute "fp64" by
        float64 torch ops.
    max_device_bytes : int, default=None
        Device memory a host X may take; larger data (an array or ``np.memmap``) is streamed through it in
        chunks every iteration. None: X is copied to the device once.
    init_backend : {"auto", "torch", "sklearn"}, default="auto"
        Where the initialization runs: "torch" on X's device (scikit-learn's procedure, not its draws),
        "sklearn" scikit-learn's own on the host (identical starts); "auto": "torch" for X on CUDA.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Mixture weights.
    means_ : ndarray of shape (n_components, n_features)
        Component means.
    covariances_ : ndarray
        (K,) spherical, (K, d) diag, (d, d) tied or (K, d, d) full.
    precisions_ : ndarray
        Inverses of ``covariances_``, same shape.
    precisions_cholesky_ : ndarray
        Cholesky factors of ``precisions_`` (upper triangular for full and tied), same shape.
    converged_ : bool
        Whether the best initialization converged.
    n_iter_ : int
        EM iterations of the best initialization.
    lower_bound_ : float
        Mean (sample-weighted) log-likelihood at the best initialization's last iteration.
    lower_bounds_ : list of float
        ``lower_bound_`` at every iteration of the best initialization.
    n_features_in_ : int
        Number of features seen in ``fit``.
    backend_ : str
        "triton", "triton-interpreter" or "torch-cpu".
    algorithm_ : str
        The algorithm that ran ("torch_float64" for full and tied's float64 E-step).
    precision_ : str
        The precision of the best initialization's last iteration.
    precision_switches_ : list of (int, str)
        The iterations at which the precision began or changed.
    n_floored_ : int
        Variance entries floored at ``reg_covar`` during the fit (0 for full and tied).
    rows_per_chunk_ : int or None
        Rows per streamed chunk; None when X was on the device at once.
    init_backend_ : str
        "torch" or "sklearn".
    fit_profile_ : dict
        Wall seconds of the fit by phase: transfer, validation, init, em, other, total; and n_iter.

    See Also
    --------
    sklearn.mixture.GaussianMixture : the reference implementation.

    Notes
    -----
    ``fit``, ``fit_predict`` and ``score`` take ``sample_weight`` (finite, >= 0): every statistic is weighted and
    integer weights give the fit of duplicated rows. Float32 input gives float32 attributes and outputs, as
    scikit-learn's; float64 input is rounded to float32 for the float32 kernels unless the fit is fp64 throughout.

    Examples
    --------
    >>> import numpy as np
    >>> from turbo_gmm import GaussianMixture
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=np.float64)
    >>> gm = GaussianMixture(n_components=2, random_state=0, device="cpu").fit(X)
    >>> np.sort(gm.means_[:, 0])
    array([ 1., 10.])
    >>> gm.predict([[0, 0], [12, 3]])[0] != gm.predict([[0, 0], [12, 3]])[1]
    np.True_"""

    _parameter_constraints: dict = {  # scikit-learn's (InvalidParameterError), covariance types and extras ours
        **_SkGaussianMixture._parameter_constraints,
        "covariance_type": [StrOptions(set(COVARIANCE_TYPES))],
        "device": [StrOptions(set(DEVICES))],
        "algorithm": [StrOptions({"auto", *ALGORITHMS})],
        "precision": [StrOptions({"auto", *PRECISIONS})],
        "max_device_bytes": [Interval(Integral, 1, None, closed="left"), None],
        "init_backend": [StrOptions(set(INIT_BACKENDS))],
    }

    def __init__(self, n_components=1, *, covariance_type="full", tol=1e-3, reg_covar=1e-6, max_iter=100, n_init=1,
                 init_params="kmeans", weights_init=None, means_init=None, precisions_init=None, random_state=None,
                 warm_start=False, verbose=0, verbose_interval=10, device="auto", algorithm="auto",
                 precision="auto", max_device_bytes=None, init_backend="auto"):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval
        self.device = device
        self.algorithm = algorithm
        self.precision = precision
        self.max_device_bytes = max_device_bytes
        self.init_backend = init_backend

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit by EM (``n_init`` starts, up to ``max_iter`` iterations each); returns self. An ill-defined model
        raises scikit-learn's ValueError; a failed fit leaves the estimator as it was."""
        state = dict(self.__dict__)
        try:
            self._fit(X, sample_weight)
        except BaseException:  # nothing half-written: a failed fit leaves the estimator as it was
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
        return self

    def fit_predict(self, X, y=None, sample_weight=None):
        """Fit, then the labels of X under the fitted model (as fit(X).predict(X))."""
        return self.fit(X, sample_weight=sample_weight).predict(X)

    def _fit(self, X, sample_weight=None):
        started = time.perf_counter()
        X, tensor = host_or_device(X)
        backend, label, device = self._backend(tensor)
        # the kernels' backends check finiteness on the device, in the pass that takes the column mean
        X = training_input(self, X, tensor, min_samples=2, ensure_all_finite=backend == "torch")
        N, d = (tensor if tensor is not None else X).shape
        # scikit-learn's attributes follow X's dtype (float32 or float64; other dtypes are taken as float64)
        float32_input = (tensor.dtype == torch.float32) if tensor is not None else X.dtype == np.float32
        K = self.n_components
        if N < K:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = {K}, n_samples = {N}")
        if self.warm_start and hasattr(self, "converged_") and self.means_.shape[1] != d:  # a refit from the fitted
            # model: scikit-learn's ValueError (its validate_data's message), not a tensor shape error
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting {self.means_.shape[1]} "
                             "features as input (warm_start=True continues from the fitted model).")
        sample_weight = None if sample_weight is None else checked_sample_weight(sample_weight, N, K)
        init_w, init_m, init_p = self._checked_initial_parameters(d)
        cuda = device.type == "cuda"
        with torch.cuda.device(device) if cuda else contextlib.nullcontext():
            clock = PhaseClock(cuda, started)
            data = FitData(X if tensor is None else tensor, K, backend, device, self.max_device_bytes,
                            self.algorithm, self.precision, self.reg_covar, clock, self.covariance_type, sample_weight)
            try:
                self._fit_data(data, init_w, init_m, init_p, clock, np.float32 if float32_input else np.float64)
            except IllDefinedCovarianceError as error:  # scikit-learn's message follows the dtype of X
                raise IllDefinedCovarianceError(float32_input) from error
            finally:
                data.release()
        self.backend_ = label
        self.algorithm_ = data.algorithm
        self.rows_per_chunk_ = data.rows if data.streamed else None

    def _fit_data(self, data, init_w, init_m, init_p, clock, dtype):
        """EM from ``n_init`` starts (under warm_start, once from the fitted model); the start of the highest
        lower bound becomes the fitted model."""
        do_init = not (self.warm_start and hasattr(self, "converged_"))
        random_state = check_random_state(self.random_state)
        init_backend = self._init_backend(data)
        progress = _Progress(self.verbose, self.verbose_interval)
        best, iterations = None, 0
        for init in range(self.n_init if do_init else 1):
            progress.init_begin(init)
            with clock.phase("init"):
                if do_init:
                    params = self._initial_parameters(data, init_backend, random_state, init_w, init_m, init_p)
                else:
                    params = tuple(torch.as_tensor(a, dtype=torch.float64, device=data.device)
                                   for a in COVARIANCES[self.covariance_type].fitted(self))
            with clock.phase("em"):
                run = self._em(data, params, -np.inf if do_init else self.lower_bound_, progress)
            iterations += run["n_iter"]
            if best is None or run["lower_bound"] > best["lower_bound"] or best["lower_bound"] == -np.inf:
                best = run
        if best.get("incoming") is not None:
            with clock.phase("em"):
                exact = data.float64_lower_bound(best["incoming"], best["switches"][-1][1])
            if exact is not None:  # the float32 ell is off by more than the tolerance: the lower bound in float64
                best["lower_bound"] = exact
                best["lower_bounds"] = best["lower_bounds"][:-1] + [exact]
        if not best["converged"] and self.max_iter > 0:
            warnings.warn("Best performing initialization did not converge. Try different init parameters, or "
                          "increase max_iter, tol, or check for degenerate data.", ConvergenceWarning)
        self._set_fitted_parameters([a.cpu().numpy() for a in best["params"]], dtype)
        self.converged_ = best["converged"]
        self.n_iter_ = best["n_iter"]
        self.lower_bound_ = best["lower_bound"]
        self.lower_bounds_ = best["lower_bounds"]
        self.n_floored_ = best["floored"]
        self.precision_switches_ = best["switches"]
        self.precision_ = best["switches"][-1][1]
        self.init_backend_ = init_backend
        self.fit_profile_ = clock.profile(n_iter=iterations)

    def _em(self, data, params, lower_bound, progress) -> dict:
        """One start's EM: E-step statistics at the incoming parameters, then the M-step, until the lower bound
        (the mean log-likelihood at the incoming parameters, scikit-learn's) changes by less than ``tol``."""
        if self.max_iter == 0:
            return dict(lower_bound=-np.inf, converged=False, params=params, n_iter=0, lower_bounds=[], floored=0,
                        switches=[(0, data.choose_precision(params, first=True))], incoming=None)
        lower_bounds, converged, floored, switches = [], False, 0, []
        for n_iter in range(1, self.max_iter + 1):
            precision = data.choose_precision(params, first=n_iter == 1)
            if not switches or switches[-1][1] != precision:
                switches.append((n_iter, precision))
            incoming = params
            params, f, ll = data.iterate(params)  # the E-step at ``incoming``, then the M-step
            floored += f
            prev, lower_bound = lower_bound, ll / data.total_weight
            lower_bounds.append(lower_bound)
            progress.iter_end(n_iter, lower_bound - prev)
            if abs(lower_bound - prev) < self.tol:
                converged = True
                break
        progress.init_end(lower_bound, converged)
        return dict(lower_bound=lower_bound, converged=converged, params=params, n_iter=n_iter,
                    lower_bounds=lower_bounds, floored=floored, switches=switches, incoming=incoming)

    def _set_fitted_parameters(self, params, dtype):
        """The fitted attributes in scikit-learn's shapes and conventions, in ``dtype``."""
        covariances, U, precisions = COVARIANCES[self.covariance_type].attributes(params)
        self.weights_, self.means_, self.covariances_, self.precisions_cholesky_, self.precisions_ = (
            a.astype(dtype) for a in (params[0], params[1], covariances, U, precisions))

    def _checked_initial_parameters(self, d):
        """weights_init, means_init, precisions_init validated as scikit-learn does."""
        K = self.n_components
        w = m = p = None
        weights_init, means_init, precisions_init = (
            a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a
            for a in (self.weights_init, self.means_init, self.precisions_init))
        if self.weights_init is not None:
            w = check_array(weights_init, dtype=[np.float64, np.float32], ensure_2d=False)
            _check_shape(w, (K,), "weights")
            if (w < 0).any() or (w > 1).any():
                raise ValueError(f"The parameter 'weights' should be in the range [0, 1], but got max value "
                                 f"{w.max():.5f}, min value {w.min():.5f}")
            if abs(1.0 - w.sum()) > (1e-6 if w.dtype == np.float32 else 1e-8):
                raise ValueError(f"The parameter 'weights' should be normalized, but got sum(weights) = {w.sum():.5f}")
        if self.means_init is not None:
            m = check_array(means_init, dtype=[np.float64, np.float32], ensure_2d=False)
            _check_shape(m, (K, d), "means")
        if self.precisions_init is not None:
            p = check_array(precisions_init, dtype=[np.float64, np.float32], ensure_2d=False, allow_nd=True)
            covariance = COVARIANCES[self.covariance_type]
            _check_shape(p, covariance.precisions_shape(K, d), f"{self.covariance_type} precision")
            covariance.check_precisions(p)
        return w, m, p

    def _backend(self, tensor=None):
        """(statistics backend, label for backend_, torch device) for X (``tensor``: X on a device)."""
        return data_backend(self.device, tensor)

    def _init_backend(self, data):
        """"sklearn" with sample weights: the torch initialization draws unweighted (k-means, k-means++)."""
        if self.init_backend == "torch" and data.sample_weight is not None:
            raise ValueError("init_backend='torch' does not take sample_weight (its k-means is unweighted); use "
                             "init_backend='sklearn' or 'auto'")
        if self.init_backend != "auto":
            return self.init_backend
        return "torch" if data.device.type == "cuda" and not data.streamed and data.sample_weight is None else "sklearn"

    def _initial_parameters(self, data, init_backend, random_state, init_w, init_m, init_p):
        """Initial float64 parameters on the data's device: one M-step on the responsibilities of ``init_params``
        (scikit-learn's initialization), overridden by the user's weights, means and precisions; scikit-learn's
        ValueError if that model is ill-defined."""
        covariance = COVARIANCES[self.covariance_type]
        if init_w is not None and init_m is not None and init_p is not None:
            weights, means = (torch.as_tensor(np.asarray(a, np.float64)) for a in (init_w, init_m))
            cov, U = covariance.from_precisions(init_p)
        else:
            weights, means, cov, U = self._moment_parameters(data, init_backend, random_state)
            weights = weights if init_w is None else torch.as_tensor(np.asarray(init_w, np.float64))
            means = means if init_m is None else torch.as_tensor(np.asarray(init_m, np.float64))
            if init_p is not None:
                cov, U = covariance.from_precisions(init_p)
        params = tuple(torch.as_tensor(a, dtype=torch.float64).to(data.device) for a in (
            (weights, means, cov) + ((U,) if covariance.matrix else ())))
        if not bool(covariance.well_defined_start(params)):
            raise IllDefinedCovarianceError()
        return params

    def _moment_parameters(self, data, init_backend, random_state):
        """(weights, means, covariances, precisions Cholesky or None): scikit-learn's M-step on the initial
        responsibilities' moments about X's column mean (``offset``, X's coordinates); moments about zero would
        cancel |mean|^2 / variance digits."""
        covariance = COVARIANCES[self.covariance_type]
        second = covariance.second
        if init_backend == "torch":
            nk, sx, sxx = initial_moments(data.tensor, self.n_components, self.init_params, random_state,
                                          (data.center + data.origin - data.tensor_origin).to(data.tensor.device),
                                          data.column_variance_mean(), second)
            offset = (data.center + data.origin).to(data.tensor.device)
        else:
            offset = (data.center + data.origin).cpu()
            nk, sx, sxx = (torch.as_tensor(a) for a in host_moments(
                data.host(), self.n_components, self.init_params, random_state, offset.numpy(), second,
                data.sample_weight))
        n_raw, nk = nk, nk + mstep_guard(data.total_weight, data.shape[0])
        means = sx / nk[:, None]
        weights = nk / data.total_weight
        cov, U = covariance.initial_covariances(nk, means, sx, sxx, n_raw, self.reg_covar, self.init_params, offset,
                                                lambda: (*data.centered_moments(), data.total_weight))
        return weights, means + offset, cov, U

    # --------------------------------------------------------------- prediction
    def _log_resp_blocks(self, X):
        """(N, out_device, blocks, output, floating): X validated now; blocks yields (r0, r1, log Gamma, L) per
        row block, float64 torch tensors on the device the rows are evaluated on (X's own for a
        device array, else the fitted backend's); results are gathered on ``out_device`` (X's for a
        device array, the host otherwise) and output(result) puts them in X's framework. ``floating``: the
        dtype scikit-learn's float results take, float32 where X and the fitted model both are, else float64."""
        X, tensor, output = fitted_input(self, X)
        if tensor is not None:
            device, out_device = tensor.device, tensor.device
        else:
            device, out_device = self._backend()[2], torch.device("cpu")
        K, d = self.means_.shape
        covariance = COVARIANCES[self.covariance_type]
        rows = max(1, (self.max_device_bytes or CPU_BLOCK_BYTES) // covariance.bytes_per_row(K, d))
        w, m = (torch.as_tensor(a, dtype=torch.float64, device=device) for a in (self.weights_, self.means_))
        v, log_resp = covariance.score_operand(self, device)
        center = w @ m  # the mixture's mean: the score is evaluated about it

        def blocks():
            bad = torch.zeros((), dtype=torch.int64, device=device)
            for r0 in range(0, X.shape[0], rows):
                r1 = min(X.shape[0], r0 + rows)
                if tensor is not None:  # host arrays were checked by validate_data
                    x = X[r0:r1].double()
                    bad += (~torch.isfinite(x).all(1)).sum()
                else:
                    x = torch.as_tensor(np.asarray(X[r0:r1], np.float64), device=device)
                yield r0, r1, *log_resp(x - center, w, m - center, v)
            if tensor is not None and int(bad):
                raise ValueError(non_finite_message(X))
        float32 = X.dtype == (torch.float32 if isinstance(X, torch.Tensor) else np.float32)
        floating = torch.float32 if float32 and self.means_.dtype == np.float32 else torch.float64
        return X.shape[0], out_device, blocks(), output, floating

    def _evaluate(self, X, shape, dtype, result):
        """Fill an array of ``shape`` (n_samples first) from ``result(log Gamma, L)`` block by block; ``dtype``
        None: scikit-learn's float dtype for X (:meth:`_log_resp_blocks`), the values computed in float64."""
        N, out_device, blocks, output, floating = self._log_resp_blocks(X)
        out = torch.empty((N, *shape), dtype=floating if dtype is None else dtype, device=out_device)
        for r0, r1, lr, L in blocks:
            out[r0:r1] = result(lr, L)
        return output(out)

    def score_samples(self, X):
        """log p(x_i) under the fitted mixture, (n_samples,)."""
        return self._evaluate(X, (), None, lambda lr, L: L)

    def score(self, X, y=None, sample_weight=None):
        """Mean log-likelihood per sample (weighted by ``sample_weight``: sum_i w_i log p(x_i) / sum_i w_i)."""
        ll = self._score_samples_tensor(X)
        if sample_weight is None:
            return float(ll.mean())
        w = torch.as_tensor(checked_sample_weight(sample_weight, ll.shape[0], 1), device=ll.device)
        return float((w * ll).sum() / w.sum())

    def _score_samples_tensor(self, X):
        N, out_device, blocks, *_ = self._log_resp_blocks(X)
        out = torch.empty(N, dtype=torch.float64, device=out_device)
        for r0, r1, _, L in blocks:
            out[r0:r1] = L
        return out

    def predict(self, X):
        """Most probable component of each sample."""
        return self._evaluate(X, (), torch.int64, lambda lr, L: lr.argmax(1))

    def predict_proba(self, X):
        """Responsibilities (n_samples, n_components), computed block by block."""
        return self._evaluate(X, (self.n_components,), None, lambda lr, L: lr.exp())

    def _n_parameters(self):
        """Free parameters, as scikit-learn counts them per covariance type."""
        return COVARIANCES[self.covariance_type].n_parameters(*self.means_.shape)

    def bic(self, X):
        """Bayesian information criterion (lower is better)."""
        ll = self._score_samples_tensor(X)
        return float(-2 * ll.mean() * ll.shape[0] + self._n_parameters() * np.log(ll.shape[0]))

    def aic(self, X):
        """Akaike information criterion (lower is better)."""
        ll = self._score_samples_tensor(X)
        return float(-2 * ll.mean() * ll.shape[0] + 2 * self._n_parameters())

    def sample(self, n_samples=1):
        """(X (n_samples, d), component labels), drawn as scikit-learn draws them (NumPy, on the host)."""
        check_is_fitted(self)
        if n_samples < 1:
            raise ValueError(f"Invalid value for 'n_samples': {n_samples}. The sampling requires at least one sample.")
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        X = COVARIANCES[self.covariance_type].sample(rng, self.means_, self.covariances_, counts)
        y = np.concatenate([np.full(c, k, dtype=np.int64) for k, c in enumerate(counts)])
        return X, y


class _Progress:
    """scikit-learn's verbose messages (verbose=1: iterations, 2: with times and ll change)."""

    def __init__(self, verbose, interval):
        self.verbose, self.interval = verbose, interval

    def init_begin(self, n_init):
        if self.verbose >= 1:
            print(f"Initialization {n_init}")
        self.t_init = self.t_iter = time.time()

    def iter_end(self, n_iter, change):
        if n_iter % self.interval == 0:
            if self.verbose == 1:
                print(f"  Iteration {n_iter}")
            elif self.verbose >= 2:
                now = time.time()
                print(f"  Iteration {n_iter}\t time lapse {now - self.t_iter:.5f}s\t ll change {change:.5f}")
                self.t_iter = now

    def init_end(self, lower_bound, converged):
        msg = "converged" if converged else "did not converge"
        if self.verbose == 1:
            print(f"Initialization {msg}.")
        elif self.verbose >= 2:
            print(f"Initialization {msg}. time lapse {time.time() - self.t_init:.5f}s\t lower bound {lower_bound:.5f}.")


def _check_shape(a, shape, name):
    if a.shape != shape:
        raise ValueError(f"The parameter '{name}' should have the shape of {shape}, but got {a.shape}")


def data_backend(device: str, tensor=None):
    """("triton" or "torch", the backend_ label, torch device) of the ``device`` parameter for X (``tensor``: X on a
    device, fitted where it lives): "auto" is CUDA if present, else the Triton interpreter under TRITON_INTERPRET=1,
    else the CPU's torch ops."""
    cuda = torch.cuda.is_available()
    if tensor is not None:
        if device == "cpu":
            raise ValueError(f"X is on {tensor.device} but device='cpu': pass X.cpu() for the CPU fallback, or "
                             "device='auto' to fit where X is")
        return "triton", "triton", tensor.device
    if device == "cpu" or (device == "auto" and not cuda and not interpreter_mode()):
        return "torch", "torch-cpu", torch.device("cpu")
    if cuda:
        return "triton", "triton", torch.device("cuda", torch.cuda.current_device())
    if interpreter_mode():
        return "triton", "triton-interpreter", torch.device("cpu")
    raise ValueError("device='cuda' needs a CUDA GPU (or TRITON_INTERPRET=1 to run the kernels in Triton's "
                     "CPU interpreter); use device='cpu' or 'auto' for the CPU fallback")
