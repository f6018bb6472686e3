"""The environment a run measured in: results/<device>/env.json and the device label.

On a GPU, env.json also holds probes measured at the start of the run (HBM read
bandwidth, device-to-device copy bandwidth, fp32 / TF32 / bf16 / fp64 matmul rates; fp64's is the
float64 tensor cores' DMMA rate, issue 20's ceiling for precision fp64) that the
results CSV divides by for ``hbm_fraction`` and ``roofline_fraction``: measured on the
same device, not copied from a datasheet.

It also reports the compilation caches the cells will use (harness/caches.py): their paths and
how many files and bytes they held when env.json was written.

    python -m harness.env results/h200/env.json [--caches DIR] [--no-probes]
"""
from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from harness import caches

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["torch", "triton", "jax", "jaxlib", "gmmx", "scikit-learn", "pomegranate", "torchgmm",
            "cuvs-cu12", "cuvs-cu13", "cupy-cuda12x", "cupy-cuda13x", "numpy", "scipy", "hydra-core",
            "omegaconf", "pandas", "nvidia-ml-py", "pytorch-lightning", "flash-kmeans", "faiss-gpu-cu12", "faiss-cpu"]
# import names whose __version__ the worker records when the arm actually imported them
MODULES = ["torch", "triton", "jax", "jaxlib", "gmmx", "sklearn", "pomegranate", "torchgmm", "cuvs",
           "cupy", "numpy", "scipy", "pytorch_lightning", "flash_kmeans", "faiss"]


def gpu_name() -> str | None:
    """Name of the first visible GPU via NVML (no CUDA context in the caller), or None."""
    try:
        import pynvml
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return None
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else name
    except Exception:  # no driver, no library, no device: a CPU host
        return None


def device_label() -> str:
    """``h200`` for "NVIDIA H200" (slug of the GPU name without the vendor), else ``<host>-cpu``."""
    name = gpu_name()
    if name is None:
        return f"{socket.gethostname()}-cpu".lower()
    name = re.sub(r"^NVIDIA\s+", "", name)
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def git_commit() -> str:
    """``TURBO_GMM_COMMIT`` if set, else HEAD with ``+dirty`` when tracked files have uncommitted changes.

    Whoever ships a copy of the tree to a GPU node knows which commit it is and says so in
    ``TURBO_GMM_COMMIT``; the copy's own ``.git`` may be missing or stale (0dee9a7's tree ran on 2026-11-30
    with the ``.git`` of b008ea0, so its rows read ``b008ea0+dirty`` for a later commit's tree)."""
    if shipped := os.environ.get("TURBO_GMM_COMMIT"):
        return shipped
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return "none"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def package_versions() -> dict:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def imported_versions() -> dict:
    """Versions of the libraries this process actually imported (the module's
    ``__version__``, else its distribution's metadata: gmmx and torchgmm have none)."""
    def version(m):
        v = getattr(sys.modules[m], "__version__", None)
        if v is None:
            try:
                v = metadata.version(m)
            except metadata.PackageNotFoundError:
                v = "?"
        return str(v)
    return {m: version(m) for m in MODULES if m in sys.modules}


def _time_cuda(fn, reps: int = 5) -> float:
    """Minimum seconds of fn() over reps, after one warm-up, device-synchronized."""
    import torch
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def probes() -> dict:
    """Bandwidth and matmul rates of the current GPU (about ten seconds on an H200)."""
    import torch
    out = {}
    x = torch.rand(1 << 30, device="cuda")  # 4 GiB of float32
    t = _time_cuda(lambda: x.sum())
    out["hbm_read_gb_per_s"] = x.numel() * 4 / t / 1e9
    y = torch.empty_like(x)
    t = _time_cuda(lambda: y.copy_(x))
    out["d2d_copy_gb_per_s"] = 2 * x.numel() * 4 / t / 1e9  # read + write
    del x, y
    n = 8192
    flop = 2 * n**3
    prev = torch.backends.cuda.matmul.allow_tf32
    for key, dtype, tf32 in (("fp32_tflops", torch.float32, False), ("tf32_tflops", torch.float32, True),
                             ("bf16_tflops", torch.bfloat16, False), ("fp64_tflops", torch.float64, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        out[key] = flop / _time_cuda(lambda: a @ b) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def collect(with_probes: bool = True, cache_root: Path | None = None) -> dict:
    env = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "git_commit": git_commit(),
        "packages": package_versions(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if cache_root is not None:
        env["caches"] = caches.usage(cache_root)
    import torch
    env["torch_cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = props.name
        env["gpu_memory_gb"] = round(props.total_memory / 1e9, 1)
        env["sm_count"] = props.multi_processor_count
        try:
            import pynvml
            pynvml.nvmlInit()
            drv = pynvml.nvmlSystemGetDriverVersion()
            env["driver"] = drv.decode() if isinstance(drv, bytes) else drv
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            env["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception as e:  # record why, rather than nothing
            env["driver"] = f"unknown ({type(e).__name__}: {e})"
        if with_probes:
            env["probes"] = probes()
    else:
        env["gpu"] = None
        env["cpu"] = platform.processor() or platform.machine()
        env["cpu_count"] = os.cpu_count()
    return env


def write(path: Path, with_probes: bool = True, cache_root: Path | None = None) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(collect(with_probes, cache_root), indent=2) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    args = sys.argv[2:]
    write(Path(sys.argv[1]), with_probes="--no-probes" not in args,
          cache_root=Path(args[args.index("--caches") + 1]) if "--caches" in args else None)
