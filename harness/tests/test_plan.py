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
