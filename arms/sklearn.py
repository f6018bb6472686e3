"""scikit-learn ``GaussianMixture(covariance_type="diag")`` (or ``"full"``), on the GPU through array-API dispatch.

Driven as arms/README.md describes: ``init_params="random"`` with all three
``*_init`` given (then no initialization runs at all), ``precisions_init = 1/V``,
``tol=0`` and ``max_iter=n_iter``, ``n_init=1``. With ``tol=0`` the stop test
``abs(change) < tol`` is never true (NaN compares false too), so exactly
``n_iter`` iterations run and scikit-learn always warns ConvergenceWarning,
which is silenced. ``fit`` goes through ``fit_predict``, which runs **one extra
E-step after the loop** (for labels): n_iter + 1 E-steps, n_iter M-steps. We
accept that work as the library's own cost of a fit and record it in ``Fit.info``.

With X on CUDA the estimator gets torch CUDA tensors inside
``config_context(array_api_dispatch=True)``; that needs ``SCIPY_ARRAY_API=1`` in
the environment *before scipy is first imported* (scipy reads it once). This
module sets it when scipy is not yet imported; if scipy was imported without it,
the GPU path is reported unavailable with the reason. With X on the CPU the
estimator runs on NumPy arrays (option ``array_api: true`` forces the array-API
path with torch CPU tensors, which is how CI tests the GPU code path).
Fails loudly, not silently: a variance <= 0 raises ValueError every M-step.
Full covariances: ``covariance_type="full"`` with ``precisions_init`` the inverses of the
shared init's covariances (K, d, d); a covariance that is not positive definite raises
scikit-learn's ValueError (the row's ``fail (ERROR: ...)``).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")

if "scipy" not in sys.modules:  # must precede the first scipy import to take effect
    os.environ.setdefault("SCIPY_ARRAY_API", "1")


def array_api_problem() -> str | None:
    """Why array-API dispatch cannot work in this process, or None."""
    import scipy._lib._array_api_override as scipy_flag

    if os.environ.get("SCIPY_ARRAY_API") != "1" or not scipy_flag.SCIPY_ARRAY_API:
        return ("scipy was imported before SCIPY_ARRAY_API=1 was set; scikit-learn's array-API "
                "(GPU) path needs it in the environment before the first scipy import")
    return None


def available() -> str | None:
    try:
        import sklearn.mixture  # noqa: F401
    except ImportError as e:
        return f"scikit-learn not installed: {e}"
    import torch

    return array_api_problem() if torch.cuda.is_available() else None


def prepare(X, init: Init, n_iter: int, opts: dict):
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    array_api = bool(opts.get("array_api", X.is_cuda))
    if array_api and (problem := array_api_problem()):
        raise RuntimeError(problem)
    # scikit-learn checks |sum(weights) - 1| <= 1e-6 in float32: renormalize in float64 first.
    w64 = init.weights.astype(np.float64)
    covariance_type = opts.get("covariance_type", "diag")
    precisions = (np.linalg.inv(init.covariances.astype(np.float64)) if covariance_type == "full"
                  else 1.0 / init.variances.astype(np.float64))
    inits = ((w64 / w64.sum()).astype(np.float32), init.means, precisions.astype(np.float32))
    if array_api:
        import torch

        data = X
        w0, m0, p0 = (torch.as_tensor(a, device=X.device) for a in inits)
        device = f"{X.device.type} (array API)"
    else:
        data = X.detach().cpu().numpy()
        w0, m0, p0 = inits
        device = "cpu (numpy)"
    info = {
        "algorithm": "materializing",
        "precision": "fp32",
        "device": device,
        "extra_estep": "fit_predict runs 1 E-step after the n_iter iterations (labels); counted as library cost",
    }

    def run() -> Fit:
        gm = GaussianMixture(
            n_components=init.means.shape[0], covariance_type=covariance_type, tol=0.0, max_iter=n_iter,
            n_init=1, reg_covar=float(opts["reg_covar"]), init_params="random",
            weights_init=w0, means_init=m0, precisions_init=p0,
        )
        with sklearn.config_context(array_api_dispatch=array_api), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm.fit(data)
        if covariance_type == "full":
            return Fit(gm.weights_, gm.means_, None, n_iter=int(gm.n_iter_), info=info, covariances=gm.covariances_)
        return Fit(gm.weights_, gm.means_, gm.covariances_, n_iter=int(gm.n_iter_), info=info)

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """``GaussianMixture(covariance_type=opts["covariance_type"])`` ("diag" or "full", its default) with its
    defaults (``init_params="kmeans"``: one
    ``KMeans``), ``tol`` and ``max_iter`` of the protocol, on the host NumPy array with every host core
    (scikit-learn's OpenMP/BLAS default). The split: ``init`` is timed around scikit-learn's
    ``_initialize_parameters`` (a subclass that only adds the clock); EM, validation and the final
    labels E-step are not separable from outside, so the rest of the wall time stays unsplit."""
    import time
    from threadpoolctl import threadpool_info
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    from arms import fitted

    covariance_type = opts.get("covariance_type", "diag")

    class TimedInit(GaussianMixture):
        def _initialize_parameters(self, *args, **kwargs):
            t0 = time.perf_counter()
            super()._initialize_parameters(*args, **kwargs)
            self.init_seconds_ = getattr(self, "init_seconds_", 0.0) + time.perf_counter() - t0

    threads = sorted({p["num_threads"] for p in threadpool_info()})

    def run():
        gm = TimedInit(n_components=K, covariance_type=covariance_type, tol=opts["tol"], max_iter=opts["max_iter"],
                       reg_covar=float(opts["reg_covar"]), random_state=opts["seed"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # converged_ is recorded instead
            gm.fit(X_host)
        info = {"algorithm": "materializing", "precision": "fp32", "device": "cpu (numpy)",
                "init_params": gm.init_params, "converged": bool(gm.converged_), "lower_bound": float(gm.lower_bound_),
                "host_threads": threads}
        return (fitted(covariance_type, gm.weights_, gm.means_, gm.covariances_, int(gm.n_iter_), info),
                {"init": gm.init_seconds_})

    return {"host": run}
