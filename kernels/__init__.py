"""Turbo-GMM: Gaussian-mixture EM on fused Triton kernels, with scikit-learn's API.

``GaussianMixture`` is the estimator (full, tied, diag and spherical covariances, GPU or CPU) and ``KMeans``
scikit-learn's k-means on the same devices; ``fit`` and ``em_step`` run EM on diagonal covariances directly on
device tensors; ``choose_algorithm`` and ``LaunchConfig`` are the kernels' dispatch rule and launch knobs. Full
and tied covariances' own kernel entry points are in ``turbo_gmm.full`` and ``turbo_gmm.tied``;
``turbo_gmm.streaming`` and ``turbo_gmm.distributed`` fit data larger than the device or spread over ranks.
Everything else is internal."""
import importlib

__version__ = "0.2.0"

_PUBLIC = {"em_step": ".diag.em", "fit": ".diag.em", "StepResult": ".diag.em", "FitResult": ".diag.em",
           "choose_algorithm": ".dispatch", "LaunchConfig": ".launch",
           "GaussianMixture": ".mixture", "KMeans": ".cluster", "Float32LiftWarning": ".diag.precision",
           "Float32RangeError": ".diag.em", "IllDefinedCovarianceError": ".diag.mstep"}

__all__ = list(_PUBLIC)


def __getattr__(name):
    """The public names are imported on first use: ``turbo_gmm.records`` and ``turbo_gmm.datasets``,
    which every benchmark worker imports, must not pull in Triton (or, for ``GaussianMixture`` and
    ``KMeans``, scikit-learn) and with them the memory of a process that measures another library."""
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    raise AttributeError(f"module 'turbo_gmm' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
