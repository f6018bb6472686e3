"""E-step statistics of full covariances for a block of rows, as diag/estep.py for diag: float64 n, s, M2 and
ell about a shared center, by the fused kernels ("triton", float32 only: "fp64" takes torch) or float64
torch ops with (rows, K, d) temporaries. tied/estep.py extends the block for tied covariances."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..dispatch import FP64, full_launch_config
from . import em as full_em
from .parameters import log_det_cholesky, mstep_full

LOG_2PI = math.log(2.0 * math.pi)


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


def bytes_per_row(K: int, d: int) -> int:
    """Bytes of the torch fallback's float64 temporaries per row: x, the (K,) score and responsibility rows, the
    (K, d) whitened rows and the (K, d) weighted rows of M2."""
    return 16 * d + 24 * K + 16 * K * d


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


class BlockStatistics:
    """:class:`CovarianceStatistics` of row blocks for fixed (K, d, center, backend): the full kernels, or
    float64 torch ops (the CPU, and "fp64": the kernels are float32 only)."""

    second_moments = True  # M2 summed (tied: none)

    def __init__(self, K: int, d: int, center: torch.Tensor, backend: str, algorithm: str = "auto",
                 precision: str = "tf32x3"):
        self.K, self.d, self.backend = K, d, backend
        self.center64 = center.double()
        self.ws = None  # made for the first block (and again for a longer one: Algorithm 3's L holds its rows)
        self.moments = "center"  # "component" once a Cholesky failed (turbo_gmm.full.em)
        if backend == "triton" and precision == FP64:
            self.backend = backend = "torch"
        if backend == "triton":
            self.precision = precision
            self._resolve(K, d, algorithm, precision)
        else:
            self.algorithm, self.dataflow, self.precision = "torch_float64", "direct", "ieee"

    def _resolve(self, K, d, algorithm, precision):
        self.algorithm, self.dataflow = full_em.resolve(K, d, algorithm, "auto", precision)
        self.cfg = full_launch_config(self.algorithm, K, d, self.dataflow)

    def __call__(self, X: torch.Tensor, weights, means, U, sample_weight=None) -> CovarianceStatistics:
        """Statistics of the rows X at float64 (weights, means in data coordinates, U); ``sample_weight`` (rows,)."""
        if self.backend == "triton":
            sw = None if sample_weight is None else sample_weight.to(device=X.device, dtype=torch.float32).contiguous()
            n, s, M2, ll = self._kernel_statistics(X, sw, weights, means, U)
            return CovarianceStatistics(n.clone(), s.clone(), None if M2 is None else M2.clone(), ll.reshape(()).clone())
        return self._torch(X, weights, means, U, sample_weight)

    def _kernel_statistics(self, X, sw, weights, means, U):
        if self.ws is None or (self.ws.L is not None and self.ws.L.shape[0] < X.shape[0]):
            self.ws = full_em.Workspace(X, self.K, self.algorithm, self.center64)
        return full_em.workspace_statistics(X, sw, weights, means, U, self.ws, self.algorithm, self.dataflow,
                                            self.precision, self.cfg, self.moments)

    def _torch(self, X, weights, means, U, sample_weight):
        x = X.double() - self.center64
        log_resp, L = log_responsibilities(x, weights, means.double() - self.center64, U)
        g = log_resp.exp_()
        if sample_weight is not None:
            w = sample_weight.to(device=x.device, dtype=torch.float64)
            g *= w[:, None]
            L = L * w
        M2 = torch.einsum("nk,nd,ne->kde", g, x, x) if self.second_moments else None
        return CovarianceStatistics(g.sum(0), g.T @ x, M2, L.sum())

    def retry_about_components(self) -> bool:
        """After a failed Cholesky on the kernels: sum the moments about each component's mean from now on
        (turbo_gmm.full.em's fallback); False where that was done already or cannot help."""
        if self.backend != "triton" or self.moments != "center":
            return False
        self.moments = "component"
        return True

    def mstep(self, st: CovarianceStatistics, reg_covar: float, scatter=None, guard: float | None = None):
        """(weights, means (data coordinates), covariances, precisions Cholesky, ok): scikit-learn's float64 M-step
        with n_k + ``guard`` (:func:`turbo_gmm.diag.mstep.mstep_guard`); ``ok`` a device bool, False where a
        Cholesky failed."""
        return mstep_full(st.n, st.s, st.M2, self.center64, reg_covar, guard)
