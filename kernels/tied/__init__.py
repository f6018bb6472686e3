"""Tied-covariance Gaussian-mixture EM on fused Triton kernels: one shared covariance, the score as the
unit-variance diagonal one on whitened rows (kernels/tied/tiles.py). ``em_step``, ``fit`` and
``estep_statistics`` as in kernels/full."""
from .em import em_step, estep_statistics, fit

__all__ = ["em_step", "fit", "estep_statistics"]
