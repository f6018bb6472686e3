"""The k-means arms' contract (``arms/kmeans_*.py``, ``conf/arm/kmeans_*.yaml``, ``protocol: kmeans``).

A k-means arm module exposes

``MEMORY``
    where the worker reads its peak memory, as for the GMM arms (arms/__init__.py).
``available() -> str | None``
    ``None`` when the arm can run here, else why not (library missing or not importable, no GPU). Never raises.
``prepare_lloyd(X, X_host, seeds, n_iter, opts) -> Callable[[], KMeansFit]``
    untimed set-up; the callable runs the library's Lloyd from ``seeds`` (K, d) for ``n_iter`` iterations with
    its early stop off (tol 0: only a fixed point, where no label changes, may end it sooner) and returns the
    centers it ends with, every call starting from ``seeds`` again.
``prepare_fit(X, X_host, K, opts) -> Callable[[], KMeansFit]``
    the library's own fit of K clusters end to end, as a user calls it: its own seeding, its own stop rule and
    default tolerance, ``opts["seed"]`` its random state where it takes one.

``X`` is the cell's float32 contiguous torch tensor on its device (CUDA on a GPU), ``X_host`` the same data as a
float32 NumPy array on the host (for libraries that take host arrays), ``seeds`` a float32 torch tensor (K, d) on
X's device (rows of X: the shared k-means++ seeds, harness/kmeans.py), ``opts`` the arm's ``options`` plus
``numerics`` and ``seed``. Each callable returns only once the device work is finished. The harness does the
rest, the same for every arm (harness/worker.py: warm-ups, the clock, peak memory; gate/kmeans.py: the float64
inertia of the returned centers and the verdict).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class KMeansFit:
    """What a k-means arm returns: the centers (K, d) as the library gives them (torch or NumPy), the
    iterations it reports (None where it reports none) and per-row ``info``."""
    centers: Any
    n_iter: int | None
    info: dict = field(default_factory=dict)


def cuda_reason() -> str | None:
    """None where torch sees a CUDA device, else the reason a GPU-only library cannot run."""
    try:
        import torch
    except ImportError as e:
        return f"needs torch ({e})"
    return None if torch.cuda.is_available() else "needs a CUDA GPU; none is visible"


def import_reason(module: str) -> str | None:
    """None where ``module`` imports, else its error in one line (a missing package, a missing shared library)."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - ImportError, OSError of a shared library, a CUDA init error: all reasons
        return f"{module} does not import: {type(e).__name__}: {e}"
    return None
