"""harness.plan: cells of an experiment, the ones already recorded, and the estimate for the rest."""
import json
import subprocess
import sys

from hydra import compose, initialize_config_dir

from harness.cell import CellSpec
from harness.plan import REPO, describe, plan, sweep_jobs
from harness.tests.conftest import PLANTED_CONF


def _spec(*overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return CellSpec.from_cfg(compose("config", overrides=list(overrides)))


def _record(root, device, spec, wall_s):
    """A readable record of the cell (an unavailable arm: no measurements needed)."""
    path = root / device / spec.experiment / "cells" / f"{spec.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(spec.row(), status="unavailable: test", wall_s=wall_s)))
    return path


def test_plan_counts_recorded_cells_and_estimates_the_rest(tmp_path):
    pytorch = _spec("experiment=smoke", "arm=pytorch", "shape=tiny_7_5")
    _record(tmp_path, "testdev", pytorch, 3.0)  # done here
    _record(tmp_path, "otherdev", _spec("experiment=smoke", "arm=sklearn", "shape=tiny_7_5"), 12.5)  # elsewhere
    (p,) = plan(["smoke"], [f"results_dir={tmp_path}", "device_label=testdev"])
    assert (p.cells, p.done, len(p.todo)) == (18, 1, 17) and pytorch not in p.todo
    timeout = {s.arm: s.timeout_s for s in p.todo if s.arm in ("turbo_gmm", "gmmx", "torchgmm", "pomegranate")}
    # sklearn: its own cell and the arm median elsewhere; pytorch: the arm median; the rest: timeouts
    assert p.seconds == 3 * 12.5 + 2 * 3.0 + 3 * sum(timeout.values())
    assert p.upper_bound_cells == 12 and "12 cells counted at their timeout" in describe([p])
    (forced,) = plan(["smoke"], [f"results_dir={tmp_path}", "device_label=testdev", "force=true"])
    assert forced.done == 0 and len(forced.todo) == 18


def test_a_changed_setting_is_a_cell_to_run(tmp_path):
    """The record of seed 0 does not count for seed 1: the key covers the whole protocol."""
    _record(tmp_path, "testdev", _spec("experiment=smoke", "arm=pytorch", "shape=tiny_7_5"), 3.0)
    root = [f"results_dir={tmp_path}", "device_label=testdev", "arm=pytorch", "shape=tiny_7_5"]
    assert plan(["smoke"], root)[0].done == 1
    for changed in ("seed=1", "n_iter=3", "reg_covar=0.1", "arm.reps=2", "timeout_scale=2"):
        (p,) = plan(["smoke"], [*root, changed])
        assert (p.cells, p.done) == (1, 0), changed


def test_an_unreadable_record_is_a_cell_to_run_and_the_plan_moves_nothing(tmp_path):
    path = _record(tmp_path, "testdev", _spec("experiment=smoke", "arm=pytorch", "shape=tiny_7_5"), 3.0)
    path.write_text("{}")
    (p,) = plan(["smoke"], [f"results_dir={tmp_path}", "device_label=testdev", "arm=pytorch", "shape=tiny_7_5"])
    assert (p.cells, p.done) == (1, 0) and path.read_text() == "{}"


def test_a_command_line_override_of_a_swept_key_replaces_its_axis(tmp_path):
    """Hydra's basic sweeper lets the command line win over the experiment's sweep: dispatch at
    shape.d=32 for one algorithm is the 7 K values, not the 56 cells of the grid counted with d = 32."""
    root = [f"results_dir={tmp_path}", "device_label=testdev"]
    (p,) = plan(["dispatch"], [*root, "shape.d=32", "arm.options.algorithm=two_pass"])
    assert p.cells == 7 and len({s.key for s in p.todo}) == 7
    assert {s.K for s in p.todo} == {16, 32, 64, 128, 256, 512, 1024}
    assert all(s.d == 32 and s.options_dict["algorithm"] == "two_pass" for s in p.todo)
    (t,) = plan(["table1"], [*root, "arm=turbo_gmm,pytorch", "shape=1M_32_32,4M_32_32,20M_32_32"])
    assert t.cells == 6 and {s.arm for s in t.todo} == {"turbo_gmm", "pytorch"}


def test_sweep_jobs_are_hydras_basic_sweeper_product():
    jobs = sweep_jobs({"shape": "a,b", "arm": "x,y,z"}, ["arm=y", "seed=1,2", "n_iter=3"])
    assert jobs[0] == ["shape=a", "arm=y", "seed=1", "n_iter=3"] and len(jobs) == 2 * 1 * 2
    assert {tuple(j) for j in jobs} == {(f"shape={s}", "arm=y", f"seed={e}", "n_iter=3") for s in "ab" for e in "12"}


def test_plan_refuses_a_setting_no_cell_can_run_with(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.plan", "smoke", f"results_dir={tmp_path}", "n_iter=0"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == "error: n_iter=0: must be an integer >= 1"
    assert not any(tmp_path.iterdir())


def test_plan_composes_with_hydra_overrides_outside_the_sweep(tmp_path):
    """hydra.* overrides reach every composition (here: the planted arms' search path), never an axis."""
    (p,) = plan(["smoke"], [f"hydra.searchpath=[file://{PLANTED_CONF}]", "arm=planted_em,planted_crash",
                            "shape=tiny_7_5", f"results_dir={tmp_path}", "device_label=testdev"])
    assert p.cells == 2 and {s.module for s in p.todo} == {"harness.tests.planted_arms"}
