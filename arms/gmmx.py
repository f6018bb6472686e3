"""gmmx 0.7 (JAX): ``EMFitter.fit`` on a ``GaussianMixtureModelJax`` built from the shared init.

Driven as arms/README.md describes: ``from_squeezed(means, covariances=V,
weights, covariance_type="diag")`` (gmmx's diagonal "covariances" are variances)
and ``EMFitter(max_iter=n_iter, tol=0.0, reg_covar)``. ``fit`` is one jitted
``lax.while_loop`` whose condition is ``n_iter < max_iter and |ll - ll_prev| >= tol``:
with tol=0 it runs exactly n_iter iterations, no extra E-step, **unless the
log-likelihood turns NaN: then it stops early and still says converged**. That is
the silent failure to watch; ``Fit.n_iter`` is gmmx's own count, which the
harness compares with the requested one. gmmx's M-step divides by
``n_k + 10*eps32``, not eps64.

X reaches JAX without a host round trip on the GPU (DLPack, zero copy: X's
buffer belongs to torch's allocator, so JAX's ``peak_bytes_in_use`` does not
include it) and through NumPy on the CPU. Matmul precision is "highest" (no
TF32): the worker sets ``JAX_DEFAULT_MATMUL_PRECISION=highest`` and this module
also sets the config before anything is traced. The first call compiles (10-100 s
at large shapes on an H200); the harness's untimed warm-up absorbs it. Each call
blocks on the results before returning (jitted code is asynchronous).
Full covariances: ``from_squeezed(..., covariances=(K, d, d), covariance_type="full")``, the same
fitter; gmmx returns the (K, d, d) covariance values.
"""
from __future__ import annotations

import os

from turbo_gmm.records import Fit, Init

MEMORY = "jax"
COVARIANCE_TYPES = ("diag", "full")


def available() -> str | None:
    try:
        import gmmx  # noqa: F401
        import jax  # noqa: F401
    except ImportError as e:
        return f"gmmx/jax not installed: {e}"
    return None


def prepare(X, init: Init, n_iter: int, opts: dict):
    import jax
    from gmmx import EMFitter, GaussianMixtureModelJax

    jax.config.update("jax_default_matmul_precision", "highest")
    if X.is_cuda:
        x = jax.dlpack.from_dlpack(X.detach())
        transfer = "dlpack (zero copy; X is in torch's allocator, not in JAX's peak)"
    else:  # stay on the CPU like X, even where JAX's default device is a GPU
        x = jax.device_put(X.detach().numpy(), jax.devices("cpu")[0])
        transfer = "numpy"
    device = next(iter(x.devices()))
    covariance_type = opts.get("covariance_type", "diag")
    cov0 = init.covariances if covariance_type == "full" else init.variances
    w, m, v = (jax.device_put(a, device) for a in (init.weights / init.weights.sum(), init.means, cov0))
    gmm0 = GaussianMixtureModelJax.from_squeezed(means=m, covariances=v, weights=w, covariance_type=covariance_type)
    fitter = EMFitter(max_iter=n_iter, tol=0.0, reg_covar=float(opts["reg_covar"]))
    K, d = init.means.shape
    info = {
        "algorithm": "materializing (XLA)",
        "precision": "fp32",
        "device": f"{device.platform} (jax {jax.__version__})",
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "x_transfer": transfer,
    }

    def run() -> Fit:
        res = fitter.fit(x, gmm0)
        out = (res.gmm.weights.reshape(K), res.gmm.means.reshape(K, d),
               res.gmm.covariances.values.reshape(cov0.shape), res.n_iter)
        out = jax.block_until_ready(out)
        if covariance_type == "full":
            return Fit(out[0], out[1], None, n_iter=int(out[3]), info=info, covariances=out[2])
        return Fit(out[0], out[1], out[2], n_iter=int(out[3]), info=info)

    return run


def prepare_e2e(X_host, X_device, K, opts):
    """gmmx's own fitter: ``GaussianMixtureModelJax.from_k_means`` (gmmx's initialization: scikit-learn's
    ``KMeans`` on the host, gmmx's default ``n_init=10``, then one M-step from the hard labels), then
    ``EMFitter(max_iter, tol, reg_covar).fit``, of the cell's covariance type (gmmx's "diag" or "full"). gmmx's
    ``tol`` is on the change of the mean
    log-likelihood per point, scikit-learn's rule. Split: ``transfer`` (the host array put on the
    device; a device tensor is passed by DLPack, zero copy), ``init`` and ``em`` each timed to
    ``block_until_ready``."""
    import time

    import jax
    from gmmx import EMFitter, GaussianMixtureModelJax

    from arms import fitted

    jax.config.update("jax_default_matmul_precision", "highest")
    covariance_type = opts.get("covariance_type", "diag")
    device = jax.devices("gpu")[0] if X_device is not None else jax.devices("cpu")[0]
    fitter = EMFitter(max_iter=int(opts["max_iter"]), tol=float(opts["tol"]), reg_covar=float(opts["reg_covar"]))
    info = {"algorithm": "materializing (XLA)", "precision": "fp32", "device": f"{device.platform} (jax {jax.__version__})",
            "init": "gmmx from_k_means (scikit-learn KMeans, n_init=10)"}

    def fit(x, split):
        t0 = time.perf_counter()
        gmm0 = jax.block_until_ready(GaussianMixtureModelJax.from_k_means(
            x, K, reg_covar=float(opts["reg_covar"]), covariance_type=covariance_type, random_state=opts["seed"]))
        t1 = time.perf_counter()
        res = fitter.fit(x, gmm0)
        d = x.shape[1]
        cov_shape = (K, d, d) if covariance_type == "full" else (K, d)
        w, m, v, n_iter = jax.block_until_ready((res.gmm.weights.reshape(K), res.gmm.means.reshape(K, d),
                                                 res.gmm.covariances.values.reshape(cov_shape), res.n_iter))
        split.update(init=t1 - t0, em=time.perf_counter() - t1)
        return fitted(covariance_type, w, m, v, int(n_iter), dict(info, converged=bool(res.converged))), split

    def from_host():
        t0 = time.perf_counter()
        x = jax.block_until_ready(jax.device_put(X_host, device))
        return fit(x, {"transfer": time.perf_counter() - t0})

    fits = {"host": from_host}
    if X_device is not None:
        fits["device"] = lambda: fit(jax.dlpack.from_dlpack(X_device.detach()), {})
    return fits
