"""Compilation caches that make a second run fast and change no result, one folder per device.

    <cache_dir>/<device>/jax      JAX's persistent compilation cache (JAX_COMPILATION_CACHE_DIR)
    <cache_dir>/<device>/triton   Triton's kernel cache (TRITON_CACHE_DIR)

``cache_dir`` (conf/config.yaml) is ``$XDG_CACHE_HOME/turbo-gmm`` (``~/.cache/turbo-gmm``), outside
the repository. The runner hands :func:`environment` to the worker, which sets it before any library
loads; JAX then caches every compilation (no minimum compile time), Triton every compiled kernel.
A hit returns the binary the compilation would have produced, so the caches are no part of a cell's
identity (its digest), and they hold only compiles: a warm-up still runs, and autotuners (Flash-GMM's,
Triton's) still time their candidates. What they save shows in ``wall_s``, never in ``rep_seconds``.
``env.json`` reports each cache's path, files and bytes when it is written (:func:`usage`).
Delete the folder for a cold start, or run an e2e cell with ``e2e.cold_cache=true``: its worker gets a fresh
temporary folder (:func:`cold_root`), removed when the cell ends. Every record says whether its worker found the
caches empty (:func:`state`: ``cache_state`` "empty" or "warm").

    python -m harness.caches results/h200 [overrides]   # that device's caches and their sizes now
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

CACHES = {"jax": "JAX_COMPILATION_CACHE_DIR", "triton": "TRITON_CACHE_DIR"}


def device_root(cache_dir: str | Path, device_dir: Path) -> Path:
    """The caches of the device whose results are in ``device_dir`` (results/<device>)."""
    return Path(cache_dir).expanduser() / Path(device_dir).name


def environment(root: Path) -> dict[str, str]:
    """The variables that point JAX and Triton at the caches under ``root``."""
    return {**{var: str(Path(root) / name) for name, var in CACHES.items()},
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def usage(root: Path) -> dict:
    """Each cache's path, and how many files and bytes it holds (0 when it does not exist yet)."""
    out = {}
    for name in CACHES:
        path = Path(root) / name
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
        out[name] = {"path": str(path), "files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    return out


def state(use: dict) -> str:
    """"empty" where neither cache of ``use`` (:func:`usage`) holds a file (or exists), else "warm": whether a
    cell's compilations could hit anything when it started."""
    return "warm" if any(u["files"] for u in use.values()) else "empty"


def cold_root(key: str) -> Path:
    """A fresh empty folder for one cell's caches (a cold start), under the system's temporary folder; the
    caller removes it."""
    return Path(tempfile.mkdtemp(prefix=f"turbo_gmm_cold_cache_{key}_"))


if __name__ == "__main__":
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[1] / "conf"), version_base="1.3"):
        cache_dir = compose("config", overrides=sys.argv[2:]).cache_dir
    for name, u in usage(device_root(cache_dir, Path(sys.argv[1]))).items():
        print(f"  {name} cache: {u['path']} ({u['files']} files, {u['bytes'] / 1e6:.0f} MB)")
