"""The records every floor above the library exchanges: a shared starting point, a returned fit.

They live here, on the ground floor, because their users stand on every floor above it: the
arms return a :class:`Fit` from an :class:`Init` (the contract, documented in ``arms/__init__.py``),
the harness builds the :class:`Init` (:func:`turbo_gmm.datasets.shared_init`) and stores the fit
through :func:`to_numpy`, and the library's data-parallel EM (:mod:`turbo_gmm.distributed`) takes
an :class:`Init`. NumPy only: importing the records pulls in neither torch nor Triton, so a
library arm's worker measures its own memory, not ours.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Init:
    """The shared starting point of every arm: float32 host arrays. ``covariances`` is set for a full-covariance
    cell only; its diagonals are ``variances``."""

    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, d)
    variances: np.ndarray  # (K, d)
    covariances: np.ndarray | None = None  # (K, d, d)


@dataclass
class Fit:
    """Final parameters as the library returns them (torch, JAX or NumPy arrays).

    ``n_iter`` is the iteration count the library itself reports (``None`` when it
    reports none); the harness checks it against the requested count. ``info`` holds
    per-row facts the arm knows best (algorithm, precision, device, autotune config).
    A full-covariance fit returns ``covariances`` (K, d, d) and ``variances=None``.
    """

    weights: Any | None
    means: Any
    variances: Any | None
    n_iter: int | None = None
    info: dict = field(default_factory=dict)
    covariances: Any | None = None


def to_numpy(a) -> np.ndarray | None:
    """Host float64 copy of a torch/JAX/NumPy array (None passes through)."""
    if a is None:
        return None
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)
