"""A results directory that cannot lie: the six ways issue 18 found to make it, each through the CLI."""
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from harness.results import read_csv
from harness.tests.conftest import PLANTED_CONF, REPO


def _harness(tmp_path, *overrides, env=None, multirun=False):
    """``python -m harness`` with results in tmp_path/results and Hydra's own folders beside it."""
    cmd = [sys.executable, "-m", "harness", *(["-m"] if multirun else []),
           f"hydra.run.dir={tmp_path / 'hydra'}", f"hydra.sweep.dir={tmp_path / 'hydra'}",
           f"results_dir={tmp_path / 'results'}", "device_label=testdev", "env_probes=false", *overrides]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def _planted(tmp_path, *overrides, **kw):
    return _harness(tmp_path, f"hydra.searchpath=[file://{PLANTED_CONF}]", *overrides, **kw)


def _rows(tmp_path, experiment="adhoc"):
    return read_csv(tmp_path / "results" / "testdev" / f"{experiment}.csv")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_1_a_changed_setting_is_a_new_cell_never_a_stale_record(tmp_path):
    first = _harness(tmp_path)
    assert first.returncode == 0 and "[harness] run  pytorch__tiny_7_5__" in first.stdout
    again = _harness(tmp_path)
    assert "[harness] skip pytorch__tiny_7_5__" in again.stdout and "record exists" in again.stdout
    for changed in (["seed=1"], ["n_iter=3", "reg_covar=0.1"]):
        p = _harness(tmp_path, *changed)
        assert p.returncode == 0 and "[harness] run  pytorch__tiny_7_5__" in p.stdout and "skip" not in p.stdout
    rows = _rows(tmp_path)
    assert sorted((r["seed"], r["n_iter"], r["reg_covar"]) for r in rows) == [
        ("0", "10", "1e-06"), ("0", "3", "0.1"), ("1", "10", "1e-06")]
    assert len({r["cell"] for r in rows}) == 3 and all(r["status"] == "ok" for r in rows)


@pytest.mark.parametrize("override, message", [
    ("n_iter=0", "n_iter=0: must be an integer >= 1"),
    ("n_iter=-1", "n_iter=-1: must be an integer >= 1"),
])
def test_2_n_iter_below_one_is_refused_before_any_work(tmp_path, override, message):
    p = _harness(tmp_path, override)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {message}"
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("override, message", [
    ("arm.reps=0", "arm.reps=0: must be an integer >= 1"),
    ("arm.timeout_s=0", "arm.timeout_s=0: must be a finite number > 0"),
    ("timeout_scale=0", "timeout_scale=0: must be a finite number > 0"),
    ("timeout_scale=-1", "timeout_scale=-1: must be a finite number > 0"),
    ("n_iter=abc", "n_iter='abc': must be an integer >= 1"),
    ("seed=abc", "seed='abc': must be an integer in [0, 4294967295]"),
])
def test_3_protocol_settings_are_checked(tmp_path, override, message):
    p = _harness(tmp_path, override)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {message}"
    assert not (tmp_path / "results").exists()


def test_3_a_multirun_checks_every_shape_before_its_first_cell(tmp_path):
    p = _harness(tmp_path, "shape=20K_16_32,tiny_7_5", "shape.K=1500", multirun=True)
    assert p.returncode == 2 and "[harness] run" not in p.stdout
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("error: shape tiny_7_5: K=1500 > N=1023") and "shape=tiny_7_5 shape.K=1500" in line
    assert not (tmp_path / "results").exists()


def test_4_a_worker_dies_with_its_killed_runner_and_writes_nothing(tmp_path):
    pid_file = tmp_path / "pids"
    env = dict(os.environ, PLANTED_PID_FILE=str(pid_file))
    cmd = [sys.executable, "-m", "harness", f"hydra.searchpath=[file://{PLANTED_CONF}]", "arm=planted_sleep",
           f"hydra.run.dir={tmp_path / 'hydra'}", f"results_dir={tmp_path / 'results'}", "device_label=testdev",
           "env_probes=false"]
    runner = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    worker, grandchild = (int(p) for p in pid_file.read_text().split())
    runner.send_signal(signal.SIGKILL)  # no handler, no unwinding: the kernel ends the runner
    runner.wait(30)
    deadline = time.time() + 5
    while (_alive(worker) or _alive(grandchild)) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(worker) and not _alive(grandchild)
    assert not list((tmp_path / "results" / "testdev" / "adhoc" / "cells").glob("*.json"))


def test_4_a_second_sweep_waits_for_the_cell_the_first_is_running_then_skips_it(tmp_path):
    pid_file = tmp_path / "pids"
    env = dict(os.environ, PLANTED_PID_FILE=str(pid_file))
    args = [f"hydra.searchpath=[file://{PLANTED_CONF}]", "arm=planted_sleep", "arm.timeout_s=10"]
    first = subprocess.Popen([sys.executable, "-m", "harness", f"hydra.run.dir={tmp_path / 'hydra1'}",
                              f"results_dir={tmp_path / 'results'}", "device_label=testdev", "env_probes=false",
                              *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    second = _harness(tmp_path, *args, env=env)
    out = first.communicate(timeout=60)[0]
    assert "[harness] run  planted_sleep__tiny_7_5__" in out and "fail (TIMEOUT)" in out
    assert second.returncode == 0 and "[harness] run" not in second.stdout
    assert f"another sweep is running it (runner pid {first.pid})" in second.stdout
    assert "skip planted_sleep__tiny_7_5__" in second.stdout and "the sweep it waited for recorded it" in second.stdout
    (row,) = _rows(tmp_path)
    assert row["status"] == "fail (TIMEOUT)"


def test_5_a_corrupt_record_is_quarantined_and_the_sweep_goes_on(tmp_path):
    sweep = ["arm=planted_em,planted_early", "shape=tiny_7_5"]
    assert _planted(tmp_path, *sweep, multirun=True).returncode == 0
    cells = tmp_path / "results" / "testdev" / "adhoc" / "cells"
    em, early = (next(cells.glob(f"{a}__*.json")) for a in ("planted_em", "planted_early"))
    em.write_text(em.read_text()[:200])  # truncated
    early.write_text("{}")
    p = _planted(tmp_path, "arm=planted_em", "shape=tiny_7_5", "force=true")  # rewrites one of them
    assert p.returncode == 0, p.stderr
    assert f"warning: unreadable cell record {early} (no arm, shape, status" in p.stderr
    assert f"unreadable cell record {em}" in p.stderr  # the runner's own check, before it reran the cell
    assert sorted(q.name for q in (cells / "quarantine").glob("*.json")) == sorted([em.name, early.name])
    assert [r["arm"] for r in _rows(tmp_path)] == ["planted_em"]
    p = _planted(tmp_path, *sweep, multirun=True)  # the quarantined cell counts as not yet run
    assert p.returncode == 0 and f"skip {em.stem}" in p.stdout and f"run  {early.stem}" in p.stdout
    assert sorted(r["arm"] for r in _rows(tmp_path)) == ["planted_early", "planted_em"]


def test_6_an_unwritable_results_dir_is_one_clear_error(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for results_dir, message in ((a_file, f"{a_file} is a file, not a folder"),
                                 ("/proc/turbo_gmm_results", "cannot create or write /proc/turbo_gmm_results")):
        for multirun in (False, True):
            cmd = [sys.executable, "-m", "harness", *(["-m", "arm=pytorch,sklearn"] if multirun else []),
                   f"hydra.run.dir={tmp_path / 'hydra'}", f"hydra.sweep.dir={tmp_path / 'hydra'}",
                   f"results_dir={results_dir}", "device_label=testdev"]
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
            assert p.returncode == 2 and "Traceback" not in p.stderr
            (line,) = p.stderr.strip().splitlines()
            assert line.startswith(f"error: results_dir={results_dir}: {message}")
