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
Full covariances: ``Normal(means, covs=(d, d), covariance_type="full")``, the same fit, still with
no regularization (a covariance that is not positive definite raises in its Cholesky).
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")


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
    covariance_type = opts.get("covariance_type", "diag")
    covs = init.covariances if covariance_type == "full" else init.variances
    components = [
        Normal(means=torch.as_tensor(init.means[k]), covs=torch.as_tensor(covs[k]), covariance_type=covariance_type)
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
        covs = torch.stack([c.covs for c in gmm.distributions]).detach()
        if covariance_type == "full":
            return Fit(gmm.priors.detach(), means.detach(), None, n_iter=None, info=info, covariances=covs)
        return Fit(gmm.priors.detach(), means.detach(), covs, n_iter=None, info=info)

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """``GeneralMixtureModel`` of K uninitialized ``Normal`` components of the cell's covariance type
    (pomegranate's "diag" or "full") with its defaults
    (``init="random"``: its own k-means, 3 iterations, from random centroids), ``max_iter`` of the
    protocol and ``tol = tol * N``: pomegranate stops when the *total* log-likelihood improves by
    less than ``tol``, so this is scikit-learn's per-point rule. A subclass adds two clocks and a
    counter, nothing else: ``init`` around pomegranate's ``_initialize`` (its k-means), and the
    M-steps (``from_summaries`` calls), the iterations it took (pomegranate reports none). The host
    input on a GPU is copied to the device first (timed as ``transfer``)."""
    import time

    from pomegranate.distributions import Normal
    from pomegranate.gmm import GeneralMixtureModel

    from arms import fitted

    covariance_type = opts.get("covariance_type", "diag")
    on_gpu = X_device is not None
    device = X_device.device if on_gpu else torch.device("cpu")

    def sync():
        if on_gpu:
            torch.cuda.synchronize(device)

    class Instrumented(GeneralMixtureModel):
        def _initialize(self, X, sample_weight=None):
            sync()
            t0 = time.perf_counter()
            super()._initialize(X, sample_weight=sample_weight)
            sync()
            self.init_seconds = time.perf_counter() - t0

        def from_summaries(self):
            self.m_steps = getattr(self, "m_steps", 0) + 1
            super().from_summaries()

    N = X_host.shape[0]
    info = {"algorithm": "materializing (per-component loop)", "precision": "fp32", "device": str(device),
            "reg_covar": 0, "tol_total": float(opts["tol"]) * N,
            "reg_covar_note": "pomegranate has no variance floor (min_cov is unused); reg_covar cannot be passed"}

    def fit(X, split):
        gmm = Instrumented([Normal(covariance_type=covariance_type) for _ in range(K)], max_iter=int(opts["max_iter"]),
                           tol=float(opts["tol"]) * N, random_state=opts["seed"]).to(device)
        gmm.fit(X)
        means = torch.stack([c.means for c in gmm.distributions]).detach()
        covs = torch.stack([c.covs for c in gmm.distributions]).detach()  # (K, d) variances or (K, d, d)
        return fitted(covariance_type, gmm.priors.detach(), means, covs, getattr(gmm, "m_steps", 0), info), \
            dict(split, init=gmm.init_seconds)

    def from_host():
        if not on_gpu:
            return fit(torch.from_numpy(X_host), {})
        sync()
        t0 = time.perf_counter()
        X = torch.from_numpy(X_host).to(device)
        sync()
        return fit(X, {"transfer": time.perf_counter() - t0})

    fits = {"host": from_host}
    if on_gpu:
        fits["device"] = lambda: fit(X_device, {})
    return fits
