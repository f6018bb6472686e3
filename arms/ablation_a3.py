"""Ablation rung A3: E- and M-steps fused, two sweeps of the component axis (Algorithm 3).

The kernels of kernels/two_pass.py through ``kernels.fit`` (forced to
``two_pass``), as the Turbo-GMM arm runs them: Gamma never materialized, the
score recomputed in the second sweep. Rung A4 (arms/ablation_a4.py) is the same
with ``one_pass``. Needs a GPU, or TRITON_INTERPRET=1 on the CPU.
"""
from __future__ import annotations

from arms import Init

MEMORY = "torch"
RUNG = "A3"
ALGORITHM = "two_pass"


def available() -> str | None:
    from arms.turbo_gmm import available as kernels_available

    return kernels_available()


def fused_statistics(algorithm: str, X, weights, means, variances, precision: str = "tf32x3"):
    """One E-step of Algorithm 2 or 3 on uncentered X: (n, s, u, ll) unpadded."""
    import torch

    from kernels.dispatch import launch_config
    from kernels.lift import lift, pow2_at_least_16
    from kernels.one_pass import one_pass_statistics
    from kernels.two_pass import two_pass_statistics

    K, d = means.shape
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    W, b = lift(weights, means, variances, k_pad, d_pad)
    center = torch.zeros(d_pad, dtype=torch.float32, device=X.device)
    cfg = launch_config(algorithm, K, d)
    if algorithm == "one_pass":
        n, su, ll = one_pass_statistics(X, center, W, b, cfg, precision)
    else:
        n, su, ll = two_pass_statistics(X, center, W, b, K, cfg, precision)
    return n[:K], su[:K, :d], su[:K, d_pad : d_pad + d], ll[0]


def statistics(X, weights, means, variances, precision: str = "tf32x3"):
    return fused_statistics(ALGORITHM, X, weights, means, variances, precision)


def prepare(X, init: Init, n_iter: int, opts: dict):
    """The Turbo-GMM arm with its algorithm forced to this rung's."""
    from arms import turbo_gmm

    return turbo_gmm.prepare(X, init, n_iter, {**opts, "algorithm": opts.get("algorithm", ALGORITHM)})
