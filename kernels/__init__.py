"""Turbo-GMM: fused Triton kernels for diagonal-covariance Gaussian-mixture EM.

``em_step`` runs one iteration, ``fit`` a fixed number; ``choose_algorithm``
is the dispatch rule between Algorithm 2 (one sweep) and Algorithm 3 (two passes).
``GaussianMixture`` is the scikit-learn-compatible estimator on top of them.
"""
import importlib

_PUBLIC = {"em_step": ".em", "fit": ".em", "StepResult": ".em", "FitResult": ".em",
           "choose_algorithm": ".dispatch", "LaunchConfig": ".launch",
           "GaussianMixture": ".estimator"}

__all__ = list(_PUBLIC)


def __getattr__(name):
    """The public names are imported on first use: ``turbo_gmm.records`` and ``turbo_gmm.datasets``,
    which every benchmark worker imports, must not pull in Triton (or, for ``GaussianMixture``,
    scikit-learn) and with them the memory of a process that measures another library."""
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    raise AttributeError(f"module 'turbo_gmm' has no attribute {name!r}")
