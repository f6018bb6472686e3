"""Hydra launchers for parallel sweeps: joblib with one GPU per job (lock-file pool),
submitit in its local mode; parallel cells leave one CSV with every row exactly once."""
import os
import pickle
import re
import subprocess
import sys
import threading
import time

import pytest
from hydra import compose, initialize_config_dir

from harness.gpu_pool import GpuPool
from harness.results import read_csv
from harness.tests.conftest import PLANTED_CONF, REPO

ARMS = ["planted_em", "planted_crash", "planted_early"]


def _sweep(tmp_path, launcher, *extra):
    cmd = [sys.executable, "-m", "harness", "-m", f"hydra/launcher={launcher}", f"hydra.searchpath=[file://{PLANTED_CONF}]",
           f"arm={','.join(ARMS)}", "shape=tiny_7_5", f"results_dir={tmp_path}", "device_label=testdev",
           "experiment_name=par", "env_probes=false", f"hydra.sweep.dir={tmp_path / 'runs'}", *extra]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def _assert_one_row_per_cell(tmp_path):
    rows = read_csv(tmp_path / "testdev" / "par.csv")
    assert sorted(r["arm"] for r in rows) == sorted(ARMS)  # none lost, none duplicated
    assert {r["arm"]: r["status"] for r in rows}["planted_em"] == "ok"
    assert len(list((tmp_path / "testdev" / "par" / "cells").glob("*.json"))) == len(ARMS)


def test_joblib_jobs_run_in_parallel_on_distinct_gpus(tmp_path):
    out = _sweep(tmp_path, "gpu_joblib", "hydra.launcher.n_jobs=3", "hydra.callbacks.gpu_pool.gpus=[0,1,2]",
                 f"hydra.callbacks.gpu_pool.lock_dir={tmp_path / 'locks'}")
    taken = re.findall(r"\[gpu_pool\] job (\d) on GPU (\d) \(pid (\d+)\)", out)
    assert sorted(j for j, _, _ in taken) == ["0", "1", "2"]
    assert len({g for _, g, _ in taken}) == 3 and len({p for _, _, p in taken}) == 3  # concurrent, one GPU each
    _assert_one_row_per_cell(tmp_path)


def test_submitit_local_sweep_and_its_rerun_keep_one_row_per_cell(tmp_path):
    _sweep(tmp_path, "slurm_local")
    _assert_one_row_per_cell(tmp_path)
    assert len(list((tmp_path / "runs" / ".submitit").glob("[0-9]*"))) == len(ARMS)  # one submitit job per cell
    _sweep(tmp_path, "slurm_local")  # every record exists: all skipped, still one row each
    _assert_one_row_per_cell(tmp_path)


def test_slurm_config_asks_one_gpu_per_cell():
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.gpus_per_node == 1 and launcher.tasks_per_node == 1 and launcher.nodes == 1


def test_gpu_pool_hands_out_free_gpus_and_waits_when_none_is(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    a, b, c = (GpuPool(tmp_path / "locks", gpus=[0, 1], poll_s=0.05) for _ in range(3))
    assert a.acquire() == "0" and b.acquire() == "1" and os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    got = []
    waiter = threading.Thread(target=lambda: got.append(c.acquire()))
    waiter.start()
    time.sleep(0.3)
    assert got == []  # both GPUs are taken: c waits
    a.release()
    waiter.join(5)
    assert got == ["0"]
    clone = pickle.loads(pickle.dumps(b))  # what a launcher ships to its workers holds no lock
    assert clone._held is None and clone.gpus == ["0", "1"]
    c.release()
    b.release()


def test_gpu_pool_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    pool = GpuPool(tmp_path / "locks", gpus=[3])
    assert pool.acquire() == "3" and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    pool.release()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7"


def test_gpu_pool_without_gpus_pins_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    pool = GpuPool(tmp_path / "locks")
    assert pool.acquire() is None and os.environ["CUDA_VISIBLE_DEVICES"] == ""
    pool.release()


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="needs NVIDIA GPUs for the NVML-detected pool")
def test_gpu_pool_detects_the_node_gpus(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pool = GpuPool(tmp_path / "locks")
    assert pool.acquire() == "0"
    pool.release()
