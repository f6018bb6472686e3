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

``prepare_e2e(X_host, X_device, K, opts) -> {"host": Callable, "device": Callable}`` (optional)
    the end-to-end protocol (harness/PROTOCOL.md, "The e2e protocol"): the library's own fit
    of K components of ``opts["covariance_type"]`` ("diag" or "full", the library's own type of that name) from
    its own default initialization to ``opts["tol"]`` within
    ``opts["max_iter"]`` iterations (``opts["seed"]`` its random state), from the float32 host
    NumPy array ``X_host`` and, where the arm takes one, the device tensor ``X_device`` (None on a
    CPU). Each callable returns ``(Fit, split)``: ``Fit.n_iter`` the iterations taken, ``split``
    the seconds of the phases the library lets the arm see (any of transfer, validation, init,
    em, other; the rest stays unsplit, never estimated). An arm without it is
    ``unavailable: no end-to-end fit`` in that protocol.

``COVARIANCE_TYPES`` (default ``("diag",)``)
    the covariance types the module fits, through ``prepare`` and ``prepare_e2e`` alike (``opts["covariance_type"]``);
    a cell of another type is the row ``unsupported: covariance_type=<type>``. A full fit's :class:`Fit` has
    ``covariances`` (K, d, d) and ``variances=None`` (:func:`fitted`).

``X`` is a float32 contiguous torch tensor on the cell's device, ``init`` a
:class:`turbo_gmm.records.Init` (weights (K,), means (K, d), variances (K, d), float32 host
arrays), ``opts`` the arm's ``options`` mapping from its YAML plus ``reg_covar`` and
``numerics``. A :class:`turbo_gmm.records.Fit` holds the final weights (or ``None``), means and
variances as the library returns them (torch, JAX or NumPy arrays), the iteration count the
library reports and per-row ``info``. The records sit in ``kernels/records.py``, on the
ground floor, because the harness, the library's distributed EM and every arm use them.

The k-means arms (``arms/kmeans_*.py``, ``protocol: kmeans``) have a contract of their own, ``prepare_lloyd`` and
``prepare_fit`` returning a :class:`arms.kmeans.KMeansFit`: see ``arms/kmeans.py``.
"""
from __future__ import annotations

import importlib


def load(module_name: str):
    """Import an arm module by dotted name; ImportError propagates to the caller."""
    return importlib.import_module(module_name)


def fitted(covariance_type: str, weights, means, covariances, n_iter, info):
    """The :class:`turbo_gmm.records.Fit` of a fit's parameters: ``covariances`` are the (K, d) variances of a
    diagonal fit, the (K, d, d) covariances of a full one."""
    from turbo_gmm.records import Fit

    if covariance_type == "full":
        return Fit(weights, means, None, n_iter=n_iter, info=info, covariances=covariances)
    return Fit(weights, means, covariances, n_iter=n_iter, info=info)

