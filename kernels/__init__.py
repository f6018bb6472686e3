"""Turbo-GMM: fused Triton kernels for diagonal-covariance Gaussian-mixture EM.

``em_step`` runs one iteration, ``fit`` a fixed number; ``choose_algorithm``
is the dispatch rule between Algorithm 2 (one sweep) and Algorithm 3 (two passes).
``GaussianMixture`` is the scikit-learn-compatible estimator on top of them.
"""
from kernels.dispatch import choose_algorithm
from kernels.em import FitResult, StepResult, em_step, fit
from kernels.launch import LaunchConfig

__all__ = ["em_step", "fit", "choose_algorithm", "LaunchConfig", "StepResult", "FitResult", "GaussianMixture"]


def __getattr__(name):
    """``GaussianMixture`` is imported on first use: it pulls in scikit-learn, which the
    benchmark workers importing the kernels do not need."""
    if name == "GaussianMixture":
        from kernels.estimator import GaussianMixture

        return GaussianMixture
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
