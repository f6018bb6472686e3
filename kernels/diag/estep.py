"""E-step statistics of a diagonal block of rows, and the M-steps that consume them.

Float64 n_k, s_k, u_k and ell of one block about a center shared by every block: sums over blocks (chunks,
ranks) are the statistics of the whole data, so one M-step after the sum is the in-memory iteration.
``backend`` "triton": the fused kernels; "torch": float64 torch ops materializing the (rows, K) block."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..dispatch import launch_config, resolve_algorithm
from .em import Workspace, estep_statistics
from ..launch import LaunchConfig
from .mstep import mstep, mstep_guard

LOG_2PI = math.log(2.0 * math.pi)
BACKENDS = ("triton", "torch")


@dataclass
class Statistics:
    """Float64 sufficient statistics about a center c, summable across blocks."""

    n: torch.Tensor  # (K,)   sum_i g_ik, g_ik = w_i Gamma_ik
    s: torch.Tensor  # (K, d) sum_i g_ik (x_i - c)
    u: torch.Tensor  # (K, d) sum_i g_ik (x_i - c)^2
    ll: torch.Tensor  # ()    sum_i w_i log p(x_i) (w_i = 1 unweighted)
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
    """:class:`Statistics` of row blocks for a fixed (K, d, center, backend); the Triton path keeps its float64
    accumulators between calls and returns fresh tensors."""

    def __init__(self, K: int, d: int, center: torch.Tensor, backend: str, algorithm: str = "auto",
                 precision: str = "tf32x3", config: LaunchConfig | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.K, self.d, self.backend = K, d, backend
        self.center64 = center.double()
        if backend == "triton":
            self.algorithm = resolve_algorithm(K, d, algorithm, precision)
            self.precision = precision
            self.cfg = config or launch_config(self.algorithm, K, d, precision)
            self.ws = None  # made for the first block (and again for a longer one: L holds a block's rows)
        else:
            self.algorithm, self.precision = "torch_float64", "ieee"

    def __call__(self, X: torch.Tensor, weights, means, variances, sample_weight=None) -> Statistics:
        """Statistics of the rows X (on the center's device) at (weights, means, variances),
        float64 (K,), (K, d), (K, d) in data coordinates; ``sample_weight`` (rows,) or None."""
        if self.backend == "triton":
            return self._triton(X, weights, means, variances, sample_weight)
        return self._torch(X, weights, means, variances, sample_weight)

    def _triton(self, X, weights, means, variances, sample_weight=None):
        K, d = self.K, self.d
        if self.ws is None or (self.ws.L is not None and self.ws.L.shape[0] < X.shape[0]):
            self.ws = Workspace(X, K, self.algorithm, self.precision)
            self.ws.set_center(self.center64)
        sw = None if sample_weight is None else sample_weight.to(device=X.device, dtype=X.dtype).contiguous()
        n, su, ll = estep_statistics(X, weights, means, variances, self.ws, self.algorithm, self.precision, self.cfg,
                                     sw)
        dp = self.ws.d_pad
        return Statistics(n[:K].clone(), su[:K, :d].clone(), su[:K, dp : dp + d].clone(), ll[0].clone(), X.shape[0])

    def _torch(self, X, weights, means, variances, sample_weight=None):
        x = X.double() - self.center64
        log_resp, L = log_responsibilities(x, weights, means.double() - self.center64, variances)
        g = log_resp.exp_()
        if sample_weight is not None:  # a row's weight scales its responsibilities and its ell
            w = sample_weight.to(device=x.device, dtype=torch.float64)
            g *= w[:, None]
            L = L * w
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
    """(weights, means, variances (K, d), n_floored) from unpadded statistics; N: rows or total weight."""
    K, d = st.s.shape
    return mstep(st.n, torch.cat([st.s, st.u], 1), N, K, d, center.double(), reg_covar, mstep_guard(N, st.rows))


def mstep_spherical(st: Statistics, N: int, center: torch.Tensor, reg_covar: float):
    """(weights, means, variances (K,), n_floored): scikit-learn's spherical variance, the diagonal M-step
    (floor included) averaged over features."""
    w, mu, var, floored = mstep_diag(st, N, center, reg_covar)
    return w, mu, var.mean(1), floored


def float64_statistics(X: torch.Tensor, center: torch.Tensor, W: torch.Tensor, b: torch.Tensor, K: int, L=None,
                       comps=None, max_elements: int = 1 << 26) -> dict:
    """Float64 statistics of the responsibilities the kernels form from their own lift (W, b): the reference of
    :func:`per_component_errors`. L: Algorithm 3's pass-1 normalizer, or None for a float64 log-sum-exp (then
    ``ll`` too). Returns n, s, u and the :data:`SCALES` for components ``comps``, in row chunks."""
    N, d = X.shape
    d_pad = W.shape[0] // 2
    comps = torch.arange(K, device=X.device) if comps is None else comps
    Wall = torch.cat([W[:d, :K], W[d_pad : d_pad + d, :K]]).double()
    ball = b[:K].double()
    c = center[:d].double()
    n, s, u, s_scale = (torch.zeros(len(comps), *shape, dtype=torch.float64, device=X.device)
                        for shape in ((), (d,), (d,), (d,)))
    chunk = max(1, max_elements // max(K, 1))
    xmax = 0.0
    ll = torch.zeros((), dtype=torch.float64, device=X.device)
    for r0 in range(0, N, chunk):
        xc = X[r0 : r0 + chunk].double() - c
        lifted = torch.cat([xc, xc * xc], 1)
        if L is None:
            S = lifted @ Wall + ball
            Lc = torch.logsumexp(S, 1, keepdim=True)
            g = torch.exp(S[:, comps] - Lc)
            ll += Lc.sum()
        else:
            g = torch.exp(lifted @ Wall[:, comps] + ball[comps] - L[r0 : r0 + chunk, None].double())
        n += g.sum(0)
        s += g.T @ xc
        u += g.T @ (xc * xc)
        s_scale += g.T @ xc.abs()
        xmax = max(xmax, float(xc.abs().max())) if xc.numel() else xmax
    return {"n": n, "s": s, "u": u, **statistic_scales(n, s_scale, u, N, xmax), **({"ll": ll} if L is None else {})}


FLOAT32_TINY = float(torch.finfo(torch.float32).tiny)
SCALES = """Per-component scales of the statistics' errors, relative to each component's own size: n_k for n_k;
sum_i Gamma_ik |x_ic - c_c| for s_kc (s of centered data cancels towards 0, its terms do not); u_kc itself
(= sum_i Gamma_ik (x_ic - c_c)^2, a sum of non-negative terms) for u_kc. A global scale (N, N max|x|^2) lets
a small component lose every digit unseen. Each is floored at what float32 responsibilities cannot resolve:
a Gamma below float32's smallest normal number (FLOAT32_TINY) is 0 in the kernels, so N * FLOAT32_TINY for
n, times max|x - c| for s and max|x - c|^2 for u (a component far from every row is then measured against
that floor, not against its vanishing float64 size)."""


def statistic_scales(n, s_abs, u, N: int, xmax: float) -> dict:
    """The :data:`SCALES` of n (K,), s and u (K, d) from float64 n, sum_i Gamma |x - c| (``s_abs``) and u of N
    rows whose largest |x - c| is ``xmax``."""
    floor = N * FLOAT32_TINY
    return {"n_scale": n.clamp_min(floor), "s_scale": s_abs.clamp_min(floor * xmax),
            "u_scale": u.clamp_min(floor * xmax * xmax)}


def per_component_errors(n, s, u, reference: dict) -> dict:
    """max over components of |n - n64| / n64, |s - s64| / s_scale, |u - u64| / u64 (inf where not finite;
    massless components count only if the statistic is not 0)."""
    out = {}
    for name, got in zip("nsu", (n, s, u)):
        got = torch.as_tensor(got, dtype=torch.float64, device=reference[name].device)
        err = (got - reference[name]).abs() / reference[f"{name}_scale"].clamp_min(1e-300)
        out[name] = float(err.max()) if bool(torch.isfinite(got).all()) else float("inf")
    return out
