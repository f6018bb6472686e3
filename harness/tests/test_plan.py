"""harness.plan: cells of an experiment, the ones already recorded, and the estimate for the rest."""
import json

from omegaconf import OmegaConf

from harness.plan import REPO, describe, plan


def _record(root, device, key, arm, wall_s):
    path = root / device / "smoke" / "cells" / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"arm": arm, "wall_s": wall_s}))


def test_plan_counts_recorded_cells_and_estimates_the_rest(tmp_path):
    _record(tmp_path, "testdev", "pytorch__tiny_7_5", "pytorch", 3.0)  # done here
    _record(tmp_path, "otherdev", "sklearn__tiny_7_5", "sklearn", 12.5)  # measured on another device
    (p,) = plan(["smoke"], [f"results_dir={tmp_path}", "device_label=testdev"])
    assert (p.cells, p.done, len(p.todo)) == (18, 1, 17) and "pytorch__tiny_7_5" not in p.todo
    timeout = {a: OmegaConf.load(REPO / "conf" / "arm" / f"{a}.yaml").timeout_s
               for a in ("turbo_gmm", "gmmx", "torchgmm", "pomegranate")}
    # sklearn: its own cell and the arm median elsewhere; pytorch: the arm median; the rest: timeouts
    assert p.seconds == 3 * 12.5 + 2 * 3.0 + 3 * sum(timeout.values())
    assert p.upper_bound_cells == 12 and "12 cells counted at their timeout" in describe([p])
    (forced,) = plan(["smoke"], [f"results_dir={tmp_path}", "device_label=testdev", "force=true"])
    assert forced.done == 0 and len(forced.todo) == 18


def test_a_command_line_override_of_a_swept_key_replaces_its_axis(tmp_path):
    """Hydra's basic sweeper lets the command line win over the experiment's sweep: dispatch at
    shape.d=32 for one algorithm is the 7 K values, not the 56 cells of the grid counted with d = 32."""
    root = [f"results_dir={tmp_path}", "device_label=testdev"]
    (p,) = plan(["dispatch"], [*root, "shape.d=32", "arm.options.algorithm=two_pass"])
    assert p.cells == 7 and len(set(p.todo)) == 7 and all("_d32__algorithm=two_pass" in k for k in p.todo)
    (t,) = plan(["table1"], [*root, "arm=turbo_gmm,pytorch", "shape=1M_32_32,4M_32_32,20M_32_32"])
    assert t.cells == 6 and {k.split("__")[0] for k in t.todo} == {"turbo_gmm", "pytorch"}
