"""Peak memory of one cell, measured in the worker the same way for every arm.

Primary meter, by the arm's ``MEMORY`` source (arms/__init__.py):
- ``torch``: ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``
  at the end of the warm-up, so the peak covers the timed repetitions and includes X
  and the init, which are already resident. On a CPU it falls back to ``rss``.
- ``jax``: ``peak_bytes_in_use`` of ``jax.devices()[0].memory_stats()`` (not resettable:
  covers the warm-up too, which allocates the same). Falls back to ``rss`` where JAX
  reports no statistics (CPU).
- ``rss``: the process's peak resident set (``ru_maxrss``) over its whole life: X, the
  interpreter and the libraries included.
- ``arm``: the module's own ``peak_bytes()`` (e.g. RMM statistics for cuVS).

Cross-check (GPU only): :class:`NvmlSampler` polls NVML's device-wide *used* memory
every ~5 ms during the timed repetitions. Its baseline is read after the worker's
CUDA context exists but before X is built and before the arm is imported, so
``nvml_peak_mb`` = (max used during the reps) - baseline = X + init + everything the
arm holds on the device, including allocator caches, memory pools and any second
CUDA context (JAX, CuPy). Other processes on the GPU would inflate it.
"""
from __future__ import annotations

import resource
import threading

MB = 1 << 20


def rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class PeakMeter:
    """The arm's primary peak-memory source; ``read()`` returns (bytes, source)."""

    def __init__(self, source: str, device: str, arm_module):
        self.source, self.device, self.arm = source, device, arm_module
        if source == "torch" and device != "cuda":
            self.source = "rss"
        if source == "jax" and self._jax_stats() is None:
            self.source = "rss"

    @staticmethod
    def _jax_stats():
        import jax
        return jax.devices()[0].memory_stats()

    def reset(self) -> None:
        if self.source == "torch":
            import torch
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def read(self) -> tuple[int, str]:
        if self.source == "torch":
            import torch
            return int(torch.cuda.max_memory_allocated()), "torch"
        if self.source == "jax":
            return int(self._jax_stats()["peak_bytes_in_use"]), "jax"
        if self.source == "arm":
            return int(self.arm.peak_bytes()), "arm"
        if self.source == "rss":
            return rss_peak_bytes(), "rss"
        raise ValueError(f"unknown MEMORY source {self.source!r}; expected torch, jax, rss or arm")


class NvmlSampler:
    """Background thread: max NVML used-memory of the cell's GPU minus a baseline."""

    def __init__(self, interval_s: float = 0.005):
        import pynvml
        import torch

        pynvml.nvmlInit()
        self._nvml = pynvml
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        uuid = str(getattr(props, "uuid", "") or "")
        self.handle = (pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
                       if uuid else pynvml.nvmlDeviceGetHandleByIndex(0))
        self.interval_s = interval_s
        self.baseline = self._used()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = None

    def _used(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._used())
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self.peak = self._used()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> int:
        """Stop sampling; bytes above the baseline at the sampled peak."""
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._used())
        return self.peak - self.baseline
