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

``X`` is a float32 contiguous torch tensor on the cell's device, ``init`` a
:class:`kernels.records.Init` (weights (K,), means (K, d), variances (K, d), float32 host
arrays), ``opts`` the arm's ``options`` mapping from its YAML plus ``reg_covar`` and
``numerics``. A :class:`kernels.records.Fit` holds the final weights (or ``None``), means and
variances as the library returns them (torch, JAX or NumPy arrays), the iteration count the
library reports and per-row ``info``. The records sit in ``kernels/records.py``, on the
ground floor, because the harness, the library's distributed EM and every arm use them.
"""
from __future__ import annotations

import importlib


def load(module_name: str):
    """Import an arm module by dotted name; ImportError propagates to the caller."""
    return importlib.import_module(module_name)

