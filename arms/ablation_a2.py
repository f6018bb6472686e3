"""Ablation rung A2: A1 with the score fused into one Triton kernel (paper §5.4, Appendix D).

arms.ablation_fused_score computes S from X with X*X formed in registers (tf32x3 dot)
and writes S; normalization and the statistics are A1's library calls, Gamma
still materialized. u is reduced over bounded row chunks, so the N x d X*X
temporary of A1 never exists: the only memory this rung sheds. Needs a GPU, or
TRITON_INTERPRET=1 on the CPU.
"""
from __future__ import annotations

import torch

from turbo_gmm.records import Init
from arms.ablation_a1 import materializing_prepare, normalized_statistics

MEMORY = "torch"
RUNG = "A2"


def available() -> str | None:
    from arms.turbo_gmm import available as kernels_available

    return kernels_available()


def statistics(X: torch.Tensor, weights, means, variances, precision: str = "tf32x3"):
    """One E-step of rung A2 at the given parameters: (n, s, u, ll)."""
    from arms.ablation_fused_score import fused_score
    from turbo_gmm.diag.lift import lift, pow2_at_least_16

    K, d = means.shape
    d_pad = pow2_at_least_16(d)
    W, b = lift(weights, means, variances, pow2_at_least_16(K), d_pad)
    center = torch.zeros(d_pad, dtype=torch.float32, device=X.device)  # X comes centered, as in A1
    S = fused_score(X, center, W, b, K, precision)
    return normalized_statistics(S, X, None)


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    precision = opts.get("precision", "tf32x3")
    return materializing_prepare(X, init, n_iter, opts, lambda *a: statistics(*a, precision=precision),
                                 {"algorithm": "fused_score",
                                  "precision": f"{precision} score, fp32 statistics"})
