"""JAX's and Triton's compilation caches (harness/caches.py): the worker points the libraries at the
device's folders before they load, env.json reports them, a second run hits them (no entry written
again) and changes no result, and they are no part of a cell's identity."""
import importlib.util
import json
import os

import numpy as np
import pytest

from harness.cell import CellSpec
from harness.runner import run_cell


def _usage_at_start(results, device="testdev"):
    return json.loads((results / device / "env.json").read_text())["caches"]


def test_the_caches_are_no_part_of_a_cells_identity(make_cfg):
    a = CellSpec.from_cfg(make_cfg("arm=gmmx", "cache_dir=/caches/a", "running_cells_dir=/running/a"))
    b = CellSpec.from_cfg(make_cfg("arm=gmmx", "cache_dir=/caches/b", "running_cells_dir=/running/b"))
    assert a == b and a.key == b.key


def test_the_worker_points_triton_and_jax_at_the_device_caches_and_env_json_reports_them(tmp_path, make_cfg):
    cache = tmp_path / "cache"
    rec = run_cell(make_cfg("arm=planted_caches", f"cache_dir={cache}", f"running_cells_dir={tmp_path / 'running'}"))
    assert rec["status"] == "ok"
    triton_dir, jax_dir = str(cache / "testdev" / "triton"), str(cache / "testdev" / "jax")
    assert rec["info"]["TRITON_CACHE_DIR"] == rec["info"]["triton_cache_dir"] == triton_dir  # as Triton reads it
    assert rec["info"]["JAX_COMPILATION_CACHE_DIR"] == jax_dir
    assert _usage_at_start(tmp_path) == {"jax": {"path": jax_dir, "files": 0, "bytes": 0},
                                         "triton": {"path": triton_dir, "files": 0, "bytes": 0}}


def _entries(folder):
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _twice(tmp_path, make_cfg, arm, cache_name):
    """Run the arm's cell, then again with force=true and env.json re-measured (as make reproduce
    FORCE=1 does). Asserts that the first filled the cache, that the second began with it warm, added
    no file to it and changed no result; returns the cache's entries (path -> mtime) after each run
    and the worker's log of each run."""
    cache = tmp_path / "cache" / "testdev" / cache_name
    overrides = [f"arm={arm}", "shape=tiny_7_5", f"cache_dir={tmp_path / 'cache'}",
                 f"running_cells_dir={tmp_path / 'running'}"]
    first = run_cell(make_cfg(*overrides))
    cells = tmp_path / "testdev" / "adhoc" / "cells"
    logs = [(cells / f"{first['cell']}.log").read_text()]
    with np.load(cells.parent / first["params_file"]) as z:
        params = {k: z[k] for k in z.files}
    entries = [_entries(cache)]
    assert first["status"] == "ok" and first["gate"] == "valid" and entries[0]  # the first run compiled into it
    (tmp_path / "testdev" / "env.json").unlink()
    second = run_cell(make_cfg(*overrides, "force=true"))
    logs.append((cells / f"{second['cell']}.log").read_text())
    entries.append(_entries(cache))
    assert _usage_at_start(tmp_path)[cache_name]["files"] == len(entries[0])  # warm when the second run began
    assert set(entries[1]) == set(entries[0])  # no new compilation
    for k in ("cell", "gate", "ll_per_point", "sum_weights", "data_checksum", "n_iter_reported"):
        assert second[k] == first[k], k
    with np.load(cells.parent / second["params_file"]) as z:
        assert set(z.files) == set(params) and all(np.array_equal(z[k], params[k]) for k in params)
    return entries, logs


@pytest.mark.skipif(importlib.util.find_spec("gmmx") is None, reason="gmmx (JAX) is not installed")
def test_a_second_run_hits_the_jax_cache_and_changes_no_result(tmp_path, make_cfg, monkeypatch):
    monkeypatch.setenv("JAX_LOGGING_LEVEL", "DEBUG")  # JAX logs each cache write and hit (to the cell's log)
    _, (first, second) = _twice(tmp_path, make_cfg, "gmmx", "jax")
    writes, hit = "to persistent compilation cache with key", "Persistent compilation cache hit for"
    assert first.count(writes) >= 1 and hit not in first
    assert second.count(hit) >= first.count(writes) and writes not in second  # JAX skips rewriting a key: read the log


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="Triton compiles kernels only for a GPU")
@pytest.mark.skipif(bool(os.environ.get("TRITON_INTERPRET")), reason="the Triton interpreter compiles nothing")
def test_a_second_run_hits_the_triton_cache_and_changes_no_result(tmp_path, make_cfg):
    (first, second), _ = _twice(tmp_path, make_cfg, "turbo_gmm", "triton")
    assert second == first  # a miss would have replaced its files (Triton writes a new file over the old)
