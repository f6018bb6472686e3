"""``GaussianMixture``: scikit-learn's estimator, diag and spherical, on the fused kernels.

Same parameters, methods, attributes and convergence rule as
``sklearn.mixture.GaussianMixture`` for ``covariance_type in {"diag", "spherical"}``
(the default is "diag": the kernels have no full or tied covariances), plus

* ``device``: "auto" (CUDA if present, else the Triton interpreter when
  ``TRITON_INTERPRET=1``, else the CPU fallback), "cuda" (the Triton kernels), or
  "cpu" (the fallback: the same E-step statistics by torch ops in float64, in
  row blocks). ``backend_`` says which ran: "triton", "triton-interpreter" or
  "torch-cpu".
* ``algorithm`` / ``precision``: passed to the kernels (:func:`kernels.fit`).
* ``max_device_bytes``: the device memory X may take. Larger data (a host array
  or ``np.memmap``) is streamed through it in chunks each iteration
  (:mod:`kernels.streaming`), summing float64 statistics before one M-step.

Every EM iteration is: E-step statistics (n, s, u, ell) at the current parameters
(:mod:`kernels.estep`), then the M-step. ell is at the *incoming* parameters, and
so is scikit-learn's lower bound of an iteration (it is the mean log-likelihood
of the E-step that precedes the M-step), so ``lower_bound_ = ell / N`` of the
last iteration, exactly scikit-learn's; convergence is ``|change| < tol``.
Initialization reproduces scikit-learn's from the same ``random_state``
(responsibilities from k-means, k-means++, random or random rows), so both
estimators start from identical parameters.

The kernels read float32: float64 input is rounded to float32 for the Triton
backends (the CPU fallback keeps float64). Predictions (``predict``,
``predict_proba``, ``score_samples``) are float64 torch ops on the device in
row blocks; only the returned arrays are full size.
"""
from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kernels.em import PRECISIONS, interpreter_mode
from kernels.dispatch import ALGORITHMS
from kernels.estep import BlockStatistics, log_responsibilities, mstep_diag, mstep_spherical
from kernels.streaming import CPU_BLOCK_BYTES, host_column_mean, rows_per_chunk, streamed_statistics

COVARIANCE_TYPES = ("diag", "spherical")
INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")
DEVICES = ("auto", "cuda", "cpu")
EPS64 = float(np.finfo(np.float64).eps)
INIT_BLOCK_ROWS = 1 << 14


class GaussianMixture(DensityMixin, BaseEstimator):
    """Diagonal or spherical Gaussian mixture fitted by EM on the Turbo-GMM kernels.

    Parameters and fitted attributes are scikit-learn's (see the module docstring
    for ``device``, ``algorithm``, ``precision`` and ``max_device_bytes``). Extra
    fitted attributes: ``backend_``, ``algorithm_``, ``n_floored_`` (variance
    entries floored at ``reg_covar`` over the fit, see :mod:`kernels.mstep`),
    ``rows_per_chunk_`` (None when X was on the device at once).
    """

    def __init__(self, n_components=1, *, covariance_type="diag", tol=1e-3, reg_covar=1e-6, max_iter=100, n_init=1,
                 init_params="kmeans", weights_init=None, means_init=None, precisions_init=None, random_state=None,
                 warm_start=False, verbose=0, verbose_interval=10, device="auto", algorithm="auto",
                 precision="tf32x3", max_device_bytes=None):
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

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None):
        """Fit by EM (``n_init`` starts, up to ``max_iter`` iterations each); returns self."""
        state = dict(self.__dict__)
        try:
            self._fit(X)
        except BaseException:  # nothing half-written: a failed fit leaves the estimator as it was
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
        return self

    def fit_predict(self, X, y=None):
        """Fit, then the labels of X under the fitted model (as fit(X).predict(X))."""
        return self.fit(X).predict(X)

    def _fit(self, X):
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
        self._check_hyperparameters()
        N, d = X.shape
        K = self.n_components
        if N < K:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = {K}, n_samples = {N}")
        init_w, init_m, init_p = self._checked_initial_parameters(d)
        backend, label, device = self._backend()
        data = _FitData(X, K, backend, device, self.max_device_bytes, self.algorithm, self.precision)
        spherical = self.covariance_type == "spherical"

        do_init = not (self.warm_start and hasattr(self, "converged_"))
        n_init = self.n_init if do_init else 1
        random_state = check_random_state(self.random_state)
        progress = _Progress(self.verbose, self.verbose_interval)
        best = dict(lower_bound=-np.inf, converged=False, params=None, n_iter=0, lower_bounds=[], floored=0)
        for init in range(n_init):
            progress.init_begin(init)
            if do_init:
                params = self._initial_parameters(X, random_state, init_w, init_m, init_p)
            else:
                params = (self.weights_, self.means_, self.covariances_)
            w, m, v = (torch.as_tensor(np.asarray(a, np.float64), device=device) for a in params)
            lower_bound = -np.inf if do_init else self.lower_bound_
            lower_bounds, converged, floored, n_iter = [], False, 0, 0
            for n_iter in range(1, self.max_iter + 1):
                prev = lower_bound
                st = data.statistics(w, m, v[:, None].expand(K, d) if spherical else v)
                w, m, v, f = (mstep_spherical if spherical else mstep_diag)(st, N, data.center, self.reg_covar)
                floored += int(f)
                lower_bound = float(st.ll) / N
                lower_bounds.append(lower_bound)
                change = lower_bound - prev
                progress.iter_end(n_iter, change)
                if abs(change) < self.tol:
                    converged = True
                    break
            if self.max_iter > 0:
                progress.init_end(lower_bound, converged)
            candidate = [a.cpu().numpy() for a in (w, m, v)]
            if self.max_iter == 0:
                best.update(params=candidate, n_iter=0)
            elif lower_bound > best["lower_bound"] or best["lower_bound"] == -np.inf:
                best = dict(lower_bound=lower_bound, converged=converged, params=candidate, n_iter=n_iter,
                            lower_bounds=lower_bounds, floored=floored)
        if not best["converged"] and self.max_iter > 0:
            warnings.warn("Best performing initialization did not converge. Try different init parameters, or "
                          "increase max_iter, tol, or check for degenerate data.", ConvergenceWarning)
        self.weights_, self.means_, self.covariances_ = best["params"]
        self.precisions_cholesky_ = 1.0 / np.sqrt(self.covariances_)
        self.precisions_ = 1.0 / self.covariances_
        self.converged_ = best["converged"]
        self.n_iter_ = best["n_iter"]
        self.lower_bound_ = best["lower_bound"]
        self.lower_bounds_ = best["lower_bounds"]
        self.n_floored_ = best["floored"]
        self.backend_ = label
        self.algorithm_ = data.block.algorithm
        self.rows_per_chunk_ = data.rows if data.streamed else None

    def _check_hyperparameters(self):
        def integer(name, low):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")

        def real(name):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v >= 0 or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

        integer("n_components", 1)
        integer("max_iter", 0)
        integer("n_init", 1)
        integer("verbose", 0)
        integer("verbose_interval", 1)
        real("tol")
        real("reg_covar")
        for name, allowed in (("covariance_type", COVARIANCE_TYPES), ("init_params", INIT_PARAMS),
                              ("device", DEVICES), ("precision", PRECISIONS), ("algorithm", ("auto",) + ALGORITHMS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.max_device_bytes is not None:
            integer("max_device_bytes", 1)

    def _checked_initial_parameters(self, d):
        """weights_init, means_init, precisions_init validated as scikit-learn does."""
        K = self.n_components
        w = m = p = None
        if self.weights_init is not None:
            w = check_array(self.weights_init, dtype=[np.float64, np.float32], ensure_2d=False)
            _check_shape(w, (K,), "weights")
            if (w < 0).any() or (w > 1).any():
                raise ValueError(f"The parameter 'weights' should be in the range [0, 1], but got max value "
                                 f"{w.max():.5f}, min value {w.min():.5f}")
            if abs(1.0 - w.sum()) > (1e-6 if w.dtype == np.float32 else 1e-8):
                raise ValueError(f"The parameter 'weights' should be normalized, but got sum(weights) = {w.sum():.5f}")
        if self.means_init is not None:
            m = check_array(self.means_init, dtype=[np.float64, np.float32], ensure_2d=False)
            _check_shape(m, (K, d), "means")
        if self.precisions_init is not None:
            p = check_array(self.precisions_init, dtype=[np.float64, np.float32], ensure_2d=False)
            _check_shape(p, (K, d) if self.covariance_type == "diag" else (K,), f"{self.covariance_type} precision")
            if (p <= 0).any():
                raise ValueError(f"'{self.covariance_type} precision' should be positive")
        return w, m, p

    def _backend(self):
        """(statistics backend, label for backend_, torch device)."""
        cuda = torch.cuda.is_available()
        if self.device == "cpu" or (self.device == "auto" and not cuda and not interpreter_mode()):
            return "torch", "torch-cpu", torch.device("cpu")
        if cuda:
            return "triton", "triton", torch.device("cuda")
        if interpreter_mode():
            return "triton", "triton-interpreter", torch.device("cpu")
        raise ValueError("device='cuda' needs a CUDA GPU (or TRITON_INTERPRET=1 to run the kernels in Triton's "
                         "CPU interpreter); use device='cpu' or 'auto' for the CPU fallback")

    def _initial_parameters(self, X, random_state, init_w, init_m, init_p):
        """scikit-learn's initialization: responsibilities from ``init_params`` drawn
        from ``random_state`` in the same order, then one M-step on them (float64,
        in row blocks), overridden by the user's weights/means/precisions."""
        N, d = X.shape
        K = self.n_components
        if self.init_params in ("random_from_data", "k-means++"):  # one row per component: no pass over X
            if self.init_params == "random_from_data":
                indices = random_state.choice(N, size=K, replace=False)
            else:
                _, indices = kmeans_plusplus(X, K, random_state=random_state)
            sx = np.asarray(X[indices], np.float64)
            nk, sxx = np.ones(K), sx * sx
        else:
            if self.init_params == "kmeans":
                labels = KMeans(n_clusters=K, n_init=1, random_state=random_state).fit(X).labels_
                resp_rows = lambda r0, r1: np.eye(K)[labels[r0:r1]]  # noqa: E731
            else:  # "random": drawn block by block, rows ascending = scikit-learn's single draw
                resp_rows = lambda r0, r1: _normalized(random_state.uniform(size=(r1 - r0, K)))  # noqa: E731
            nk, sx, sxx = np.zeros(K), np.zeros((K, d)), np.zeros((K, d))
            for r0 in range(0, N, INIT_BLOCK_ROWS):
                r1 = min(N, r0 + INIT_BLOCK_ROWS)
                resp, x = resp_rows(r0, r1), np.asarray(X[r0:r1], np.float64)
                nk += resp.sum(0)
                sx += resp.T @ x
                sxx += resp.T @ (x * x)
        nk += 10 * EPS64
        means = sx / nk[:, None]
        cov = sxx / nk[:, None] - 2 * means * (sx / nk[:, None]) + means**2 + self.reg_covar
        if self.covariance_type == "spherical":
            cov = cov.mean(1)
        weights = nk / N if init_w is None else init_w
        return (np.asarray(weights, np.float64), np.asarray(means if init_m is None else init_m, np.float64),
                cov if init_p is None else 1.0 / np.asarray(init_p, np.float64))

    # --------------------------------------------------------------- prediction
    def _log_resp_blocks(self, X):
        """(N, blocks): X validated now; blocks yields (r0, r1, log Gamma, L) per row
        block, float64, computed on the fitted backend's device."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        _, _, device = self._backend()
        K, d = self.means_.shape
        rows = max(1, (self.max_device_bytes or CPU_BLOCK_BYTES) // (16 * d + 24 * K))
        w, m = (torch.as_tensor(a, device=device) for a in (self.weights_, self.means_))
        v = self.covariances_
        v = torch.as_tensor(np.ascontiguousarray(np.broadcast_to(v[:, None], (K, d)) if v.ndim == 1 else v), device=device)
        center = w @ m  # the mixture's mean: the expanded score is evaluated about it

        def blocks():
            for r0 in range(0, X.shape[0], rows):
                r1 = min(X.shape[0], r0 + rows)
                x = torch.as_tensor(np.asarray(X[r0:r1], np.float64), device=device) - center
                yield r0, r1, *log_responsibilities(x, w, m - center, v)
        return X.shape[0], blocks()

    def score_samples(self, X):
        """log p(x_i) under the fitted mixture, (n_samples,)."""
        N, blocks = self._log_resp_blocks(X)
        out = np.empty(N)
        for r0, r1, _, L in blocks:
            out[r0:r1] = L.cpu().numpy()
        return out

    def score(self, X, y=None):
        """Mean log-likelihood per sample."""
        return float(np.mean(self.score_samples(X)))

    def predict(self, X):
        """Most probable component of each sample."""
        N, blocks = self._log_resp_blocks(X)
        out = np.empty(N, dtype=np.int64)
        for r0, r1, lr, _ in blocks:
            out[r0:r1] = lr.argmax(1).cpu().numpy()
        return out

    def predict_proba(self, X):
        """Responsibilities (n_samples, n_components), computed block by block."""
        N, blocks = self._log_resp_blocks(X)
        out = np.empty((N, self.n_components))
        for r0, r1, lr, _ in blocks:
            out[r0:r1] = lr.exp().cpu().numpy()
        return out

    def _n_parameters(self):
        K, d = self.means_.shape
        cov = K * d if self.covariance_type == "diag" else K
        return int(cov + K * d + K - 1)

    def bic(self, X):
        """Bayesian information criterion (lower is better)."""
        ll = self.score_samples(X)
        return -2 * ll.mean() * ll.shape[0] + self._n_parameters() * np.log(ll.shape[0])

    def aic(self, X):
        """Akaike information criterion (lower is better)."""
        ll = self.score_samples(X)
        return -2 * ll.mean() * ll.shape[0] + 2 * self._n_parameters()

    def sample(self, n_samples=1):
        """(X (n_samples, d), component labels), drawn as scikit-learn draws them."""
        check_is_fitted(self)
        if n_samples < 1:
            raise ValueError(f"Invalid value for 'n_samples': {n_samples}. The sampling requires at least one sample.")
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        d = self.means_.shape[1]
        X = np.vstack([mean + rng.standard_normal(size=(c, d)) * np.sqrt(cov)
                       for mean, cov, c in zip(self.means_, self.covariances_, counts)])
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


class _FitData:
    """X where the E-step reads it: whole on the device, or streamed from the host
    in chunks of ``rows`` when it exceeds ``max_device_bytes`` (always in blocks for
    the torch fallback, whose temporaries are (rows, K))."""

    def __init__(self, X, K, backend, device, max_device_bytes, algorithm, precision):
        N, d = X.shape
        mean = host_column_mean(X)  # the in-kernel shift (kernels/em.py: center=True)
        self.center = torch.as_tensor(mean, device=device)
        self.block = BlockStatistics(K, d, self.center, backend, algorithm, precision)
        self.device = device
        if backend == "triton":
            resident = N * d * 4 + (N * 4 if self.block.algorithm == "two_pass" else 0)
            self.streamed = max_device_bytes is not None and resident > max_device_bytes
            self.dtype = torch.float32
        else:
            self.streamed = True
            self.dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        if self.streamed:
            self.X = X
            self.rows = rows_per_chunk(max_device_bytes or CPU_BLOCK_BYTES, d, K, backend)
        else:
            self.X = torch.from_numpy(np.require(X, np.float32, ["C", "W"])).to(device)  # torch wants writable memory
            self.rows = N

    def statistics(self, w, m, v):
        if self.streamed:
            return streamed_statistics(self.X, self.block, (w, m, v), self.rows, self.device, self.dtype)
        return self.block(self.X, w, m, v)


def _check_shape(a, shape, name):
    if a.shape != shape:
        raise ValueError(f"The parameter '{name}' should have the shape of {shape}, but got {a.shape}")


def _normalized(r):
    return r / r.sum(1, keepdims=True)

