"""The estimator's data during one fit (internal): where X lives, the precision each iteration runs at, and one
EM iteration over it.

X is whole on the device, or streamed from the host in chunks past ``max_device_bytes`` (always in blocks
for the torch fallback). The precision starts at :func:`turbo_gmm.dispatch.initial_precision` and, under
"auto", follows :func:`turbo_gmm.dispatch.auto_precision`; what differs per covariance type is
:data:`turbo_gmm._covariance.COVARIANCES`."""
from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np
import torch
from sklearn.utils.validation import assert_all_finite

from ._covariance import COVARIANCES
from ._data import column_moments, upload
from .diag.em import Float32RangeError, forget_graphs
from .diag.em import fit as em_fit
from .diag.estep import mstep_diag
from .diag.mstep import IllDefinedCovarianceError, mstep_guard, well_defined
from .diag.precision import Float32LiftWarning, data_radius, lift_warning
from .dispatch import FLOAT32_PRECISIONS, FP64, SCORE_TOLERANCE, auto_precision, initial_precision, resolve_algorithm
from .streaming import (CPU_BLOCK_BYTES, chunk_bounds, device_chunks, host_column_mean, rows_per_chunk,
                        streamed_statistics)
from .tied import estep as tied_estep

ORIGIN_ROWS = 1024  # rows whose mean is subtracted from a float64 host X before its float32 copy
PROFILE_PHASES = ("transfer", "validation", "init", "em")


class PhaseClock:
    """Seconds of a fit per phase: CUDA events read after the fit's own last sync, else the host clock."""

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


class FitData:
    """X where the E-step reads it, validated, with its column mean ``center`` (the in-kernel shift).

    A float64 host array bound for the float32 kernels goes as X - ``origin`` (the float64 mean of its first
    rows), subtracted before rounding so that data far from zero keeps its digits; ``center`` is in those
    coordinates, :meth:`iterate`'s parameters in X's own."""

    def __init__(self, X, K, backend, device, max_device_bytes, algorithm, precision, reg_covar=1e-6, clock=None,
                 covariance_type="diag", sample_weight=None):
        clock = clock or PhaseClock(device.type == "cuda", time.perf_counter())
        N, d = X.shape
        self.shape, self.device, self.backend, self.reg_covar = (N, d), device, backend, reg_covar
        self.covariance_type, self.covariance = covariance_type, COVARIANCES[covariance_type]
        self.precision, self.auto = initial_precision(precision, N, K, d, covariance_type)
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
            self.dtype = torch.float64 if self.precision == FP64 and float64_input else torch.float32
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
            sample_weight, dtype=self.dtype, device=device)  # the stream beside a resident X, in its dtype (weights at
        # mean 1: turbo_gmm.fit takes them as they are, and replays its cached graph)
        self.block = self.covariance.block(K, d, self.center, backend, algorithm, self.precision)
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
        """X on the host in its own coordinates, for scikit-learn's initialization."""
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

    def params_error_bound(self, params) -> float:
        """The float32 score's error bound at :meth:`iterate`'s ``params`` (``diag.precision``)."""
        return float(self.covariance.error_bound(self.radius(), params, self.center + self.origin))

    def warns(self) -> bool:
        """Whether a float32 precision runs that cannot switch to fp64 by itself (given explicitly, or full/tied)."""
        return self.backend == "triton" and self.precision in FLOAT32_PRECISIONS and not self.auto

    def warn_once(self, bound: float, where: str) -> None:
        """One :class:`Float32LiftWarning` per fit, where ``bound`` exceeds the tolerance."""
        if not self._warned and bound > SCORE_TOLERANCE:
            warnings.warn(lift_warning(bound, where), Float32LiftWarning, stacklevel=7)
            self._warned = True

    def float64_lower_bound(self, params, precision):
        """None, or -- where the last iteration ran float32 and the score's error bound at its incoming ``params``
        exceeds the tolerance -- that iteration's lower bound by the float64 torch E-step, so that ``lower_bound_``
        is what ``score`` computes."""
        if self.backend != "triton" or precision not in FLOAT32_PRECISIONS:
            return None
        bound = self.params_error_bound(params)
        if bound <= SCORE_TOLERANCE:
            return None
        if self.warns():
            self.warn_once(bound, "final")
        K, d = params[1].shape
        block = self.covariance.block(K, d, self.center, "torch")
        w, m, v = self.covariance.block_operands(params)
        args = (w, m - self.origin, v)
        rows = max(1, CPU_BLOCK_BYTES // self.covariance.bytes_per_row(K, d))
        ll = torch.zeros((), dtype=torch.float64, device=self.device)
        for sw, x in self._chunks():
            for r0 in range(0, x.shape[0], rows):
                part = None if sw is None else sw[r0 : r0 + rows]
                ll = ll + block(x[r0 : r0 + rows], *args, sample_weight=part).ll.to(ll.device)
        return float(ll) / self.total_weight

    def choose_precision(self, params, first=False) -> str:
        """The next iteration's precision: "fp64" on the CPU fallback; under "auto" :func:`auto_precision` of the
        score's error bound; otherwise kept, with one :class:`Float32LiftWarning` where the bound at a start's
        initial parameters exceeds the tolerance."""
        if self.backend != "triton":
            return FP64
        if self.warns():
            if first and not self._warned:
                self.warn_once(self.params_error_bound(params), "initial")
            return self.precision
        if self.auto:
            precision = auto_precision(self.params_error_bound(params))
            if precision != self.precision:  # the dispatch rule and the tiles depend on the precision
                self.precision = precision
                K, d = params[1].shape
                self.block = self.covariance.block(K, d, self.center, self.backend, self.requested_algorithm,
                                                   precision)
                self.algorithm = self.block.algorithm
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
        """(weighted scatter (d, d), weighted sum (d,)) of X about the center, once per fit (tied)."""
        if self._moments is None:
            parts = [tied_estep.centered_moments(x, sw, self.center) for sw, x in self._chunks()]
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
        """One EM iteration from ``params``: (the new parameters, entries floored, ell at the incoming parameters)."""
        if self.covariance.matrix:
            return self._iterate_matrix(*params)
        w, m, v = params
        spherical = v.ndim == 1
        w, m, v, f, ll = self._iterate_diag(w, m, v[:, None].expand(*m.shape) if spherical else v)
        return (w, m, v.mean(1) if spherical else v), f, ll  # spherical: the feature-average of the diagonal one

    def _iterate_matrix(self, w, m, cov, U):
        """Full or tied: the E-step, the float64 M-step, one host read; where a Cholesky fails with moments about the
        center, the iteration again with moments about each component's mean (full on the kernels)."""
        w0, m0, cov0, U0 = w, m, cov, U
        st = self.statistics(w, m, U)
        w, m, cov, U, ok = self.block.mstep(st, self.reg_covar, lambda: self.centered_moments()[0],
                                            mstep_guard(self.total_weight, self.shape[0]))
        m = m + self.origin
        ok = ok & torch.isfinite(w).all() & torch.isfinite(m).all()
        sums = [st.n, st.s] + ([] if st.M2 is None else [st.M2])
        finite = torch.stack([torch.isfinite(t).all() for t in sums]).all()
        ll, ok, finite = torch.stack([st.ll, ok.double(), finite.double()]).tolist()  # one host read
        if not (np.isfinite(ll) and finite) and self.block.backend == "triton":  # float32 kernels out of range
            raise Float32RangeError()
        if not ok and np.isfinite(ll) and self.block.retry_about_components():
            return self._iterate_matrix(w0, m0, cov0, U0)
        if not (ok and np.isfinite(ll)):
            raise IllDefinedCovarianceError()
        return (w, m, cov, U), 0, ll

    def _iterate_diag(self, w, m, v):
        """One diag iteration (variances (K, d)): a replay of the captured graph when X is on the device."""
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
