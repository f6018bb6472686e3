"""Turbo-GMM: this repository's fused kernels (Algorithm 2 / 3 by the dispatch rule).

The whole fit is ``turbo_gmm.fit``: lift, fused E-step + statistics, float64 M-step,
no host synchronisation inside the loop. X is validated and its column mean (the
in-kernel shift) computed once in ``prepare``, outside the timed region. Options: ``algorithm`` (auto | one_pass |
two_pass) and ``precision`` (tf32x3 | ieee | fp64: the turbo_gmm_fp64 arm). Full covariances (``covariance_type="full"``):
``turbo_gmm.full.fit`` from the shared init's covariances (their precision Cholesky factors made in ``prepare``), by its
default ``products`` dataflow (option ``dataflow``: auto | products | lift) and moments "auto" (option ``moments``:
a warm-up whose Cholesky fails about the center runs again about each component's mean, and the timed fits run
what it ran; ``info["moments"]``). End to end (``prepare_e2e``): the estimator,
``turbo_gmm.GaussianMixture``, with its defaults, of the cell's covariance type ("diag" or "full"), split by its
``fit_profile_``.
"""
from __future__ import annotations

import os

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")


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

    import turbo_gmm
    from turbo_gmm.diag.em import data_center, warn_if_lift_inexact
    from turbo_gmm.records import Fit

    algorithm = opts.get("algorithm", "auto")
    precision = opts.get("precision", "tf32x3")
    if opts.get("covariance_type", "diag") == "full":
        return _prepare_full(X, init, n_iter, opts, algorithm, precision)
    params = tuple(torch.as_tensor(a, device=X.device) for a in (init.weights, init.means, init.variances))
    center = data_center(X, True)  # validates X; outside the timed fits
    # the float32 lift's error check (a min/max pass over X and a host sync) outside them too, as the validation:
    # inside turbo_gmm.fit it cost up to +25% per iteration at 4M_32_32 and doubled 20K's (Table 1 at 1c3b02c)
    warn_if_lift_inexact(X, params[1], params[2], center, precision, "initial")

    def run() -> Fit:
        r = turbo_gmm.fit(X, params, n_iter, reg_covar=opts["reg_covar"], algorithm=algorithm, precision=precision,
                        center=center, lift_check=False)
        return Fit(r.weights, r.means, r.variances, n_iter=len(r.log_likelihoods),
                   info={"algorithm": r.algorithm, "kernel": r.kernel, "precision": r.precision, "n_floored": r.n_floored,
                         "device": str(X.device)})

    return run


def _prepare_full(X, init, n_iter, opts, algorithm, precision):
    import torch

    from turbo_gmm import full
    from turbo_gmm.diag.em import data_center, warn_if_lift_inexact
    from turbo_gmm.records import Fit

    params = (torch.as_tensor(init.weights, device=X.device), torch.as_tensor(init.means, device=X.device),
              full.precisions_cholesky(torch.as_tensor(init.covariances, device=X.device)))
    center = data_center(X, True)
    dataflow = opts.get("dataflow", "auto")
    moments = {"asked": opts.get("moments", "auto")}

    def run() -> Fit:
        r = full.fit(X, params, n_iter, reg_covar=opts["reg_covar"], algorithm=algorithm, dataflow=dataflow,
                     precision=precision, center=center, moments=moments.get("ran", moments["asked"]))
        moments["ran"] = r.moments  # the timed fits run what the warm-up needed (not its failed first attempt)
        return Fit(r.weights, r.means, None, n_iter=len(r.log_likelihoods), covariances=r.covariances,
                   info={"algorithm": r.algorithm, "dataflow": r.dataflow, "precision": r.precision,
                         "graphed": r.graphed, "device": str(X.device), "moments": r.moments,
                         "moments_asked": moments["asked"]})

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """``turbo_gmm.GaussianMixture(covariance_type=opts["covariance_type"])`` ("diag" or "full", the estimator's
    default) with its defaults (``init_params="kmeans"``; option
    ``init_backend``: "sklearn" for scikit-learn's own draws, the turbo_gmm_sklearn_init arm),
    fitted from the host array and from the device tensor; the split is the estimator's own
    ``fit_profile_`` (CUDA events on the GPU, the host clock elsewhere)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from arms import fitted
    from turbo_gmm import GaussianMixture

    covariance_type = opts.get("covariance_type", "diag")

    def fitter(X):
        def run():
            gm = GaussianMixture(n_components=K, covariance_type=covariance_type, tol=opts["tol"],
                                 max_iter=opts["max_iter"],
                                 reg_covar=opts["reg_covar"], random_state=opts["seed"],
                                 algorithm=opts.get("algorithm", "auto"), precision=opts.get("precision", "tf32x3"),
                                 init_backend=opts.get("init_backend", "auto"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # converged_ is recorded instead
                gm.fit(X)
            info = {"algorithm": gm.algorithm_, "precision": gm.precision_, "backend": gm.backend_,
                    "init_params": gm.init_params, "init_backend": gm.init_backend_, "converged": bool(gm.converged_),
                    "lower_bound": float(gm.lower_bound_)}
            return (fitted(covariance_type, gm.weights_, gm.means_, gm.covariances_, int(gm.n_iter_), info),
                    gm.fit_profile_)
        return run

    fits = {"host": fitter(X_host)}
    if X_device is not None:
        fits["device"] = fitter(X_device)
    return fits
