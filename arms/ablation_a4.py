"""Ablation rung A4: the single sweep of the component axis (Algorithm 2), kernels/diag/one_pass.py.

Where the loop-carried state does not fit on chip the compiler refuses the
launch and the harness records ``fail (OutOfResources)``; figures and the claims
report show that cell as "unavailable (state does not fit)", never an estimate.
"""
from __future__ import annotations

from turbo_gmm.records import Init
from arms.ablation_a3 import available, fused_statistics  # noqa: F401 (available: the arm contract)

MEMORY = "torch"
RUNG = "A4"
ALGORITHM = "one_pass"


def statistics(X, weights, means, variances, precision: str = "tf32x3"):
    return fused_statistics(ALGORITHM, X, weights, means, variances, precision)


def prepare(X, init: Init, n_iter: int, opts: dict):
    """The Turbo-GMM arm with its algorithm forced to this rung's."""
    from arms import turbo_gmm

    return turbo_gmm.prepare(X, init, n_iter, {**opts, "algorithm": opts.get("algorithm", ALGORITHM)})
