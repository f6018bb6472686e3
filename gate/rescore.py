"""Re-score a returned fit in float64 on the same X and decide whether it is valid.

A fit is valid iff its per-point log-likelihood and all its parameters are finite,
every variance is positive and, for arms that return weights, |sum(pi) - 1| <= 1e-4
(the paper's validity rule, §5.1, with the float32 tolerance of this artifact). The score
uses the centered form (x - mu)^2 / v, not the lift, so the gate does not share the
kernels' conditioning. It runs where X lives (float64 on the GPU when X is on cuda),
chunked over rows.

The gate judges plain arrays (NumPy, or torch on any device) and imports nothing of the
project: whoever hands it a library's output (a JAX array, say) converts it first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

WEIGHT_TOL = 1e-4
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


def rescore(X: torch.Tensor, weights, means, variances, rows: np.ndarray | None = None,
            chunk_elems: int | None = None) -> Rescore:
    """Per-point float64 log-likelihood of (weights, means, variances) on X, and the gate's reasons.

    weights (K,) or None (an arm that returns none), means and variances (K, d): NumPy or torch arrays."""
    w, m, v = (_host64(a) for a in (weights, means, variances))
    K, d = m.shape
    reasons = []
    if X.shape[1] != d or v.shape != (K, d) or (w is not None and w.shape != (K,)):
        raise ValueError(f"parameter shapes {None if w is None else w.shape}, {m.shape}, {v.shape} "
                         f"do not fit X of shape {tuple(X.shape)}")
    for name, a in (("weights", w), ("means", m), ("variances", v)):
        if a is not None and not np.isfinite(a).all():
            reasons.append(f"non-finite {name}")
    if np.isfinite(v).all() and (v <= 0).any():
        reasons.append("non-positive variances")
    sum_w = None if w is None else float(w.sum())
    if sum_w is not None and not abs(sum_w - 1.0) <= WEIGHT_TOL:
        reasons.append(f"sum(pi)={sum_w:.6g}")

    dev = X.device
    with np.errstate(all="ignore"):  # invalid parameters give non-finite scores, reported above
        logw = torch.as_tensor(np.log(w) if w is not None else np.full(K, -math.log(K)), device=dev)
        mu = torch.as_tensor(m, device=dev)
        tau = torch.as_tensor(1.0 / v, device=dev)
        const = torch.as_tensor(-0.5 * (d * LOG_2PI + np.log(v).sum(1)), device=dev)
    if chunk_elems is None:
        chunk_elems = 1 << (26 if dev.type == "cuda" else 22)
    B = max(1, chunk_elems // (K * d))
    total = torch.zeros((), dtype=torch.float64, device=dev)
    for r0 in range(0, X.shape[0], B):
        total += torch.logsumexp(_scores(X[r0:r0 + B], logw, mu, tau, const), 1).sum()
    ll = float(total) / X.shape[0]
    if not math.isfinite(ll):
        reasons.insert(0, "non-finite LL")

    labels = None
    if rows is not None:
        idx = torch.as_tensor(rows, device=dev)
        labels = torch.cat([_scores(X[idx[r0:r0 + B]], logw, mu, tau, const).argmax(1)
                            for r0 in range(0, len(rows), B)]).cpu().numpy().astype(np.int32)
    return Rescore(ll, sum_w, reasons, labels)
