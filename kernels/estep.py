"""E-step statistics of a block of rows, and the M-steps that consume them.

Streaming, multi-GPU and the estimator all need the same thing the fused kernels
compute inside :func:`kernels.fit`, but *without* the M-step: the float64
statistics n_k, s_k = sum_i g_ik (x_i - c), u_k = sum_i g_ik (x_i - c)^2 and
ell = sum_i log p(x_i) of one block of rows, about a center c shared by every
block. Sums of such blocks (chunks of a host array, shards on other ranks) are
the statistics of the whole data, so one M-step after the sum is the same EM
iteration as in memory.

Two ways to compute them, named by ``backend``:

* ``"triton"``: the fused kernels (Algorithm 2 or 3, :mod:`kernels.one_pass`,
  :mod:`kernels.two_pass`) on a float32 CUDA tensor -- or on a CPU tensor when
  Triton runs in interpreter mode (``TRITON_INTERPRET=1``).
* ``"torch"``: plain torch ops in float64 on any device, materializing the
  (rows, K) score block -- the CPU fallback when there is neither a GPU nor the
  interpreter. Callers bound the block's rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernels.dispatch import launch_config
from kernels.em import Workspace, estep_statistics, resolve_algorithm
from kernels.mstep import mstep

LOG_2PI = math.log(2.0 * math.pi)
BACKENDS = ("triton", "torch")


@dataclass
class Statistics:
    """Float64 sufficient statistics about a center c, summable across blocks."""

    n: torch.Tensor  # (K,)   sum_i g_ik
    s: torch.Tensor  # (K, d) sum_i g_ik (x_i - c)
    u: torch.Tensor  # (K, d) sum_i g_ik (x_i - c)^2
    ll: torch.Tensor  # ()    sum_i log p(x_i)
    rows: int

    def __iadd__(self, other: "Statistics") -> "Statistics":
        self.n += other.n
        self.s += other.s
        self.u += other.u
        self.ll += other.ll
        self.rows += other.rows
        return self

    def flat(self) -> torch.Tensor:
        """One float64 vector [n | s | u | ll | rows] (a single all-reduce)."""
        rows = torch.tensor([float(self.rows)], dtype=torch.float64, device=self.n.device)
        return torch.cat([self.n, self.s.reshape(-1), self.u.reshape(-1), self.ll.reshape(1), rows])

    @staticmethod
    def from_flat(v: torch.Tensor, K: int, d: int) -> "Statistics":
        kd = K * d
        return Statistics(v[:K], v[K : K + kd].reshape(K, d), v[K + kd : K + 2 * kd].reshape(K, d), v[K + 2 * kd],
                          int(round(float(v[K + 2 * kd + 1]))))


class BlockStatistics:
    """Computes :class:`Statistics` of row blocks for fixed (K, d, center, backend).

    The Triton path keeps its float64 accumulators between calls (one allocation
    per fit, as :func:`kernels.fit` does); every call returns fresh tensors.
    """

    def __init__(self, K: int, d: int, center: torch.Tensor, backend: str, algorithm: str = "auto",
                 precision: str = "tf32x3"):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.K, self.d, self.backend = K, d, backend
        self.center64 = center.double()
        if backend == "triton":
            self.algorithm = resolve_algorithm(K, d, algorithm, precision)
            self.precision = precision
            self.cfg = launch_config(self.algorithm, K, d)
            self.ws = None  # made for the first block (and again for a longer one: L holds a block's rows)
        else:
            self.algorithm, self.precision = "torch_float64", "ieee"

    def __call__(self, X: torch.Tensor, weights, means, variances) -> Statistics:
        """Statistics of the rows X (on the center's device) at (weights, means, variances),
        float64 (K,), (K, d), (K, d) in data coordinates."""
        if self.backend == "triton":
            return self._triton(X, weights, means, variances)
        return self._torch(X, weights, means, variances)

    def _triton(self, X, weights, means, variances):
        K, d = self.K, self.d
        if self.ws is None or (self.ws.L is not None and self.ws.L.shape[0] < X.shape[0]):
            self.ws = Workspace(X, K, self.algorithm)
            self.ws.set_center(self.center64)
        n, su, ll = estep_statistics(X, weights, means, variances, self.ws, self.algorithm, self.precision, self.cfg)
        dp = self.ws.d_pad
        return Statistics(n[:K].clone(), su[:K, :d].clone(), su[:K, dp : dp + d].clone(), ll[0].clone(), X.shape[0])

    def _torch(self, X, weights, means, variances):
        x = X.double() - self.center64
        log_resp, L = log_responsibilities(x, weights, means.double() - self.center64, variances)
        g = log_resp.exp_()
        return Statistics(g.sum(0), g.T @ x, g.T @ (x * x), L.sum(), X.shape[0])


def log_responsibilities(x: torch.Tensor, weights, means, variances):
    """(log Gamma (rows, K), L (rows,)) in float64: the centered-form score
    log pi_k + log N(x; mu_k, diag V_k), normalized by its row log-sum-exp."""
    x = x.double()
    tau = 1.0 / variances.double()
    m = means.double()
    quad = (x * x) @ tau.T - 2.0 * x @ (m * tau).T + (m * m * tau).sum(1)
    S = torch.log(weights.double()) - 0.5 * (x.shape[1] * LOG_2PI - torch.log(tau).sum(1)) - 0.5 * quad
    L = torch.logsumexp(S, 1)
    return S - L[:, None], L


def mstep_diag(st: Statistics, N: int, center: torch.Tensor, reg_covar: float):
    """(weights, means, variances (K, d), n_floored): the kernels' own M-step
    (:func:`kernels.mstep.mstep`) on unpadded statistics."""
    K, d = st.s.shape
    return mstep(st.n, torch.cat([st.s, st.u], 1), N, K, d, center.double(), reg_covar)


def mstep_spherical(st: Statistics, N: int, center: torch.Tensor, reg_covar: float):
    """(weights, means, variances (K,), n_floored).

    scikit-learn's spherical variance is the feature-average of the diagonal one:
    sigma_k^2 = (1/d) sum_c (u_kc / n_k - mu_kc^2) + reg_covar, i.e. the mean squared
    deviation of component k's points over all d features -- the diagonal M-step
    (floor included) averaged over c, so no extra statistics are needed."""
    w, mu, var, floored = mstep_diag(st, N, center, reg_covar)
    return w, mu, var.mean(1), floored
