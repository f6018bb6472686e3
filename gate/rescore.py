"""Re-score a returned fit in float64 on the same X and decide whether it is valid.

A fit is valid iff its per-point log-likelihood and all its parameters are finite,
every variance is positive and, for arms that return weights, no weight is negative and |sum(pi) - 1| <= 1e-4
(the paper's validity rule, §5.1, with the float32 tolerance of this artifact). The score
uses the centered form (x - mu)^2 / v, not the lift, so the gate does not share the
kernels' conditioning. It runs where X lives (float64 on the GPU when X is on cuda),
chunked over rows.

Full covariances (:func:`rescore_full`) take the same rule with "every variance is positive"
replaced by "every covariance is symmetric (to float32 rounding, SYMMETRY_TOL) and positive
definite (its float64 Cholesky factorization exists)"; the score is ||(x - mu_k) U_k||^2 with
U_k = C_k^-T from that Cholesky factor C_k, formed from the returned covariances, not from any
precision factor the arm kept.

The gate judges plain arrays (NumPy, or torch on any device) and imports nothing of the
project: whoever hands it a library's output (a JAX array, say) converts it first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

WEIGHT_TOL = 1e-4
SYMMETRY_TOL = 1e-5  # max |Sigma - Sigma^T| over max |Sigma|, per component: float32 sums of the same products
LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class Rescore:
    ll_per_point: float
    sum_weights: float | None  # None when the arm returns no weights
    reasons: list[str] = field(default_factory=list)  # empty iff valid
    labels: np.ndarray | None = None  # argmax component of the subsample rows

    @property
    def gate(self) -> str:
        return "valid" if not self.reasons else f"rejected ({'; '.join(self.reasons)})"


def label_rows(N: int, seed: int, count: int) -> np.ndarray:
    """The fixed, seeded subsample of rows whose labels are compared by ARI."""
    n = min(N, count)
    return np.sort(np.random.default_rng([seed, 0xA41]).choice(N, size=n, replace=False))


def _scores(x: torch.Tensor, logw, mu, tau, const) -> torch.Tensor:
    """S (B, K) in float64: log pi_k + log N(x; mu_k, diag 1/tau_k), centered form."""
    x = x.double()
    quad = ((x[:, None, :] - mu[None]) ** 2 * tau[None]).sum(-1)
    return logw[None] + const[None] - 0.5 * quad


def _host64(a) -> np.ndarray | None:
    """float64 NumPy copy of a NumPy or torch array (None passes through)."""
    return None if a is None else torch.as_tensor(a).detach().to("cpu", torch.float64).numpy()


def _sizes(X: torch.Tensor, means: np.ndarray) -> tuple[int, int]:
    """(K, d) of ``means``; ValueError with the shape problem where no fit can be scored: X not a (N, d) array
    with rows, means not one (K, d) array (1-D, 3-D), or no component (K = 0)."""
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X of shape {tuple(X.shape)}: the gate scores an (N, d) array with N >= 1 rows")
    if means.ndim != 2:
        raise ValueError(f"means of shape {means.shape}: must be one (K, d) array, {means.ndim}-D given")
    K, d = means.shape
    if K == 0:
        raise ValueError(f"means of shape {means.shape}: K = 0 components, a fit has at least one")
    return K, d


def rescore(X: torch.Tensor, weights, means, variances, rows: np.ndarray | None = None,
            chunk_elems: int | None = None) -> Rescore:
    """Per-point float64 log-likelihood of (weights, means, variances) on X, and the gate's reasons.

    weights (K,) or None (an arm that returns none), means and variances (K, d): NumPy or torch arrays."""
    w, m, v = (_host64(a) for a in (weights, means, variances))
    K, d = _sizes(X, m)
    reasons = []
    if X.shape[1] != d or v.shape != (K, d) or (w is not None and w.shape != (K,)):
        raise ValueError(f"parameter shapes {None if w is None else w.shape}, {m.shape}, {v.shape} "
                         f"do not fit X of shape {tuple(X.shape)}")
    for name, a in (("weights", w), ("means", m), ("variances", v)):
        if a is not None and not np.isfinite(a).all():
            reasons.append(f"non-finite {name}")
    if np.isfinite(v).all() and (v <= 0).any():
        reasons.append("non-positive variances")
    sum_w, weight_reasons = _weights_reasons(w)
    reasons += weight_reasons

    dev = X.device
    with np.errstate(all="ignore"):  # invalid parameters give non-finite scores, reported above
        logw = torch.as_tensor(np.log(w) if w is not None else np.full(K, -math.log(K)), device=dev)
        mu = torch.as_tensor(m, device=dev)
        tau = torch.as_tensor(1.0 / v, device=dev)
        const = torch.as_tensor(-0.5 * (d * LOG_2PI + np.log(v).sum(1)), device=dev)
    return _judge(X, lambda x: _scores(x, logw, mu, tau, const), K * d, sum_w, reasons, rows, chunk_elems)


def _judge(X: torch.Tensor, scores, per_row_elems: int, sum_w, reasons: list[str], rows, chunk_elems) -> Rescore:
    """The per-point log-likelihood and the subsample labels from ``scores`` (a row chunk -> S (B, K) float64)."""
    dev = X.device
    if chunk_elems is None:
        chunk_elems = 1 << (26 if dev.type == "cuda" else 22)
    B = max(1, chunk_elems // per_row_elems)
    total = torch.zeros((), dtype=torch.float64, device=dev)
    for r0 in range(0, X.shape[0], B):
        total += torch.logsumexp(scores(X[r0:r0 + B]), 1).sum()
    ll = float(total) / X.shape[0]
    if not math.isfinite(ll):
        reasons.insert(0, "non-finite LL")

    labels = None
    if rows is not None:
        idx = torch.as_tensor(rows, device=dev)
        labels = torch.cat([scores(X[idx[r0:r0 + B]]).argmax(1)
                            for r0 in range(0, len(rows), B)]).cpu().numpy().astype(np.int32)
    return Rescore(ll, sum_w, reasons, labels)


def _weights_reasons(w) -> tuple[float | None, list[str]]:
    """(sum of the weights, reasons): a weight below zero (weights that sum to 1 can hold one, e.g.
    [1.2, -0.2]) and a sum off 1 by more than WEIGHT_TOL."""
    sum_w = None if w is None else float(w.sum())
    reasons = ["negative weights"] if w is not None and (w < 0).any() else []
    if sum_w is not None and not abs(sum_w - 1.0) <= WEIGHT_TOL:
        reasons.append(f"sum(pi)={sum_w:.6g}")
    return sum_w, reasons


def precision_factors(covariances: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """(U (K, d, d) with U_k U_k^T = Sigma_k^-1, None) from float64 covariances, or (None, why not): not
    symmetric to SYMMETRY_TOL, or not positive definite (no Cholesky factor)."""
    asym = np.abs(covariances - np.swapaxes(covariances, 1, 2)).max(axis=(1, 2))
    scale = np.abs(covariances).max(axis=(1, 2))
    if (asym > SYMMETRY_TOL * scale).any():
        return None, "non-symmetric covariances"
    sym = 0.5 * (covariances + np.swapaxes(covariances, 1, 2))
    try:
        C = np.linalg.cholesky(sym)
    except np.linalg.LinAlgError:
        return None, "covariances not positive definite"
    eye = np.broadcast_to(np.eye(sym.shape[-1]), sym.shape)
    return np.swapaxes(np.linalg.solve(C, eye), 1, 2), None


def rescore_full(X: torch.Tensor, weights, means, covariances, rows: np.ndarray | None = None,
                 chunk_elems: int | None = None) -> Rescore:
    """:func:`rescore` for full covariances (K, d, d): per-point float64 log-likelihood and the gate's reasons."""
    w, m, c = (_host64(a) for a in (weights, means, covariances))
    K, d = _sizes(X, m)
    if X.shape[1] != d or c.shape != (K, d, d) or (w is not None and w.shape != (K,)):
        raise ValueError(f"parameter shapes {None if w is None else w.shape}, {m.shape}, {c.shape} "
                         f"do not fit X of shape {tuple(X.shape)}")
    reasons = [f"non-finite {name}" for name, a in (("weights", w), ("means", m), ("covariances", c))
               if a is not None and not np.isfinite(a).all()]
    U, problem = precision_factors(c) if np.isfinite(c).all() else (None, None)
    if problem:
        reasons.append(problem)
    sum_w, weight_reasons = _weights_reasons(w)
    reasons += weight_reasons
    if U is None:  # nothing to score with: rejected for the reasons above, every label -1 (none)
        return Rescore(math.nan, sum_w, ["non-finite LL", *reasons],
                       None if rows is None else np.full(len(rows), -1, np.int32))
    dev = X.device
    with np.errstate(all="ignore"):
        logw = torch.as_tensor(np.log(w) if w is not None else np.full(K, -math.log(K)), device=dev)
        const = torch.as_tensor(np.log(np.diagonal(U, axis1=1, axis2=2)).sum(1) - 0.5 * d * LOG_2PI, device=dev)
    Ut = torch.as_tensor(U, device=dev)
    mU = torch.einsum("kd,kde->ke", torch.as_tensor(m, device=dev), Ut)

    def scores(x):
        y = torch.einsum("nd,kde->nke", x.double(), Ut) - mU[None]
        return logw[None] + const[None] - 0.5 * (y * y).sum(-1)

    return _judge(X, scores, K * d, sum_w, reasons, rows, chunk_elems)
