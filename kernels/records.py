"""The records every floor above the library exchanges: a shared starting point (:class:`Init`) and a returned
fit (:class:`Fit`). NumPy only, so importing them pulls in neither torch nor Triton."""
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
    """Final parameters as the library returns them (torch, JAX or NumPy arrays); ``n_iter`` as the library
    reports it (None if it does not); ``info`` per-row facts (algorithm, precision, device, config); a full
    fit has ``covariances`` (K, d, d) and ``variances=None``."""

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
