"""What a sweep will run and about how long, before it starts (``make reproduce`` prints it).

    python -m harness.plan table1 dispatch ablation d128_control [results_dir=... device_label=...]

For each experiment: its cells (the sweeper's parameters, composed as Hydra composes them),
how many already have a record in results/<device>/ (a rerun skips those), and an estimate for
the rest. A cell is estimated by its own recorded wall time (``wall_s``) in any other
results/<device>/ folder, else by the median wall time of that arm's recorded cells, else by its
timeout -- an upper bound, and counted as such.
"""
from __future__ import annotations

import itertools
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.runner import REPO, _device_dir, cell_key


@dataclass
class ExperimentPlan:
    name: str
    device_dir: Path
    cells: int = 0
    done: int = 0
    seconds: float = 0.0  # estimated, cells to run
    upper_bound_cells: int = 0  # estimated by their timeout
    todo: list = field(default_factory=list)


def _sweep(experiment: str, extra=()) -> list[list[str]]:
    """Override lists of the experiment's cells (the basic sweeper's cartesian product). As in Hydra's
    basic sweeper, a command-line override of a swept key replaces that axis (``shape.d=32``), and one
    with commas is an axis of its own; the other overrides apply to every cell."""
    spec = OmegaConf.load(REPO / "conf" / "experiment" / f"{experiment}.yaml")
    params = {k: str(v) for k, v in (OmegaConf.select(spec, "hydra.sweeper.params") or {}).items()}
    fixed = []
    for override in extra:
        key, _, value = override.partition("=")
        if key in params or "," in value:
            params[key] = value
        else:
            fixed.append(override)
    axes = [[f"{k}={v.strip()}" for v in values.split(",")] for k, values in params.items()]
    return [list(combo) + fixed for combo in itertools.product(*axes)]


def _recorded_walls(results_root: Path) -> tuple[dict, dict]:
    """wall_s by (experiment, cell key) and lists of wall_s by arm, over every device folder."""
    by_cell, by_arm = {}, {}
    for path in results_root.glob("*/*/cells/*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(rec.get("wall_s"), (int, float)):
            by_cell.setdefault((path.parent.parent.name, path.stem), rec["wall_s"])
            by_arm.setdefault(rec.get("arm"), []).append(rec["wall_s"])
    return by_cell, by_arm


def plan(experiments: list[str], extra: list[str] = ()) -> list[ExperimentPlan]:
    plans, walls = [], {}  # walls: results root -> its recorded wall times, read once
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        for exp in experiments:
            p = None
            for overrides in _sweep(exp, extra):
                cfg = compose("config", overrides=[f"experiment={exp}", *overrides])
                if p is None:
                    p = ExperimentPlan(exp, _device_dir(cfg))
                    root = p.device_dir.parent
                    if root not in walls:
                        walls[root] = _recorded_walls(root)
                    by_cell, by_arm = walls[root]
                key = cell_key(cfg)
                p.cells += 1
                if not cfg.force and (p.device_dir / cfg.experiment_name / "cells" / f"{key}.json").exists():
                    p.done += 1
                    continue
                p.todo.append(key)
                if (cfg.experiment_name, key) in by_cell:
                    p.seconds += by_cell[(cfg.experiment_name, key)]
                elif by_arm.get(cfg.arm.name):
                    p.seconds += statistics.median(by_arm[cfg.arm.name])
                else:
                    p.seconds += float(cfg.arm.timeout_s) * float(cfg.timeout_scale)
                    p.upper_bound_cells += 1
            plans.append(p)
    return plans


def describe(plans: list[ExperimentPlan]) -> str:
    lines, total, bound_cells = [], 0.0, 0
    for p in plans:
        total += p.seconds
        bound_cells += p.upper_bound_cells
        bound = f", {p.upper_bound_cells} of them at their timeout (upper bound)" if p.upper_bound_cells else ""
        lines.append(f"  {p.name:15s} {p.cells:4d} cells, {p.done:4d} recorded (skipped), {len(p.todo):4d} to run: "
                     f"~{p.seconds / 60:.0f} min{bound}")
    bound = f", {bound_cells} cells counted at their timeout" if bound_cells else ""
    lines.append(f"  {'total':15s} ~{total / 60:.0f} min of cells{bound}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    experiments = [a for a in argv if "=" not in a]
    extra = [a for a in argv if "=" in a]
    plans = plan(experiments, extra)
    print(f"results in {plans[0].device_dir if plans else '-'}")
    print(describe(plans))


if __name__ == "__main__":
    main(sys.argv[1:])
