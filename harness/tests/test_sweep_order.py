"""The longest_first sweeper: long cells first, the small-N cells last and one at a time; the
estimates it orders by (planted records); its sweep on two fake GPUs through the gpu_joblib launcher,
with the order and the phase split read back from the sweep's jobs and the cells' records; the
registry that counts the cells running at once (each row's concurrent_cells)."""
import json
import os
import re
import subprocess
import sys
import time

import yaml

from harness.cell import CellSpec
from harness.gpu_pool import launcher_overrides
from harness.plan import launch_phases, plan, wall_clock
from harness.results import read_csv
from harness.running_cells import RunningCell, others_running
from harness.tests.conftest import PLANTED_CONF, REPO

SHAPES = ["tiny_7_5", "planted_small_n"]  # the second is in the small_N regime


def _plant(root, device, spec, wall_s):
    """A readable record of ``spec`` in results/<device> (an unavailable arm: no measurements needed)."""
    path = root / device / spec.experiment / "cells" / f"{spec.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(spec.row(), status="unavailable: planted", wall_s=wall_s)))


def _specs(make_cfg, experiment, arms, shapes):
    """The spec of every (arm, shape); ``experiment``: an override, experiment=... or experiment_name=..."""
    return {(a, s): CellSpec.from_cfg(make_cfg(experiment, f"arm={a}", f"shape={s}"))
            for a in arms for s in shapes}


def test_long_cells_first_small_n_last_from_recorded_wall_times(tmp_path, make_cfg):
    spec = _specs(make_cfg, "experiment=smoke", ["planted_em", "planted_early", "planted_crash"], SHAPES)
    _plant(tmp_path, "otherdev", spec["planted_early", "tiny_7_5"], 9.0)
    _plant(tmp_path, "otherdev", spec["planted_em", "planted_small_n"], 50.0)
    _plant(tmp_path, "otherdev", spec["planted_early", "planted_small_n"], 1.0)
    _plant(tmp_path, "otherdev", spec["planted_crash", "planted_small_n"], 20.0)  # crash at tiny_7_5: this median
    _plant(tmp_path, "testdev", spec["planted_em", "tiny_7_5"], 100.0)  # recorded here: only skipped, so last
    (p,) = plan(["smoke"], [f"hydra.searchpath=[file://{PLANTED_CONF}]", "arm=planted_em,planted_early,planted_crash",
                            f"shape={','.join(SHAPES)}", f"results_dir={tmp_path}", "device_label=testdev"])
    parallel, alone = launch_phases(p.planned)
    assert [(c.spec.arm, c.spec.shape, c.seconds) for c in parallel] == [
        ("planted_crash", "tiny_7_5", 20.0), ("planted_early", "tiny_7_5", 9.0), ("planted_em", "tiny_7_5", 0.0)]
    assert [(c.spec.arm, c.seconds) for c in alone] == [("planted_em", 50.0), ("planted_crash", 20.0),
                                                        ("planted_early", 1.0)]
    assert all(c.spec.shape == "planted_small_n" for c in alone)
    # two GPUs: 20 s beside 9 + 0 s, then 50 + 20 + 1 s alone; one GPU: all in turn
    assert wall_clock(p.planned, 2) == 20 + 71 and wall_clock(p.planned, 1) == 29 + 71


def test_the_launcher_overrides_use_every_gpu_and_one_gpu_runs_plain():
    assert launcher_overrides(["0", "1", "2", "5"]) == ["hydra/launcher=gpu_joblib", "hydra.launcher.n_jobs=4"]
    assert launcher_overrides(["3"]) == [] and launcher_overrides([]) == []


def test_the_running_cells_registry_counts_the_others_and_forgets_the_dead(tmp_path):
    registry = tmp_path / "running"
    with RunningCell(registry, poll_s=0.02) as a:
        assert a.most_others == 0
        with RunningCell(registry, poll_s=0.02) as b:
            assert b.most_others == 1  # a was running when b started
            time.sleep(0.1)
        assert a.most_others == 1  # a's sampler saw b
        (registry / "dead-runner.cell").write_text("")  # left by a runner that died: nobody holds its lock
        assert others_running(registry, a.path) == 0 and not (registry / "dead-runner.cell").exists()
    assert list(registry.glob("*.cell")) == []


def _job_cells(sweep_dir):
    """Hydra job number -> (arm, shape), from each job's saved overrides."""
    out = {}
    for f in sweep_dir.glob("*/.hydra/overrides.yaml"):
        o = dict(x.split("=", 1) for x in yaml.safe_load(f.read_text()))
        out[int(f.parent.parent.name)] = (o["arm"], o["shape"])
    return out


def test_the_sweep_on_two_gpus_runs_long_cells_first_in_parallel_then_small_n_alone(tmp_path, make_cfg):
    arms = ["planted_em", "planted_early"]
    spec = _specs(make_cfg, "experiment_name=par", arms, SHAPES)
    walls = {("planted_early", "tiny_7_5"): 40, ("planted_em", "tiny_7_5"): 30,
             ("planted_early", "planted_small_n"): 8, ("planted_em", "planted_small_n"): 5}
    for cell, wall in walls.items():
        _plant(tmp_path, "otherdev", spec[cell], wall)
    expected = list(walls)  # the basic sweeper's order would be em before early, tiny_7_5 before small-N
    cmd = [sys.executable, "-m", "harness", "-m", "hydra/sweeper=longest_first", "hydra/launcher=gpu_joblib",
           "hydra.launcher.n_jobs=2", f"hydra.callbacks.gpu_pool.lock_dir={tmp_path / 'locks'}",
           f"hydra.searchpath=[file://{PLANTED_CONF}]", f"arm={','.join(arms)}", f"shape={','.join(SHAPES)}",
           f"results_dir={tmp_path}", "device_label=testdev", "experiment_name=par", "env_probes=false",
           f"running_cells_dir={tmp_path / 'running'}", f"cache_dir={tmp_path / 'cache'}",
           f"hydra.sweep.dir={tmp_path / 'runs'}"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"})  # two GPUs, faked
    assert p.returncode == 0, p.stderr[-3000:]
    jobs = _job_cells(tmp_path / "runs")
    assert [jobs[i] for i in range(len(jobs))] == expected  # launched in this order
    gpus = dict(re.findall(r"\[gpu_pool\] job (\d+) on GPU (\d)", p.stdout))
    assert {gpus["0"], gpus["1"]} == {"0", "1"}  # the two long cells started at once, one on each GPU

    rows = {(r["arm"], r["shape"]): r for r in read_csv(tmp_path / "testdev" / "par.csv")}
    assert set(rows) == set(walls) and all(r["status"] == "ok" for r in rows.values())
    started = {c: time.mktime(time.strptime(r["timestamp"], "%Y-%m-%dT%H:%M:%S%z")) for c, r in rows.items()}
    parallel, alone = expected[:2], expected[2:]
    assert [rows[c]["concurrent_cells"] for c in parallel] == ["1", "1"]  # each saw the other
    assert {rows[c]["cuda_visible_devices"] for c in parallel} == {"0", "1"}
    for c in alone:  # nothing else ran beside a small-N cell, which started after every parallel cell ended
        assert rows[c]["concurrent_cells"] == "0"
        assert all(started[c] + 1.1 >= started[q] + float(rows[q]["wall_s"]) for q in parallel)  # 1 s stamps
    assert started[alone[1]] + 1.1 >= started[alone[0]] + float(rows[alone[0]]["wall_s"])
