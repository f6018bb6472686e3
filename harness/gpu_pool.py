"""One GPU per Hydra job on a multi-GPU node: a Hydra callback over a lock-file pool.

The joblib launcher runs jobs in a pool of worker processes and exposes no worker
index, and a worker runs many jobs in turn, so a GPU cannot be tied to a worker.
Instead every job, when it starts, takes the first free GPU of the pool by an
exclusive non-blocking ``flock`` on ``<lock_dir>/gpu<i>.lock``, sets
``CUDA_VISIBLE_DEVICES=<i>`` (the runner's worker subprocess inherits it; the
runner itself never touches CUDA), and releases it when the job ends. A job that
finds every GPU taken waits; a worker that dies releases its lock with its file
descriptor. Set ``hydra.launcher.n_jobs`` to the number of GPUs.

    python -m harness -m experiment=table1 hydra/launcher=gpu_joblib hydra.launcher.n_jobs=8

``python -m harness.gpu_pool`` prints the launcher overrides that spread a sweep over the GPUs this
process sees (what ``make reproduce`` adds; ``GPUS=0,1`` there sets CUDA_VISIBLE_DEVICES), nothing
for one GPU; ``--list`` prints those GPUs' ids.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from hydra.experimental.callback import Callback


def visible_gpus() -> list[str]:
    """GPU ids this process may hand out: CUDA_VISIBLE_DEVICES if set, else every GPU NVML sees."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVIDIA driver: a CPU node, nothing to pin
        return []


def launcher_overrides(gpus: list[str]) -> list[str]:
    """Hydra overrides that spread a sweep over ``gpus``: the gpu_joblib launcher, one job per GPU
    (the pool is CUDA_VISIBLE_DEVICES, else every GPU NVML sees); none for one GPU or none, where
    Hydra's basic launcher runs the cells one after another."""
    return ["hydra/launcher=gpu_joblib", f"hydra.launcher.n_jobs={len(gpus)}"] if len(gpus) > 1 else []


class GpuPool(Callback):
    """Hydra callback: ``on_job_start`` takes a GPU, ``on_job_end`` gives it back."""

    def __init__(self, lock_dir: str, gpus=None, poll_s: float = 0.2):
        self.lock_dir = str(lock_dir)
        self.gpus = [str(g) for g in gpus] if gpus is not None else None
        self.poll_s = float(poll_s)
        self._held = None  # (file, gpu, previous CUDA_VISIBLE_DEVICES); only in the job's process

    def acquire(self) -> str | None:
        """Block until a GPU of the pool is free; pin this process (and its children) to it."""
        gpus = self.gpus if self.gpus is not None else visible_gpus()
        if not gpus:
            return None
        Path(self.lock_dir).mkdir(parents=True, exist_ok=True)
        while True:
            for gpu in gpus:
                f = open(Path(self.lock_dir) / f"gpu{gpu}.lock", "w")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    f.close()
                    continue
                self._held = (f, gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
                os.environ["CUDA_VISIBLE_DEVICES"] = gpu
                return gpu
            time.sleep(self.poll_s)

    def release(self) -> None:
        if self._held is None:
            return
        f, _, previous = self._held
        self._held = None
        if previous is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = previous
        f.close()  # closing the descriptor drops the flock

    def on_job_start(self, config, **kwargs) -> None:
        gpu = self.acquire()
        if gpu is not None:
            print(f"[gpu_pool] job {config.hydra.job.num} on GPU {gpu} (pid {os.getpid()})", flush=True)

    def on_job_end(self, config, job_return, **kwargs) -> None:
        self.release()

    def __getstate__(self):  # the launcher pickles callbacks to its workers: never a held lock
        return {**self.__dict__, "_held": None}


if __name__ == "__main__":
    print(",".join(visible_gpus()) if "--list" in sys.argv[1:] else " ".join(launcher_overrides(visible_gpus())))
