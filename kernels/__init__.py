"""Turbo-GMM: fused Triton kernels for diagonal-covariance Gaussian-mixture EM.

``em_step`` runs one iteration, ``fit`` a fixed number; ``choose_algorithm``
is the dispatch rule between Algorithm 2 (one sweep) and Algorithm 3 (two passes).
"""
from kernels.dispatch import choose_algorithm
from kernels.em import FitResult, StepResult, em_step, fit
from kernels.launch import LaunchConfig

__all__ = ["em_step", "fit", "choose_algorithm", "LaunchConfig", "StepResult", "FitResult"]
