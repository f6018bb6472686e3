"""``GaussianMixture``: scikit-learn's estimator, all four covariance types, on the fused kernels.

Same parameters, methods, attributes and convergence rule as ``sklearn.mixture.GaussianMixture``
for ``covariance_type`` "full" (the default, as scikit-learn's), "tied", "diag" and "spherical":
full and tied run on kernels/full and kernels/tied (:mod:`turbo_gmm.estep_full`), diag and spherical
on the diagonal kernels; ``covariances_``, ``precisions_`` and ``precisions_cholesky_`` have
scikit-learn's shapes and conventions per type, and ``bic`` / ``aic`` its parameter counts. Plus

* ``device``: "auto" (CUDA if present, else the Triton interpreter when
  ``TRITON_INTERPRET=1``, else the CPU fallback), "cuda" (the Triton kernels), or
  "cpu" (the fallback: the same E-step statistics by torch ops in float64, in
  row blocks). ``backend_`` says which ran: "triton", "triton-interpreter" or
  "torch-cpu".
* ``algorithm``: passed to the kernels (:func:`turbo_gmm.fit`).
* ``precision``: "auto" (the default), or one of the kernels' precisions, passed as it is
  (``turbo_gmm.em.PRECISIONS``; a float32 one warns, :class:`turbo_gmm.precision.Float32LiftWarning`, where
  its lift's error bound exceeds the tolerance at a start's initial parameters). "auto", for diag and
  spherical: "fp64" for the whole fit where an fp64 sweep costs what a tf32x3 one does, at the kernels'
  launch floor (N K d <= ``turbo_gmm.precision.FP64_FLOOR_WORK``, measured on the H200: every data set that
  ships with scikit-learn, Table 1's 20K shapes up to K = 32), so small fits get scikit-learn's float64
  arithmetic; above it, before every EM iteration: "tf32x3" where the float32 lift's score error bound at the incoming
  parameters is within ``turbo_gmm.precision.SCORE_TOLERANCE`` (:func:`turbo_gmm.precision.lift_error_bound`:
  the data's range about its mean and the smallest variances, O(Kd) and one host read an iteration), else
  "fp64" -- the near-constant features of issue 20, whose floored variances make the float32 lift cancel
  terms of ~1e9; "fp64" computes the E-step in float64 on the kernels. A float64 X reaches a fit that is fp64
  throughout (explicit, or auto at the floor) in float64, unrounded; otherwise as float32, as below. Full and
  tied have float32 kernels only: their "fp64" is the float64 torch E-step on X's device (``algorithm_``
  "torch_float64"), which "auto" takes where also N K d^2 <= ``turbo_gmm.precision.MATRIX_FP64_FLOOR_WORK``
  (every data set that ships with scikit-learn), else "tf32x3".
  ``precision_`` is the precision of the kept start's last iteration ("fp64" on the float64 CPU fallback),
  ``precision_switches_`` the (iteration, precision) at which it started or changed.
* ``max_device_bytes``: the device memory a host X may take. Larger data (a host
  array or ``np.memmap``) is streamed through it in chunks each iteration
  (:mod:`turbo_gmm.streaming`), summing float64 statistics before one M-step.
* ``sample_weight`` in ``fit``, ``fit_predict`` and ``score`` (scikit-learn's GaussianMixture has
  none; the convention of its estimators that do, ``_check_sample_weight``: finite, >= 0): every
  E-step statistic is weighted (w_i Gamma_ik), the weights are normalized by sum_i w_i, and
  ``lower_bound_`` = sum_i w_i log p(x_i) / sum_i w_i, so integer weights give the fit of duplicated
  rows and zero weights that of dropped ones. On the kernels' backends the weights are one more
  stream beside X (its dtype; streamed chunk by chunk with it); weighted diag E-steps run on the
  Triton kernels, not the warp-specialized Gluon ones. The initialization weights its
  responsibilities' moments; k-means and k-means++ take the weights (scikit-learn's ``sample_weight``),
  "random_from_data" draws among rows of positive weight, and so a weighted fit initializes on the
  host (init_backend "sklearn"; "torch" refuses weights).
* ``init_backend``: where the initialization runs. "torch": scikit-learn's
  procedure for ``init_params`` in torch ops where X is (:mod:`turbo_gmm.initialization`:
  k-means++ seeding and Lloyd's k-means on the GPU, float64 moments), from a
  ``torch.Generator`` seeded by ``random_state`` -- the same procedure as
  scikit-learn's, not the same draws. "sklearn": scikit-learn's own ``KMeans`` /
  ``kmeans_plusplus`` / draws on the host, so both estimators start from identical
  parameters. "auto": "torch" when X is on a CUDA device, else "sklearn".

Data in and out (:mod:`turbo_gmm.arrays`). ``fit``, ``predict``, ``predict_proba``,
``score``, ``score_samples``, ``bic``, ``aic`` take NumPy-like arrays, torch tensors
(CPU or CUDA) and device arrays with DLPack or ``__cuda_array_interface__`` (CuPy,
JAX); a device array is read where it is (no host round trip; it must be
C-contiguous for ``fit``, and a dtype other than float32 is converted once on the
device). Predictions come back in the input's framework and device: a torch tensor
for a torch tensor, a CuPy/JAX array for a CuPy/JAX array, NumPy otherwise; ``score``,
``bic`` and ``aic`` are floats. Fitted attributes are NumPy arrays, as scikit-learn's,
and ``sample`` draws as scikit-learn does, on the host. A host array is copied to the
device once (pinned memory, double-buffered). On the kernels' backends X is validated
on the device in the same read that takes its column mean (:func:`turbo_gmm.em.column_moments`):
non-finite input is a ValueError that counts the rows holding NaN or infinity.

Every EM iteration is: E-step statistics (n, s, u, ell) at the current parameters,
then the M-step. On the kernels' backends with X on the device an iteration is one
replay of :func:`turbo_gmm.fit`'s captured CUDA graph (lift, sweep, M-step) followed by
one read-back to the host of ell and the graph's parameter and failure checks, the
convergence test; streamed, on the CPU fallback, or full and tied, it is :mod:`turbo_gmm.estep` (diag) or
:mod:`turbo_gmm.estep_full` per block, one M-step and one read of ell. ell is at
the *incoming* parameters, and so is scikit-learn's lower bound of an iteration (the
mean log-likelihood of the E-step that precedes the M-step), so ``lower_bound_ = ell /
N`` of the last iteration, exactly scikit-learn's; convergence is ``|change| < tol``.

``fit_profile_`` (after a fit): the fit's wall seconds split by phase, from CUDA events
on the compute stream where there is a GPU (no extra host sync) and the host clock
elsewhere: ``transfer`` (host to device copy of X, or the dtype conversion of a device
array), ``validation`` (the non-finite check and column moments), ``init`` (all
initializations), ``em`` (all EM iterations), ``other`` (the rest: host-side
validation, copies of the result) and ``total``; ``n_iter`` counts the EM iterations
of all ``n_init`` starts.

The float32 kernels read float32: float64 input is rounded to float32 for the Triton
backends unless the fit is fp64 throughout (the CPU fallback keeps float64). Fitted attributes take X's dtype as
scikit-learn's do (float32 for float32 X, else float64; computed in float64).

Broken models raise as scikit-learn does, never come back as NaN. Initial and M-step
(co)variances come from moments about X's column mean (scikit-learn's uncentered
E[x^2] - mean^2 fails on data far from the origin, e.g. iris + 1e8, where this
estimator fits; tied's k-means++ and random_from_data starts, whose scikit-learn covariance is X^T X
over every row about zero, are that matrix by exact algebra about the mean). A variance that is not
finite or not > 0 after reg_covar, a full or tied covariance whose Cholesky fails, or a
non-finite weight or mean, is scikit-learn's ValueError about ill-defined covariances
(:class:`turbo_gmm.mstep.IllDefinedCovarianceError`), checked after the initialization
and after every M-step inside the read of ell each iteration already makes (on the
graphed path inside the graph's status, :mod:`turbo_gmm.mstep_kernel`). On the float32
kernels an E-step that leaves float32's range (X ~ 1e20: |x - c|^2 overflows) is a
:class:`turbo_gmm.em.Float32RangeError`, a ValueError saying so, raised rather than
avoided. A power-of-two rescale of X (reg_covar / s^2 with it) would fit iris * 1e20,
but not data where a component collapses to the variance floor: the ratio
spread^2 / reg_covar then leaves float32's range at any scale, and float64 (the CPU
fallback, or issue 20's float64 kernels) is the remedy for both. Parameters are
validated by scikit-learn's ``_parameter_constraints`` (``InvalidParameterError``). Predictions (``predict``,
``predict_proba``, ``score_samples``) are float64 torch ops on the device in
row blocks; only the returned arrays are full size.
"""
from __future__ import annotations

import contextlib
import time
import warnings
from numbers import Integral

import numpy as np
import torch
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as _SkGaussianMixture
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (_check_sample_weight, assert_all_finite, check_array, check_is_fitted,
                                      validate_data)

from .arrays import check_device_array, device_tensor, output_like, upload
from .column_sums import non_finite_message
from .dispatch import ALGORITHMS
from .em import PRECISIONS, Float32RangeError, column_moments, forget_graphs, interpreter_mode, resolve_algorithm
from .em import fit as em_fit
from .estep import BlockStatistics, log_responsibilities, mstep_diag
from . import estep_full
from .full.parameters import cholesky_precisions
from .initialization import initial_moments
from .mstep import IllDefinedCovarianceError, well_defined
from .precision import FLOAT32_PRECISIONS, SCORE_TOLERANCE, Float32LiftWarning, data_radius, \
    fp64_costs_nothing, lift_error_bound, lift_warning
from .streaming import (CPU_BLOCK_BYTES, chunk_bounds, device_chunks, host_column_mean, rows_per_chunk,
                               streamed_statistics)

COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
MATRIX_TYPES = ("full", "tied")  # precisions Cholesky factors (kernels/full, kernels/tied) rather than variances
INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")
DEVICES = ("auto", "cuda", "cpu")
INIT_BACKENDS = ("auto", "torch", "sklearn")
EPS64 = float(np.finfo(np.float64).eps)
INIT_BLOCK_ROWS = 1 << 14
ORIGIN_ROWS = 1024  # rows whose mean is subtracted from a float64 host X before its float32 copy
PROFILE_PHASES = ("transfer", "validation", "init", "em")
AUTO_PRECISIONS = ("tf32x3", "fp64")  # precision="auto": within the float32 lift's tolerance, beyond it
FLOAT64 = "fp64"  # the float64 kernels (turbo_gmm.lift.FP64), and what runs on the float64 CPU fallback


class GaussianMixture(DensityMixin, BaseEstimator):
    """Gaussian mixture (full, tied, diagonal or spherical covariances) fitted by EM on the Turbo-GMM kernels.

    Parameters and fitted attributes are scikit-learn's (see the module docstring
    for ``device``, ``algorithm``, ``precision``, ``max_device_bytes``, ``init_backend``,
    ``sample_weight`` and the arrays taken and returned). Extra fitted attributes: ``backend_``,
    ``algorithm_``, ``n_floored_`` (variance entries floored at ``reg_covar`` over the
    fit, see :mod:`turbo_gmm.mstep`; 0 for full and tied, whose M-step floors nothing), ``precision_`` and
    ``precision_switches_`` (the precision of the last iteration, and each iteration where it began or changed),
    ``rows_per_chunk_`` (None when X was on the device
    at once), ``init_backend_`` ("torch" or "sklearn"), ``fit_profile_`` (seconds per
    phase and iterations, see the module docstring).
    """

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
        """Fit by EM (``n_init`` starts, up to ``max_iter`` iterations each); returns self.

        A model EM cannot define raises as scikit-learn does (its ValueError about ill-defined
        covariances, with its float32 advice for float32 X), on every backend; on the float32 kernels
        an E-step that leaves float32's range is a :class:`turbo_gmm.em.Float32RangeError` (a ValueError)."""
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
        tensor = device_tensor(X)
        if tensor is not None and tensor.device.type == "cpu":  # a CPU tensor is a host array
            X, tensor = tensor.resolve_conj().resolve_neg().numpy(), None
        backend, label, device = self._backend(tensor)
        if tensor is not None:
            check_device_array(tensor, min_samples=2, contiguous=True)
            self.n_features_in_ = tensor.shape[1]
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:  # the kernels' backends check finiteness on the device, in the pass that takes the column mean
            X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2,
                              ensure_all_finite=backend == "torch")
        N, d = (tensor if tensor is not None else X).shape
        # scikit-learn's attributes follow X's dtype (float32 or float64; other dtypes are taken as float64)
        float32_input = (tensor.dtype == torch.float32) if tensor is not None else X.dtype == np.float32
        K = self.n_components
        if N < K:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = {K}, n_samples = {N}")
        sample_weight = None if sample_weight is None else _checked_sample_weight(sample_weight, N, K)
        init_w, init_m, init_p = self._checked_initial_parameters(d)
        cuda = device.type == "cuda"
        with torch.cuda.device(device) if cuda else contextlib.nullcontext():
            clock = _PhaseClock(cuda, started)
            data = _FitData(X if tensor is None else tensor, K, backend, device, self.max_device_bytes,
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
        do_init = not (self.warm_start and hasattr(self, "converged_"))
        n_init = self.n_init if do_init else 1
        random_state = check_random_state(self.random_state)
        init_backend = self._init_backend(data)
        progress = _Progress(self.verbose, self.verbose_interval)
        best = dict(lower_bound=-np.inf, converged=False, params=None, n_iter=0, lower_bounds=[], floored=0,
                    switches=[])
        iterations = 0
        for init in range(n_init):
            progress.init_begin(init)
            with clock.phase("init"):
                if do_init:
                    params = self._initial_parameters(data, init_backend, random_state, init_w, init_m, init_p)
                else:
                    fitted = (self.weights_, self.means_, self.covariances_) + (
                        (self.precisions_cholesky_,) if self.covariance_type in MATRIX_TYPES else ())
                    params = tuple(torch.as_tensor(a, dtype=torch.float64, device=data.device) for a in fitted)
            lower_bound = -np.inf if do_init else self.lower_bound_
            lower_bounds, converged, floored, n_iter, switches = [], False, 0, 0, []
            with clock.phase("em"):
                for n_iter in range(1, self.max_iter + 1):
                    prev = lower_bound
                    precision = data.choose_precision(params, first=n_iter == 1)
                    if not switches or switches[-1][1] != precision:
                        switches.append((n_iter, precision))
                    params, f, ll = data.iterate(params)
                    floored += f
                    lower_bound = ll / data.total_weight
                    lower_bounds.append(lower_bound)
                    change = lower_bound - prev
                    progress.iter_end(n_iter, change)
                    if abs(change) < self.tol:
                        converged = True
                        break
            iterations += n_iter
            if self.max_iter > 0:
                progress.init_end(lower_bound, converged)
            candidate = params
            if self.max_iter == 0:
                best.update(params=candidate, n_iter=0, switches=[(0, data.choose_precision(params, first=True))])
            elif lower_bound > best["lower_bound"] or best["lower_bound"] == -np.inf:
                best = dict(lower_bound=lower_bound, converged=converged, params=candidate, n_iter=n_iter,
                            lower_bounds=lower_bounds, floored=floored, switches=switches)
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

    def _set_fitted_parameters(self, params, dtype):
        """weights_, means_, covariances_, precisions_cholesky_, precisions_ in scikit-learn's shapes and
        conventions (full: U_k upper triangular with U_k U_k^T = precisions_[k]; diag, spherical: 1 / sqrt(cov))."""
        weights, means, covariances = params[:3]
        if self.covariance_type in MATRIX_TYPES:
            U = params[3]
            precisions = U @ np.swapaxes(U, -1, -2)
        else:
            U, precisions = 1.0 / np.sqrt(covariances), 1.0 / covariances
        self.weights_, self.means_, self.covariances_, self.precisions_cholesky_, self.precisions_ = (
            a.astype(dtype) for a in (weights, means, covariances, U, precisions))

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
            shapes = dict(full=(K, d, d), tied=(d, d), diag=(K, d), spherical=(K,))
            _check_shape(p, shapes[self.covariance_type], f"{self.covariance_type} precision")
            if self.covariance_type in MATRIX_TYPES:  # scikit-learn's _check_precision_matrix, per matrix
                for matrix in p.reshape(-1, d, d):
                    if not (np.allclose(matrix, matrix.T) and (np.linalg.eigvalsh(matrix) > 0).all()):
                        raise ValueError(f"'{self.covariance_type} precision' should be symmetric, positive-definite")
            elif (p <= 0).any():
                raise ValueError(f"'{self.covariance_type} precision' should be positive")
        return w, m, p

    def _backend(self, tensor=None):
        """(statistics backend, label for backend_, torch device) for X (``tensor``: X on a device)."""
        cuda = torch.cuda.is_available()
        if tensor is not None:
            if self.device == "cpu":
                raise ValueError(f"X is on {tensor.device} but device='cpu': pass X.cpu() for the CPU fallback, or "
                                 "device='auto' to fit where X is")
            return "triton", "triton", tensor.device
        if self.device == "cpu" or (self.device == "auto" and not cuda and not interpreter_mode()):
            return "torch", "torch-cpu", torch.device("cpu")
        if cuda:
            return "triton", "triton", torch.device("cuda", torch.cuda.current_device())
        if interpreter_mode():
            return "triton", "triton-interpreter", torch.device("cpu")
        raise ValueError("device='cuda' needs a CUDA GPU (or TRITON_INTERPRET=1 to run the kernels in Triton's "
                         "CPU interpreter); use device='cpu' or 'auto' for the CPU fallback")

    def _init_backend(self, data):
        """"sklearn" with sample weights: the torch initialization draws unweighted (k-means, k-means++)."""
        if self.init_backend == "torch" and data.sample_weight is not None:
            raise ValueError("init_backend='torch' does not take sample_weight (its k-means is unweighted); use "
                             "init_backend='sklearn' or 'auto'")
        if self.init_backend != "auto":
            return self.init_backend
        return "torch" if data.device.type == "cuda" and not data.streamed and data.sample_weight is None else "sklearn"

    def _initial_parameters(self, data, init_backend, random_state, init_w, init_m, init_p):
        """Initial parameters, float64 on the data's device: (weights, means, variances) for diag and
        spherical, (weights, means, covariances, precisions Cholesky) for full and tied. The responsibilities
        of ``init_params`` (times the sample weights) and one M-step on them (scikit-learn's initialization),
        overridden by the user's weights/means/precisions; scikit-learn's ValueError if that model is
        ill-defined (one host sync per start, as its _initialize). Parameters the user gives all three of
        need no pass over X."""
        matrix = self.covariance_type in MATRIX_TYPES
        if init_w is not None and init_m is not None and init_p is not None:
            weights, means = (torch.as_tensor(np.asarray(a, np.float64)) for a in (init_w, init_m))
            cov, U = _from_precisions(init_p, matrix)
        else:
            weights, means, cov, U = self._moment_parameters(data, init_backend, random_state)
            weights = weights if init_w is None else torch.as_tensor(np.asarray(init_w, np.float64))
            means = means if init_m is None else torch.as_tensor(np.asarray(init_m, np.float64))
            if init_p is not None:
                cov, U = _from_precisions(init_p, matrix)
        params = tuple(torch.as_tensor(a, dtype=torch.float64).to(data.device) for a in (
            (weights, means, cov, U) if matrix else (weights, means, cov)))
        if matrix:
            ok = well_defined(params[0], params[1], torch.ones(1, dtype=torch.float64, device=data.device)) & (
                torch.isfinite(params[3]).all())
        else:
            ok = well_defined(*params)
        if not bool(ok):
            raise IllDefinedCovarianceError()
        return params

    def _moment_parameters(self, data, init_backend, random_state):
        """(weights, means, covariances, precisions Cholesky or None) of scikit-learn's M-step
        (_estimate_gaussian_parameters) on the initial responsibilities' moments about X's column mean
        (``offset``: that mean in X's coordinates, see _FitData's origin); scikit-learn's own moments about zero
        cancel |mean|^2 / variance digits (iris + 1e8: negative variances, its ValueError)."""
        second = "full" if self.covariance_type in MATRIX_TYPES else "diag"
        if init_backend == "torch":
            nk, sx, sxx = initial_moments(data.tensor, self.n_components, self.init_params, random_state,
                                          (data.center + data.origin - data.tensor_origin).to(data.tensor.device),
                                          data.column_variance_mean(), second)
            offset = (data.center + data.origin).to(data.tensor.device)
        else:
            offset = (data.center + data.origin).cpu()
            nk, sx, sxx = (torch.as_tensor(a) for a in self._host_moments(
                data.host(), random_state, offset.numpy(), second, data.sample_weight))
        n_raw, nk = nk, nk + 10 * EPS64
        means = sx / nk[:, None]
        weights = nk / data.total_weight
        if second == "diag":
            cov = sxx / nk[:, None] - means**2 + self.reg_covar
            return weights, means + offset, cov.mean(1) if self.covariance_type == "spherical" else cov, None
        eye = self.reg_covar * torch.eye(means.shape[1], dtype=torch.float64, device=means.device)
        outer = means[:, :, None] * means[:, None, :]
        one_row = self.init_params in ("k-means++", "random_from_data")  # each component: one row, weight n_raw
        if self.covariance_type == "full" and one_row:  # scikit-learn's sum r (x - mu)(x - mu)^T / n, not M2 / n -
            deviation = sx / n_raw[:, None] - means  # mu mu^T, which cancels to eps |x|^2, far above its ~eps^2
            cov = n_raw[:, None, None] * deviation[:, :, None] * deviation[:, None, :] / nk[:, None, None] + eye
        elif self.covariance_type == "full":
            cov = sxx / nk[:, None, None] - outer + eye
        elif not one_row:  # every row's responsibilities sum to its weight
            cov = (sxx.sum(0) - (nk[:, None, None] * outer).sum(0)) / nk.sum() + eye
        else:  # one row per component: scikit-learn's X^T X over all rows, about ``offset`` (exact algebra)
            scatter, first = (a.to(means.device) for a in data.centered_moments())
            c, gap = offset.to(means.device), first.to(means.device) - sx.sum(0)
            spread = scatter - (nk[:, None, None] * outer).sum(0) + c[:, None] * gap + gap[:, None] * c
            cov = (spread + (data.total_weight - nk.sum()) * c[:, None] * c) / nk.sum() + eye
        U, ok = cholesky_precisions(cov)
        if not bool(ok):
            raise IllDefinedCovarianceError()
        return weights, means + offset, cov, U

    def _host_moments(self, X, random_state, center, second="diag", sample_weight=None):
        """scikit-learn's initialization on the host, drawn from ``random_state`` in the same order: the
        responsibilities' (n, s, u) about ``center`` (float64, in row blocks), u = sum r (x - c)^2 (``second``
        "diag") or sum r (x - c)(x - c)^T ("full"), r times ``sample_weight`` when given (then k-means and
        k-means++ take the weights, and "random_from_data" draws among the rows of positive weight)."""
        N, d = X.shape
        K = self.n_components
        sw = np.ones(N) if sample_weight is None else sample_weight
        square = (lambda r, x: r.T @ (x * x)) if second == "diag" else (  # noqa: E731
            lambda r, x: np.einsum("nk,nd,ne->kde", r, x, x))
        if self.init_params in ("random_from_data", "k-means++"):  # one row per component: no pass over X
            if self.init_params == "k-means++":
                _, indices = kmeans_plusplus(X, K, random_state=random_state, sample_weight=sample_weight)
            elif sample_weight is None:
                indices = random_state.choice(N, size=K, replace=False)
            else:
                indices = random_state.choice(np.flatnonzero(sample_weight > 0), size=K, replace=False)
            sx = np.asarray(X[indices], np.float64) - center
            return sw[indices], sw[indices, None] * sx, square(np.diag(sw[indices]), sx)
        if self.init_params == "kmeans":
            labels = KMeans(n_clusters=K, n_init=1, random_state=random_state).fit(X, sample_weight=sample_weight).labels_
            resp_rows = lambda r0, r1: np.eye(K)[labels[r0:r1]]  # noqa: E731
        else:  # "random": drawn block by block, rows ascending = scikit-learn's single draw
            resp_rows = lambda r0, r1: _normalized(random_state.uniform(size=(r1 - r0, K)))  # noqa: E731
        nk, sx, sxx = np.zeros(K), np.zeros((K, d)), np.zeros((K, d) if second == "diag" else (K, d, d))
        for r0 in range(0, N, INIT_BLOCK_ROWS):
            r1 = min(N, r0 + INIT_BLOCK_ROWS)
            resp, x = resp_rows(r0, r1) * sw[r0:r1, None], np.asarray(X[r0:r1], np.float64) - center
            nk += resp.sum(0)
            sx += resp.T @ x
            sxx += square(resp, x)
        return nk, sx, sxx

    # --------------------------------------------------------------- prediction
    def _log_resp_blocks(self, X):
        """(N, out_device, blocks, output): X validated now; blocks yields (r0, r1, log Gamma, L) per
        row block, float64 torch tensors on the device the rows are evaluated on (X's own for a
        device array, else the fitted backend's); results are gathered on ``out_device`` (X's for a
        device array, the host otherwise) and output(result) puts them in X's framework."""
        check_is_fitted(self)
        output = output_like(X)
        tensor = device_tensor(X)
        if tensor is not None and tensor.device.type == "cpu":
            X, tensor = tensor.resolve_conj().resolve_neg().numpy(), None
        if tensor is not None:
            check_device_array(tensor, min_samples=1, contiguous=False)
            if tensor.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {tensor.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input.")
            X, device, out_device = tensor, tensor.device, tensor.device
        else:
            X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
            device, out_device = self._backend()[2], torch.device("cpu")
        K, d = self.means_.shape
        rows = max(1, (self.max_device_bytes or CPU_BLOCK_BYTES) // _bytes_per_row(self.covariance_type, K, d))
        w, m = (torch.as_tensor(a, dtype=torch.float64, device=device) for a in (self.weights_, self.means_))
        if self.covariance_type in MATRIX_TYPES:
            v = torch.as_tensor(self.precisions_cholesky_, dtype=torch.float64, device=device)
            log_resp = estep_full.log_responsibilities
        else:
            v = self.covariances_
            v = torch.as_tensor(np.ascontiguousarray(np.broadcast_to(v[:, None], (K, d)) if v.ndim == 1 else v),
                                dtype=torch.float64, device=device)
            log_resp = log_responsibilities
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
        return X.shape[0], out_device, blocks(), output

    def _evaluate(self, X, shape, dtype, result):
        """Fill an array of ``shape`` (n_samples first) from ``result(log Gamma, L)`` block by block."""
        N, out_device, blocks, output = self._log_resp_blocks(X)
        out = torch.empty((N, *shape), dtype=dtype, device=out_device)
        for r0, r1, lr, L in blocks:
            out[r0:r1] = result(lr, L)
        return output(out)

    def score_samples(self, X):
        """log p(x_i) under the fitted mixture, (n_samples,)."""
        return self._evaluate(X, (), torch.float64, lambda lr, L: L)

    def score(self, X, y=None, sample_weight=None):
        """Mean log-likelihood per sample (weighted by ``sample_weight``: sum_i w_i log p(x_i) / sum_i w_i)."""
        ll = self._score_samples_tensor(X)
        if sample_weight is None:
            return float(ll.mean())
        w = torch.as_tensor(_checked_sample_weight(sample_weight, ll.shape[0], 1), device=ll.device)
        return float((w * ll).sum() / w.sum())

    def _score_samples_tensor(self, X):
        N, out_device, blocks, _ = self._log_resp_blocks(X)
        out = torch.empty(N, dtype=torch.float64, device=out_device)
        for r0, r1, _, L in blocks:
            out[r0:r1] = L
        return out

    def predict(self, X):
        """Most probable component of each sample."""
        return self._evaluate(X, (), torch.int64, lambda lr, L: lr.argmax(1))

    def predict_proba(self, X):
        """Responsibilities (n_samples, n_components), computed block by block."""
        return self._evaluate(X, (self.n_components,), torch.float64, lambda lr, L: lr.exp())

    def _n_parameters(self):
        """Free parameters, as scikit-learn counts them per covariance type."""
        K, d = self.means_.shape
        cov = dict(full=K * d * (d + 1) / 2.0, tied=d * (d + 1) / 2.0, diag=K * d, spherical=K)[self.covariance_type]
        return int(cov + K * d + K - 1)

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
        d = self.means_.shape[1]
        if self.covariance_type in MATRIX_TYPES:
            covariances = self.covariances_ if self.covariance_type == "full" else [self.covariances_] * len(counts)
            X = np.vstack([rng.multivariate_normal(mean, cov, int(c))
                           for mean, cov, c in zip(self.means_, covariances, counts)])
        else:
            X = np.vstack([mean + rng.standard_normal(size=(c, d)) * np.sqrt(cov)
                           for mean, cov, c in zip(self.means_, self.covariances_, counts)])
        y = np.concatenate([np.full(c, k, dtype=np.int64) for k, c in enumerate(counts)])
        return X, y


class _PhaseClock:
    """Seconds of a fit per phase. With CUDA, events recorded on the current stream at each
    phase's ends, read after the fit's own last sync (no extra one); else the host clock."""

    def __init__(self, cuda: bool, started: float):
        self.cuda, self.started = cuda, started
        self.spans = []  # (phase, begin, end)
        self.begin = self._now()

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    @contextlib.contextmanager
    def phase(self, name):
        begin = self._now()
        yield
        self.spans.append((name, begin, self._now()))

    def profile(self, **extra) -> dict:
        """{phase: seconds} for PROFILE_PHASES, 'other' (the rest of the wall time), 'total', and ``extra``."""
        seconds = dict.fromkeys(PROFILE_PHASES, 0.0)
        for name, begin, end in self.spans:
            seconds[name] += begin.elapsed_time(end) / 1e3 if self.cuda else end - begin
        seconds["total"] = time.perf_counter() - self.started
        seconds["other"] = max(0.0, seconds["total"] - sum(seconds[p] for p in PROFILE_PHASES))
        return {**seconds, **extra}


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


class _FitData:
    """X where the E-step reads it, validated and with its column mean (``center``, the in-kernel
    shift): whole on the device, or streamed from the host in chunks of ``rows`` when it exceeds
    ``max_device_bytes`` (always in blocks for the torch fallback, whose temporaries are (rows, K)).

    X: a host array (validated by scikit-learn, finiteness aside on the kernels' backends) or a
    tensor on the device (shape-checked). On the kernels' backends with X on the device, the copy
    (``transfer``) and the one read for validation and centering (``validation``) are timed on
    ``clock``; :meth:`iterate` is one replay of :func:`turbo_gmm.fit`'s graph.

    A float64 host array copied (or streamed) to the float32 kernels goes as X - ``origin``, ``origin``
    the float64 mean of its first rows (streamed: of all rows), subtracted before the float32 rounding
    so that data far from zero keeps its digits (iris + 1e8 in float32 has a spacing of 8). ``center``
    is in those shifted coordinates, ``tensor`` in ``tensor_origin``'s, ``host()`` and :meth:`iterate`'s
    parameters in X's own."""

    def __init__(self, X, K, backend, device, max_device_bytes, algorithm, precision, reg_covar=1e-6, clock=None,
                 covariance_type="diag", sample_weight=None):
        clock = clock or _PhaseClock(device.type == "cuda", time.perf_counter())
        N, d = X.shape
        self.shape, self.device, self.backend, self.reg_covar = (N, d), device, backend, reg_covar
        self.covariance_type = covariance_type
        self.auto = precision == "auto"
        if self.auto and fp64_costs_nothing(N, K, d, covariance_type):
            self.auto, precision = False, FLOAT64  # float64 at no cost: scikit-learn's arithmetic for the fit
        self.precision = AUTO_PRECISIONS[0] if self.auto else precision  # auto: updated by choose_precision
        # The fp64 kernels read float64 X where it is: a float64 X stays float64 for them (no float32 rounding)
        float64_input = X.dtype == (torch.float64 if isinstance(X, torch.Tensor) else np.float64)
        self._radius = None  # the data's range about its mean, for the float32 lift's bound
        self._warned = False
        self.sample_weight = sample_weight  # float64 NumPy (N,) or None; its sum normalizes ell and the weights
        self.total_weight = float(N) if sample_weight is None else float(sample_weight.sum())
        self._moments = None  # tied: the data's centered scatter and sum, once per fit
        self._owned = False  # the tensor is the estimator's own copy (its cached graphs go with the fit)
        self._host = None  # the host array a device copy was made from
        origin = None
        if backend == "triton":
            self.dtype = torch.float64 if self.precision == FLOAT64 and float64_input else torch.float32
            item = self.dtype.itemsize
            resident = N * d * item + (N * item if resolve_algorithm(K, d, algorithm, self.precision) == "two_pass" else 0)
            self.streamed = not isinstance(X, torch.Tensor) and max_device_bytes is not None and resident > max_device_bytes
        else:
            self.streamed = True
            self.dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        if self.streamed:
            self.X = X
            self.rows = rows_per_chunk(max_device_bytes or CPU_BLOCK_BYTES, d, K, backend, covariance_type,
                                       self.dtype.itemsize)
            with clock.phase("validation"):
                if backend == "triton":
                    assert_all_finite(X, input_name="X")
                mean = host_column_mean(X)
            if backend == "triton" and X.dtype == np.float64 and self.dtype == torch.float32:
                origin, mean = mean, np.zeros(d)  # chunks go to float32 as X - mean
            self.center = torch.as_tensor(mean, device=device)
            self._std = None
        else:
            with clock.phase("transfer"):
                if isinstance(X, torch.Tensor):
                    self.X = X if X.dtype == self.dtype else X.to(self.dtype)
                    self._owned = self.X is not X
                else:
                    if X.dtype == np.float64 and self.dtype == torch.float32:  # non-finite entries are counted
                        origin = np.nan_to_num(np.asarray(X[:ORIGIN_ROWS]).mean(0), nan=0.0, posinf=0.0, neginf=0.0)
                    self.X = upload(X, device, origin, self.dtype)
                    self._host = X
                    self._owned = True
            with clock.phase("validation"):
                self.center, self._std = column_moments(self.X)
            self.rows = N
        self.origin = torch.zeros(d, dtype=torch.float64, device=device) if origin is None else torch.as_tensor(
            origin, device=device)
        self._chunk_origin = origin if self.streamed else None  # subtracted from each streamed chunk
        self.requested_algorithm = algorithm
        self._device_weight = None if sample_weight is None or self.streamed else torch.as_tensor(
            sample_weight, dtype=torch.float32, device=device)  # the float32 stream beside a resident X
        if covariance_type in MATRIX_TYPES:
            self.block = estep_full.BlockStatistics(covariance_type, K, d, self.center, backend, algorithm,
                                                    self.precision)
        else:
            self.block = BlockStatistics(K, d, self.center, backend, algorithm, self.precision)
        self.algorithm = self.block.algorithm

    @property
    def tensor_origin(self) -> torch.Tensor:
        """Where ``tensor``'s coordinates start in X's: the origin for a device copy, 0 for the host view."""
        return torch.zeros_like(self.origin) if self.streamed else self.origin

    @property
    def tensor(self) -> torch.Tensor:
        """X as a tensor for the initialization: the device copy, or a CPU view of the host array."""
        return self.X if isinstance(self.X, torch.Tensor) else torch.from_numpy(np.require(self.X, requirements="W"))

    def host(self) -> np.ndarray:
        """X on the host in X's own coordinates, for scikit-learn's initialization: the caller's host
        array (the device copy of a device array goes back once)."""
        if self._host is not None:
            return self._host
        return self.X.cpu().numpy() if isinstance(self.X, torch.Tensor) else self.X

    def column_variance_mean(self) -> float:
        """Mean over columns of X's variance (scikit-learn's KMeans tolerance scale)."""
        if self._std is not None:
            return float((self._std**2).mean())
        X = self.X
        step = max(1, CPU_BLOCK_BYTES // (8 * X.shape[1]))
        mean = (self.center + self.origin).cpu().numpy()
        s2 = sum(np.square(np.asarray(X[r0 : r0 + step], np.float64) - mean).sum(0)
                 for r0 in range(0, X.shape[0], step))
        return float(np.mean(s2 / X.shape[0]))

    def radius(self) -> torch.Tensor:
        """max_i |x_ij - mean_j| per column (float64, on the device): one read of X, once per fit."""
        if self._radius is None:
            if isinstance(self.X, torch.Tensor):
                self._radius = data_radius(self.X, self.center)
            else:  # a host array, in blocks, about the mean in X's own coordinates
                mean = (self.center + self.origin).cpu().numpy()
                step = max(1, CPU_BLOCK_BYTES // (8 * self.shape[1]))
                reach = np.zeros(self.shape[1])
                for r0 in range(0, self.shape[0], step):
                    reach = np.maximum(reach, np.abs(np.asarray(self.X[r0 : r0 + step], np.float64) - mean).max(0))
                self._radius = torch.as_tensor(reach, device=self.device)
        return self._radius

    def lift_error_bound(self, m, v) -> float:
        """The float32 lift's score error bound at means m (X's coordinates) and variances v (K, d)."""
        return float(lift_error_bound(self.radius(), m, v, self.center + self.origin))

    def choose_precision(self, params, first=False) -> str:
        """The precision of the next iteration from :meth:`iterate`'s ``params``: "fp64" on the float64 CPU
        fallback; full and tied keep theirs; diag and spherical under "auto" "tf32x3" if the
        float32 lift's bound is within the tolerance, else "fp64"; a float32 precision given explicitly is
        kept, with one :class:`Float32LiftWarning` per fit where the bound at a start's initial parameters
        (``first``) exceeds the tolerance."""
        if self.backend != "triton":
            return FLOAT64
        if self.covariance_type in MATRIX_TYPES:
            return self.precision
        _, m, v = params
        v = v[:, None].expand(*m.shape) if v.ndim == 1 else v
        if self.auto:
            precision = AUTO_PRECISIONS[self.lift_error_bound(m, v) > SCORE_TOLERANCE]
            if precision != self.precision:  # the dispatch rule and the tiles depend on the precision
                self.precision = precision
                K, d = m.shape
                self.block = BlockStatistics(K, d, self.center, self.backend, self.requested_algorithm, precision)
                self.algorithm = self.block.algorithm
        elif first and not self._warned and self.precision in FLOAT32_PRECISIONS:
            bound = self.lift_error_bound(m, v)
            if bound > SCORE_TOLERANCE:
                warnings.warn(lift_warning(bound, "initial"), Float32LiftWarning, stacklevel=6)
                self._warned = True
        return self.precision

    def _chunks(self):
        """(sample weights of the rows or None, rows as a tensor in ``tensor``'s coordinates) per chunk."""
        if not self.streamed:
            yield self._device_weight, self.X
            return
        bounds = chunk_bounds(self.shape[0], self.rows)
        for (r0, r1), x in zip(bounds, device_chunks(self.X, self.rows, self.device, self.dtype, self._chunk_origin)):
            yield None if self.sample_weight is None else torch.as_tensor(self.sample_weight[r0:r1]), x

    def centered_moments(self):
        """(sum_i w_i (x_i - c)(x_i - c)^T (d, d), sum_i w_i (x_i - c) (d,)) float64 about the center, once per
        fit (the tied M-step's data term)."""
        if self._moments is None:
            parts = [estep_full.centered_moments(x, sw, self.center) for sw, x in self._chunks()]
            self._moments = tuple(sum(p[i] for p in parts) for i in range(2))
        return self._moments

    def statistics(self, w, m, v):
        """Statistics of all rows at (w, m in X's coordinates, v: variances (K, d), or precisions Cholesky)."""
        if self.streamed:
            return streamed_statistics(self.X, self.block, (w, m - self.origin, v), self.rows, self.device, self.dtype,
                                       self._chunk_origin, self.sample_weight)
        if self._device_weight is None:
            return self.block(self.X, w, m - self.origin, v)
        return self.block(self.X, w, m - self.origin, v, sample_weight=self._device_weight)

    def iterate(self, params):
        """One EM iteration from ``params`` -- (weights, means, variances (K, d) or (K,)) for diag and spherical,
        (weights, means, covariances, precisions Cholesky) for full and tied: (the new parameters, entries floored,
        ell = sum_i w_i log p(x_i) at the incoming parameters as a float)."""
        if self.covariance_type in MATRIX_TYPES:
            return self._iterate_matrix(*params)
        w, m, v = params
        spherical = v.ndim == 1
        w, m, v, f, ll = self._iterate_diag(w, m, v[:, None].expand(*m.shape) if spherical else v)
        return (w, m, v.mean(1) if spherical else v), f, ll  # spherical: the feature-average of the diagonal one

    def _iterate_matrix(self, w, m, cov, U):
        """Full or tied: the fused (or float64 torch) E-step, kernels/full's or kernels/tied's M-step, one host read.
        Full on the kernels: where the M-step's Cholesky fails with the moments about the center, the iteration
        again with the moments about each component's mean, and so on for the rest of the fit (turbo_gmm.full.em)."""
        w0, m0, cov0, U0 = w, m, cov, U
        st = self.statistics(w, m, U)
        w, m, cov, U, ok = self.block.mstep(st, self.reg_covar, self.centered_moments()[0]
                                            if self.covariance_type == "tied" else None)
        m = m + self.origin
        ok = ok & torch.isfinite(w).all() & torch.isfinite(m).all()
        sums = [st.n, st.s] + ([] if st.M2 is None else [st.M2])
        finite = torch.stack([torch.isfinite(t).all() for t in sums]).all()
        ll, ok, finite = torch.stack([st.ll, ok.double(), finite.double()]).tolist()  # one host read
        if not (np.isfinite(ll) and finite) and self.block.backend == "triton":  # float32 kernels out of range
            raise Float32RangeError()
        if not ok and np.isfinite(ll) and self.covariance_type == "full" and self.block.backend == "triton" \
                and self.block.moments == "center":
            self.block.moments = "component"
            return self._iterate_matrix(w0, m0, cov0, U0)
        if not (ok and np.isfinite(ll)):
            raise IllDefinedCovarianceError()
        return (w, m, cov, U), 0, ll

    def _iterate_diag(self, w, m, v):
        """One diag EM iteration from (w, m, v (K, d)): (weights, means, variances (K, d), entries floored,
        ell at the incoming parameters as a float) -- a replay of the captured graph when X is on the device."""
        if self.backend == "triton" and not self.streamed:
            weighted = {} if self._device_weight is None else {"sample_weight": self._device_weight}
            r = em_fit(self.X, (w, m - self.origin, v), 1, reg_covar=self.reg_covar, algorithm=self.algorithm,
                       precision=self.precision, center=self.center, lift_check=False, **weighted)
            ll = r.log_likelihoods_host[0] if r.log_likelihoods_host is not None else float(r.log_likelihoods[0])
            return r.weights, r.means + self.origin, r.variances, r.n_floored, ll  # graphed: one host read
        st = self.statistics(w, m, v)
        w, m, v, f = mstep_diag(st, self.total_weight, self.center, self.reg_covar)
        m = m + self.origin
        ll, f, ok = torch.stack([st.ll, f.double(), well_defined(w, m, v).double()]).tolist()  # one host read
        if not np.isfinite(ll) and self.backend == "triton":  # the float32 kernels left float32's range
            raise Float32RangeError()
        if not (ok and np.isfinite(ll)):
            raise IllDefinedCovarianceError()
        return w, m, v, int(f), ll

    def release(self) -> None:
        """Drop the graphs :func:`turbo_gmm.fit` cached for the estimator's own copy of X (they hold it)."""
        if self._owned:
            forget_graphs(self.X)


def _bytes_per_row(covariance_type, K, d):
    """Bytes of float64 temporaries a row takes in the torch evaluation of the score."""
    if covariance_type in MATRIX_TYPES:
        return estep_full.bytes_per_row(covariance_type, K, d)
    return 16 * d + 24 * K


def _checked_sample_weight(sample_weight, N, K):
    """sample_weight as float64 NumPy (N,) after scikit-learn's checks (_check_sample_weight: N finite entries,
    >= 0, not all zero), with at least K positive (a fit of K components needs K rows)."""
    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    sw = _check_sample_weight(sample_weight, np.empty((N, 0)), dtype=np.float64, ensure_non_negative=True)
    if np.count_nonzero(sw) < K:
        raise ValueError(f"Expected n_samples with positive sample_weight >= n_components but got n_components = "
                         f"{K}, {np.count_nonzero(sw)} positive weights")
    return sw


def _from_precisions(precisions, matrix):
    """(covariances, precisions Cholesky or None) from the user's precisions_init: 1 / p for diag and spherical;
    for full and tied the inverse and scikit-learn's upper factor U (U U^T = P: the Cholesky factor of P reversed
    in rows and columns, reversed back, its _compute_precision_cholesky_from_precisions)."""
    P = np.asarray(precisions, np.float64)
    if not matrix:
        return torch.as_tensor(1.0 / P), None
    U = np.linalg.cholesky(P[..., ::-1, ::-1])[..., ::-1, ::-1]
    return torch.as_tensor(np.linalg.inv(P)), torch.as_tensor(np.ascontiguousarray(U))


def _check_shape(a, shape, name):
    if a.shape != shape:
        raise ValueError(f"The parameter '{name}' should have the shape of {shape}, but got {a.shape}")


def _normalized(r):
    return r / r.sum(1, keepdims=True)
