"""Competing GMM implementations behind one small contract.

An arm is one module here plus one YAML file in ``conf/arm/``. The module exposes

``MEMORY``
    where the worker reads the arm's peak memory: ``"torch"`` (caching allocator),
    ``"jax"`` (``memory_stats()``), ``"rss"`` (host process) or ``"arm"`` (the module's
    own ``peak_bytes()``, e.g. RMM statistics for cuVS).
``available() -> str | None``
    ``None`` when the arm can run here, else the reason it cannot (library missing,
    no GPU, source checkout missing). Never raises.
``prepare(X, init, n_iter, opts) -> Callable[[], Fit]``
    untimed set-up (imports, model construction, data conversion). The returned
    callable runs exactly ``n_iter`` EM iterations starting from ``init`` every time
    it is called, returns only once the device work is finished, and returns a
    :class:`Fit`. The harness calls it once untimed (warm-up: JIT, autotuning) and
    then ``reps`` times under its clock; timing and memory live in the harness.

``X`` is a float32 contiguous torch tensor on the cell's device, ``init`` an
:class:`Init`, ``opts`` the arm's ``options`` mapping from its YAML plus
``reg_covar`` and ``numerics``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Init:
    """The shared starting point of every arm: float32 host arrays."""

    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, d)
    variances: np.ndarray  # (K, d)


@dataclass
class Fit:
    """Final parameters as the library returns them (torch, JAX or NumPy arrays).

    ``n_iter`` is the iteration count the library itself reports (``None`` when it
    reports none); the harness checks it against the requested count. ``info`` holds
    per-row facts the arm knows best (algorithm, precision, device, autotune config).
    """

    weights: Any | None
    means: Any
    variances: Any
    n_iter: int | None = None
    info: dict = field(default_factory=dict)


Prepared = Callable[[], Fit]


def load(module_name: str):
    """Import an arm module by dotted name; ImportError propagates to the caller."""
    return importlib.import_module(module_name)


def to_numpy(a) -> np.ndarray | None:
    """Host float64 copy of a torch/JAX/NumPy array (None passes through)."""
    if a is None:
        return None
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)
