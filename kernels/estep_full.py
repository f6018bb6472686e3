"""E-step statistics of full and tied covariances for a block of rows, as kernels/estep.py for diag.

The estimator, its streaming path and its CPU fallback need the full and tied E-steps without
their fits' M-steps: float64 n_k = sum_i g_ik, s_k = sum_i g_ik (x_i - c), (full) M2_k =
sum_i g_ik (x_i - c)(x_i - c)^T and ell = sum_i w_i log p(x_i), with g_ik = w_i gamma_ik, about a
center c every block shares, so that sums over chunks are the statistics of the whole data and one
M-step follows. The tied M-step also needs the data's weighted scatter sum_i w_i (x_i - c)(x_i - c)^T,
taken once per fit (:func:`centered_moments`), not once per iteration.

``backend``: "triton" (kernels/full and kernels/tied's fused E-steps on a float32 tensor, CUDA or
the interpreter) or "torch" (float64 torch ops on any device; (rows, K, d) temporaries, callers
bound the rows, :func:`bytes_per_row`), which "triton" at precision "fp64" also takes: the fused
kernels of these types are float32 only. Parameters are scikit-learn's: precisions Cholesky U
(upper triangular, U U^T = Sigma^-1), (K, d, d) full or (d, d) tied.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .dispatch import launch_config
from .em import resolve_algorithm
from .full import config as full_config
from .full import em as full_em
from .full.parameters import log_det_cholesky, mstep_full
from .lift import FP64
from .tied import em as tied_em

LOG_2PI = math.log(2.0 * math.pi)
COVARIANCE_TYPES = ("full", "tied")


@dataclass
class CovarianceStatistics:
    """Float64 statistics about a center, summable across blocks; M2 is None for tied."""

    n: torch.Tensor  # (K,)
    s: torch.Tensor  # (K, d)
    M2: torch.Tensor | None  # (K, d, d)
    ll: torch.Tensor  # ()

    def __iadd__(self, other: "CovarianceStatistics") -> "CovarianceStatistics":
        self.n += other.n
        self.s += other.s
        if self.M2 is not None:
            self.M2 += other.M2
        self.ll += other.ll
        return self


def bytes_per_row(covariance_type: str, K: int, d: int) -> int:
    """Bytes of the torch fallback's float64 temporaries per row: x, the (K,) score and responsibility rows and
    the (K, d) whitened rows (full: also the (K, d) weighted rows of M2)."""
    return 16 * d + 24 * K + 8 * K * d * (2 if covariance_type == "full" else 1)


def log_responsibilities(x: torch.Tensor, weights, means, U):
    """(log Gamma (rows, K), L (rows,)) in float64 for centered rows x and centered means, U (K, d, d) or
    (d, d): the score in scikit-learn's form y = (x - mu_k) U_k (no expansion, no cancellation of |x|^2)."""
    x, means, U = x.double(), means.double(), U.double()
    K, d = means.shape
    Uk = U.expand(K, d, d) if U.ndim == 2 else U
    y = torch.einsum("nd,kde->nke", x, Uk) - torch.einsum("kd,kde->ke", means, Uk)[None]
    S = torch.log(weights.double()) + log_det_cholesky(Uk) - 0.5 * d * LOG_2PI - 0.5 * (y * y).sum(-1)
    L = torch.logsumexp(S, 1)
    return S - L[:, None], L


def centered_moments(X: torch.Tensor, sample_weight, center: torch.Tensor):
    """(sum_i w_i (x_i - c)(x_i - c)^T (d, d), sum_i w_i (x_i - c) (d,)) in float64 of the rows X, in chunks of
    tied's SCATTER_ROWS: the tied M-step's data term (once per fit) and its initialization's."""
    d = X.shape[1]
    scatter = torch.zeros(d, d, dtype=torch.float64, device=X.device)
    first = torch.zeros(d, dtype=torch.float64, device=X.device)
    c = center.to(device=X.device, dtype=torch.float64)
    for r0 in range(0, X.shape[0], tied_em.SCATTER_ROWS):
        x = X[r0 : r0 + tied_em.SCATTER_ROWS].double() - c
        if sample_weight is not None:
            x_w = x * sample_weight[r0 : r0 + tied_em.SCATTER_ROWS, None].to(device=X.device, dtype=torch.float64)
        else:
            x_w = x
        scatter += x_w.T @ x
        first += x_w.sum(0)
    return scatter, first


class BlockStatistics:
    """:class:`CovarianceStatistics` of row blocks for fixed (covariance type, K, d, center, backend)."""

    def __init__(self, covariance_type: str, K: int, d: int, center: torch.Tensor, backend: str,
                 algorithm: str = "auto", precision: str = "tf32x3"):
        if covariance_type not in COVARIANCE_TYPES:
            raise ValueError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {covariance_type!r}")
        self.covariance_type, self.K, self.d, self.backend = covariance_type, K, d, backend
        self.center64 = center.double()
        self.ws = None  # made for the first block (and again for a longer one: Algorithm 3's L holds its rows)
        self.moments = "center"  # full on the kernels: "component" once a Cholesky failed (turbo_gmm.full.em)
        if backend == "triton" and precision == FP64:  # the kernels are float32: float64 torch ops on X's device
            self.backend = backend = "torch"
        if backend == "triton":
            self.precision = precision
            if covariance_type == "full":
                self.algorithm, self.dataflow = full_em.resolve(K, d, algorithm, "auto", precision)
                self.cfg = full_config.default_config(self.algorithm, K, d, self.dataflow)
            else:  # tied takes diag's rule and tiles (kernels/tied/em.py)
                self.algorithm, self.dataflow = resolve_algorithm(K, d, algorithm, precision), "whitened"
                self.cfg = launch_config(self.algorithm, K, d)
        else:
            self.algorithm, self.dataflow, self.precision = "torch_float64", "direct", "ieee"

    def __call__(self, X: torch.Tensor, weights, means, U, sample_weight=None) -> CovarianceStatistics:
        """Statistics of the rows X at (weights (K,), means (K, d) in data coordinates, U), float64 parameters;
        ``sample_weight``: (rows,) or None."""
        if self.backend == "triton":
            return self._triton(X, weights, means, U, sample_weight)
        return self._torch(X, weights, means, U, sample_weight)

    def _triton(self, X, weights, means, U, sample_weight):
        if self.ws is None or (self.ws.L is not None and self.ws.L.shape[0] < X.shape[0]):
            if self.covariance_type == "full":
                self.ws = full_em.Workspace(X, self.K, self.algorithm, self.center64)
            else:
                self.ws = tied_em.Workspace(X, self.K, self.algorithm, self.center64, None, scatter=False)
        sw = None if sample_weight is None else sample_weight.to(device=X.device, dtype=torch.float32).contiguous()
        if self.covariance_type == "full":
            n, s, M2, ll = full_em.workspace_statistics(X, sw, weights, means, U, self.ws, self.algorithm,
                                                        self.dataflow, self.precision, self.cfg, self.moments)
        else:
            (n, s, ll), M2 = tied_em.workspace_statistics(X, sw, weights, means, U, self.ws, self.algorithm,
                                                          self.precision, self.cfg), None
        return CovarianceStatistics(n.clone(), s.clone(), None if M2 is None else M2.clone(), ll.reshape(()).clone())

    def _torch(self, X, weights, means, U, sample_weight):
        x = X.double() - self.center64
        log_resp, L = log_responsibilities(x, weights, means.double() - self.center64, U)
        g = log_resp.exp_()
        if sample_weight is not None:
            w = sample_weight.to(device=x.device, dtype=torch.float64)
            g *= w[:, None]
            L = L * w
        M2 = torch.einsum("nk,nd,ne->kde", g, x, x) if self.covariance_type == "full" else None
        return CovarianceStatistics(g.sum(0), g.T @ x, M2, L.sum())

    def mstep(self, st: CovarianceStatistics, reg_covar: float, scatter=None):
        """(weights, means (data coordinates), covariances, precisions Cholesky, ok): kernels/full's or kernels/tied's
        float64 M-step (scikit-learn's, n_k + 10 eps64, weights normalized by their sum); ``ok`` is a device bool,
        False where a Cholesky failed (scikit-learn's ill-defined covariance)."""
        if self.covariance_type == "full":
            return mstep_full(st.n, st.s, st.M2, self.center64, reg_covar)
        return tied_em.mstep_tied(st.n, st.s, scatter, self.center64, reg_covar)
