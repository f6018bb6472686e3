"""Ablation rung A3: E- and M-steps fused, two sweeps of the component axis (Algorithm 3).

The kernels of kernels/diag/two_pass.py through ``turbo_gmm.fit`` (forced to
``two_pass``), as the Turbo-GMM arm runs them: Gamma never materialized, the
score recomputed in the second sweep. Rung A4 (arms/ablation_a4.py) is the same
with ``one_pass``. Needs a GPU, or TRITON_INTERPRET=1 on the CPU.
"""
from __future__ import annotations

from turbo_gmm.records import Init

MEMORY = "torch"
RUNG = "A3"
ALGORITHM = "two_pass"


def available() -> str | None:
    from arms.turbo_gmm import available as kernels_available

    return kernels_available()


def fused_statistics(algorithm: str, X, weights, means, variances, precision: str = "tf32x3"):
    """One E-step of Algorithm 2 or 3 on uncentered X: (n, s, u, ll) unpadded."""
    from turbo_gmm.dispatch import launch_config
    from turbo_gmm.diag.em import Workspace, estep_statistics

    K, d = means.shape
    ws = Workspace(X, K, algorithm)  # center zero: statistics of X itself
    n, su, ll = estep_statistics(X, weights, means, variances, ws, algorithm, precision, launch_config(algorithm, K, d))
    return n[:K], su[:K, :d], su[:K, ws.d_pad : ws.d_pad + d], ll[0]


def statistics(X, weights, means, variances, precision: str = "tf32x3"):
    return fused_statistics(ALGORITHM, X, weights, means, variances, precision)


def prepare(X, init: Init, n_iter: int, opts: dict):
    """The Turbo-GMM arm with its algorithm forced to this rung's."""
    from arms import turbo_gmm

    return turbo_gmm.prepare(X, init, n_iter, {**opts, "algorithm": opts.get("algorithm", ALGORITHM)})
