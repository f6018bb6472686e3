"""pomegranate 1.1.2: ``GeneralMixtureModel`` of diagonal ``Normal`` components.

Driven as arms/README.md describes: one ``Normal(means=M[k], covs=V[k],
covariance_type="diag")`` per component (``covs`` are variances), ``priors=pi``,
``max_iter=n_iter`` and ``tol=-inf``. The loop summarizes, then breaks if
``improvement < tol``, then runs the M-step; with tol=0 a tiny negative float32
improvement would stop it early, ``-inf`` never does (nor does NaN), so exactly
n_iter E- and M-steps run, with no extra E-step. pomegranate reports no
iteration count, so ``Fit.n_iter`` is None (a test counts the steps instead).

**No variance floor:** pomegranate's M-step is ``E[x^2] - E[x]^2`` with nothing
added; ``Normal(min_cov=...)`` is documented but never used. ``reg_covar``
therefore cannot be passed and this arm always runs with reg 0 (recorded as
``info["reg_covar"] = 0``); the float64 reference it is compared with must use 0
too. Silent failure: an empty component gives NaN means (0/0) and stale cached
normalizers, with no error.

The model is built once and moved to X's device (``.to(device)``, i.e. the
``.cuda()`` pomegranate requires: every distribution keeps its own CPU
``_device`` parameter, and mixing devices fails) and each call fits a
``copy.deepcopy`` of that pristine model, so every repetition starts from the
init; the copy (a few small tensors per component) is inside the timed call.
E- and M-steps loop over the components in Python, with several host syncs per
component per iteration: that overhead is the library's and is what we measure.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from kernels.records import Fit, Init

MEMORY = "torch"


def available() -> str | None:
    try:
        import pomegranate.gmm  # noqa: F401  (imports apricot-select, hence numba, at load)
    except ImportError as e:
        return f"pomegranate not installed: {e}"
    return None


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    from pomegranate.distributions import Normal
    from pomegranate.gmm import GeneralMixtureModel

    w64 = init.weights.astype(np.float64)  # pomegranate checks sum(priors) == 1 within 1e-6
    priors = torch.as_tensor((w64 / w64.sum()).astype(np.float32))
    components = [
        Normal(means=torch.as_tensor(init.means[k]), covs=torch.as_tensor(init.variances[k]), covariance_type="diag")
        for k in range(init.means.shape[0])
    ]
    pristine = GeneralMixtureModel(components, priors=priors, max_iter=n_iter, tol=float("-inf"))
    pristine = pristine.to(X.device)
    info = {
        "algorithm": "materializing (per-component loop)",
        "precision": "fp32",
        "device": str(X.device),
        "reg_covar": 0,
        "reg_covar_note": "pomegranate has no variance floor (min_cov is unused); reg_covar cannot be passed",
    }

    def run() -> Fit:
        gmm = copy.deepcopy(pristine)
        gmm.fit(X)
        means = torch.stack([c.means for c in gmm.distributions])
        variances = torch.stack([c.covs for c in gmm.distributions])
        return Fit(gmm.priors.detach(), means.detach(), variances.detach(), n_iter=None, info=info)

    return run
