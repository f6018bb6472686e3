"""The runner: records, failure classification, timeouts, resume — with planted arms only."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import torch

from turbo_gmm.datasets import make_dataset, shared_init
from harness.results import read_csv
from harness.cell import CellSpec
from harness.runner import classify, run_cell
from harness.tests.conftest import PLANTED_CONF, REPO
from turbo_gmm.diag import reference


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_correct_arm_gives_a_valid_row_with_reference_likelihood(make_cfg, tmp_path):
    rec = run_cell(make_cfg("arm=planted_em", "shape=tiny_3_33", "experiment_name=t"))
    assert rec["status"] == "ok" and rec["gate"] == "valid"
    X = make_dataset(1023, 3, 33, 0).X
    init = shared_init(X, 3, 0)
    (w, m, v), _ = reference.em(X.double().numpy(), init.weights, init.means, init.variances, 10, 1e-6)
    ll = reference.mean_log_likelihood(X.double().numpy(), w, m, v)
    assert rec["ll_per_point"] == pytest.approx(ll, rel=1e-6)  # params saved as float32
    (row,) = read_csv(tmp_path / "testdev" / "t.csv")
    assert len(row["rep_seconds"]) == 2 and float(row["ms_per_iter_min"]) == pytest.approx(1e3 * min(row["rep_seconds"]) / 10)
    assert float(row["peak_mb"]) > 0 and float(row["wall_s"]) == rec["wall_s"] > 0
    assert float(row["host_load"]) == rec["host_load"] >= 0  # the host's 1-minute load average at the cell's start
    if not torch.cuda.is_available():  # on a GPU the worker reports torch's peak (test_gpu_cell_reports_...)
        assert row["peak_source"] == "rss" and row["nvml_peak_mb"] == ""
    assert row["algorithm"] == "reference_em" and row["precision"] == "fp64" and "torch" in row["versions"]
    assert row["reference_arm"] == "planted_em" and float(row["ari"]) == 1.0
    saved = np.load(tmp_path / "testdev" / "t" / row["params_file"])
    assert saved["means"].dtype == np.float32 and saved["labels"].shape == (1023,)
    assert np.allclose(saved["weights"], w, rtol=1e-6)


@pytest.mark.parametrize("arm, status, gate", [
    ("planted_crash", "fail (ERROR: RuntimeError: planted crash: the arm gave up)", None),
    ("planted_oom", "fail (OOM)", None),
    ("planted_out_of_resources", "fail (OutOfResources)", None),
    ("planted_missing", "unavailable: ModuleNotFoundError: No module named 'harness.tests.no_such_arm_module'", None),
    ("planted_early", "ok", "rejected (stopped early (3 of 10 iterations))"),
    ("planted_nan_variance", "ok", "rejected (non-finite LL; non-finite variances)"),
])
def test_every_failure_is_classified_and_written(make_cfg, tmp_path, arm, status, gate):
    rec = run_cell(make_cfg(f"arm={arm}", "shape=tiny_7_5"))
    assert rec["status"] == status and rec.get("gate") == gate
    (row,) = read_csv(tmp_path / "testdev" / "adhoc.csv")
    assert row["status"] == status and row["arm"] == arm and row["N"] == "1023" and row["git_commit"]
    assert "torch" in row["versions"] and row["device"] == "testdev"


def test_available_reason_becomes_unavailable(make_cfg, monkeypatch):
    monkeypatch.setenv("PLANTED_UNAVAILABLE", "needs a GPU\nsecond line")
    assert run_cell(make_cfg("arm=planted_em", "shape=tiny_7_5"))["status"] == "unavailable: needs a GPU"


def test_timeout_kills_the_whole_process_group(make_cfg, tmp_path, monkeypatch):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("PLANTED_PID_FILE", str(pid_file))
    t0 = time.time()
    # 15 s: on a GPU node the worker's CUDA start-up alone can take several seconds
    rec = run_cell(make_cfg("arm=planted_sleep", "shape=tiny_7_5", "arm.timeout_s=15"))
    assert rec["status"] == "fail (TIMEOUT)" and rec["timeout_s"] == 15 <= rec["wall_s"] and time.time() - t0 < 45
    worker, grandchild = (int(p) for p in pid_file.read_text().split())
    deadline = time.time() + 5
    while (_alive(worker) or _alive(grandchild)) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(worker) and not _alive(grandchild)


def test_finished_cells_are_skipped_unless_forced(make_cfg, tmp_path):
    cfg = make_cfg("arm=planted_em", "shape=tiny_7_5")
    path = tmp_path / "testdev" / "adhoc" / "cells" / f"{CellSpec.from_cfg(cfg).key}.json"
    first = run_cell(cfg)
    assert path.exists() and run_cell(cfg)["timestamp"] == first["timestamp"]
    mtime = path.stat().st_mtime_ns
    run_cell(make_cfg("arm=planted_em", "shape=tiny_7_5"))
    assert path.stat().st_mtime_ns == mtime
    time.sleep(1.1)
    assert run_cell(make_cfg("arm=planted_em", "shape=tiny_7_5", "force=true"))["timestamp"] != first["timestamp"]


def test_classify_reads_the_final_error():
    assert classify(1, "Traceback...\njaxlib.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory", False) == "fail (OOM)"
    assert classify(1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", False) == "fail (OOM)"
    assert classify(-9, "", False) == "fail (OOM)"  # a SIGKILL the runner did not send: the OOM killer (issue 47)
    assert classify(-11, "", False) == "fail (ERROR: killed by SIGSEGV)"
    assert classify(0, "", True) == "fail (TIMEOUT)"
    refused = "Traceback...\nkernels.one_pass.StateDoesNotFit: out of resource: shared memory, Required: 2097152"
    assert classify(1, refused, False) == "fail (OutOfResources)"


def test_sweep_resumes_after_the_runner_is_killed(tmp_path):
    """Stop a multirun mid-cell, rerun it: done cells skipped, every cell exactly one row."""
    pid_file = tmp_path / "pids"
    env = dict(os.environ, PLANTED_PID_FILE=str(pid_file))
    cmd = [sys.executable, "-m", "harness", "-m", f"hydra.searchpath=[file://{PLANTED_CONF}]",
           "arm=planted_em,planted_sleep,planted_crash", "shape=tiny_7_5", f"results_dir={tmp_path}",
           "device_label=testdev", "experiment_name=sweep", "env_probes=false", "timeout_scale=0.1"]
    runner = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), "the sweep never reached its second cell"
    time.sleep(0.5)
    runner.send_signal(signal.SIGTERM)  # as `timeout` would: the runner takes its cell down with it
    runner.wait(30)
    worker, grandchild = (int(p) for p in pid_file.read_text().split())
    deadline = time.time() + 5
    while (_alive(worker) or _alive(grandchild)) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(worker) and not _alive(grandchild)
    cells = tmp_path / "testdev" / "sweep" / "cells"
    (done,) = cells.glob("planted_em*.json")
    mtime = done.stat().st_mtime_ns

    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"skip {done.stem}: record exists" in p.stdout and done.stat().st_mtime_ns == mtime
    rows = read_csv(tmp_path / "testdev" / "sweep.csv")
    assert sorted(r["arm"] for r in rows) == ["planted_crash", "planted_em", "planted_sleep"]
    assert {r["arm"]: r["status"] for r in rows}["planted_sleep"] == "fail (TIMEOUT)"
    assert len(list(cells.glob("*.json"))) == 3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: torch peak memory and the NVML sampler")
def test_gpu_cell_reports_torch_peak_and_nvml(make_cfg):
    rec = run_cell(make_cfg("arm=planted_em", "shape=tiny_3_33"))
    x_mb = 1023 * 33 * 4 / 2**20
    assert rec["status"] == "ok" and rec["peak_source"] == "torch" and rec["peak_mb"] >= x_mb
    assert rec["nvml_peak_mb"] is not None and rec["nvml_peak_mb"] >= 0
