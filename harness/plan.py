"""What a sweep will run and about how long, before it starts (``make reproduce`` prints it), and the
check a multirun makes of every cell before its first one runs.

    python -m harness.plan table1 dispatch ablation d128_control [--gpus 8] [results_dir=... device_label=...]

For each experiment: its cells (Hydra's basic sweeper expands the experiment's
``hydra.sweeper.params`` with the command-line overrides, and every job's config is composed as
Hydra composes it), how many already have a readable record in results/<device>/ (a rerun skips
those), and an estimate for the rest. A cell is estimated by its own recorded wall time
(``wall_s``) in any other results/<device>/ folder, else by the median wall time of that arm's
recorded cells, else by its timeout -- an upper bound, and counted as such. ``--gpus N`` adds the
wall clock those estimates give on N GPUs, in the order the ``longest_first`` sweeper launches the
cells (:func:`launch_phases`: long cells first, the small-N cells last and one at a time).
"""
from __future__ import annotations

import heapq
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from harness import results
from harness.cell import CellSpec, SettingError
from harness.runner import REPO, _device_dir, writable_device_dir


def sweep_jobs(params: Mapping[str, str], task_overrides: list[str]) -> list[list[str]]:
    """The override list of every job of a sweep, as Hydra's basic sweeper makes them: the sweeper's
    ``params`` then the command line, parsed by Hydra's override parser; a command-line override of a
    swept key replaces that axis, one with commas is an axis of its own, the rest apply to every job."""
    hydra = GlobalHydra.instance()  # its config loader expands glob() sweeps over config groups
    parser = OverridesParser.create(config_loader=hydra.config_loader() if hydra.is_initialized() else None)
    overrides = parser.parse_overrides([f"{k}={v}" for k, v in (params or {}).items()] + list(task_overrides))
    (jobs,) = BasicSweeper.split_arguments(overrides, max_batch_size=None)
    return jobs


def master_config(overrides: list[str]) -> DictConfig:
    """The config a multirun starts from (``python -m harness -m <overrides>``), composed by Hydra."""
    return GlobalHydra.instance().config_loader().load_configuration(
        "config", list(overrides), run_mode=RunMode.MULTIRUN, from_shell=False)


def sweep_configs(master: DictConfig) -> Iterator[tuple[list[str], DictConfig]]:
    """(job overrides, composed config) of every job of the multirun ``master``, composed as Hydra's
    sweeper composes them (the master's Hydra overrides, then the job's)."""
    loader = GlobalHydra.instance().config_loader()
    for job in sweep_jobs(master.hydra.sweeper.params, list(master.hydra.overrides.task)):
        yield job, loader.load_sweep_config(master, job)


def check_sweep(master: DictConfig) -> list[CellSpec]:
    """Every cell's spec, and every results folder checked writable; :class:`SettingError` (naming
    the cell's overrides) at the first setting no cell can run with, before anything is written."""
    specs, configs = [], {}
    for job, cfg in sweep_configs(master):
        try:
            specs.append(CellSpec.from_cfg(cfg))
        except SettingError as e:
            raise SettingError(f"{e} (in the sweep's cell {' '.join(job)})") from None
        configs.setdefault((cfg.results_dir, cfg.device_label, specs[-1].experiment), (cfg, specs[-1].experiment))
    for cfg, experiment in configs.values():
        writable_device_dir(cfg, experiment)
    return specs


class SweepCheck(Callback):
    """Hydra callback: a multirun composes and checks every one of its cells before the first runs
    (Hydra itself launches them one by one, so a bad shape would otherwise stop the sweep midway)."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        try:
            specs = check_sweep(config)
        except SettingError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        print(f"[harness] sweep of {len(specs)} cells checked", flush=True)


SMALL_N = "small_N"  # the shape regime whose timings host load contaminates (conf/shape/*.yaml)


@dataclass
class ExperimentPlan:
    name: str
    device_dir: Path
    cells: int = 0
    done: int = 0
    seconds: float = 0.0  # estimated, cells to run
    upper_bound_cells: int = 0  # estimated by their timeout
    todo: list = field(default_factory=list)  # the CellSpecs to run
    planned: list = field(default_factory=list)  # every PlannedCell, in sweep order


@dataclass(frozen=True)
class PlannedCell:
    job: tuple  # the job's overrides, as the sweeper made them
    spec: CellSpec
    recorded: bool  # a readable record exists and force is off: the job only skips it
    seconds: float  # estimated wall time (0 for a recorded cell)
    upper_bound: bool  # estimated by its timeout

    @property
    def small_n(self) -> bool:
        return SMALL_N in self.spec.regimes


def _recorded_walls(results_root: Path) -> tuple[dict, dict]:
    """wall_s by (experiment, cell key) and lists of wall_s by arm, over every device folder."""
    by_cell, by_arm = {}, {}
    for path in results_root.glob("*/*/cells/*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("wall_s"), (int, float)):
            by_cell.setdefault((path.parent.parent.name, path.stem), rec["wall_s"])
            by_arm.setdefault(rec.get("arm"), []).append(rec["wall_s"])
    return by_cell, by_arm


def _recorded(path: Path) -> bool:
    """A readable record (read only: the plan moves nothing)."""
    try:
        results.read_record(path)
        return True
    except (results.UnreadableRecord, FileNotFoundError):
        return False


class WallTimes:
    """The wall times recorded under results roots, each root read once, and the estimates made of them."""

    def __init__(self):
        self._roots: dict = {}

    def estimate(self, spec: CellSpec, results_root: Path) -> tuple[float, bool]:
        """(seconds, upper bound?): the cell's own recorded ``wall_s`` in any device folder under
        ``results_root``, else the median of its arm's, else its timeout (an upper bound)."""
        if results_root not in self._roots:
            self._roots[results_root] = _recorded_walls(results_root)
        by_cell, by_arm = self._roots[results_root]
        if (spec.experiment, spec.key) in by_cell:
            return by_cell[(spec.experiment, spec.key)], False
        if by_arm.get(spec.arm):
            return statistics.median(by_arm[spec.arm]), False
        return spec.timeout_s, True


def plan_cells(configs, walls: WallTimes) -> list[PlannedCell]:
    """A :class:`PlannedCell` of every (job overrides, composed config) of a sweep, in sweep order."""
    cells = []
    for job, cfg in configs:
        spec = CellSpec.from_cfg(cfg)
        device_dir = _device_dir(cfg)
        recorded = not cfg.force and _recorded(device_dir / spec.experiment / "cells" / f"{spec.key}.json")
        seconds, bound = (0.0, False) if recorded else walls.estimate(spec, device_dir.parent)
        cells.append(PlannedCell(tuple(job), spec, recorded, seconds, bound))
    return cells


def launch_phases(cells: list[PlannedCell]) -> tuple[list[PlannedCell], list[PlannedCell]]:
    """The order a sweep launches its cells in: (parallel phase, sequential phase).

    The parallel phase holds every cell outside the small-N regime, longest estimate first, so that
    the long ones (gmmx's compiles, Flash-GMM's widened autotuning, cuVS) never start last and leave
    the other GPUs idle behind them. The sequential phase holds the small-N cells, longest first,
    to be launched one at a time after the parallel phase: at N = 20 000 an iteration is launch
    overhead paid by the host CPU, so they run with every other GPU idle. Ties keep sweep order."""
    by_length = sorted(cells, key=lambda c: -c.seconds)  # stable
    return [c for c in by_length if not c.small_n], [c for c in by_length if c.small_n]


def wall_clock(cells: list[PlannedCell], gpus: int) -> float:
    """Estimated wall clock of a sweep on ``gpus`` GPUs: the parallel phase scheduled as a launcher
    does (each cell, in launch order, on the first GPU to fall free), then the sequential phase."""
    parallel, alone = launch_phases(cells)
    free_at = [0.0] * max(1, gpus)
    for c in parallel:
        heapq.heapreplace(free_at, free_at[0] + c.seconds)
    return max(free_at) + sum(c.seconds for c in alone)


def plan(experiments: list[str], extra: list[str] = ()) -> list[ExperimentPlan]:
    plans, walls = [], WallTimes()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        for exp in experiments:
            master = master_config([f"experiment={exp}", *extra])
            p = ExperimentPlan(exp, _device_dir(master))
            p.planned = plan_cells(sweep_configs(master), walls)
            for c in p.planned:
                p.cells += 1
                if c.recorded:
                    p.done += 1
                    continue
                p.todo.append(c.spec)
                p.seconds += c.seconds
                p.upper_bound_cells += c.upper_bound
            plans.append(p)
    return plans


def describe(plans: list[ExperimentPlan], gpus: int | None = None) -> str:
    """The plan in lines for people; with ``gpus``, the estimated wall clock of the experiments run in
    turn, each on that many GPUs (:func:`wall_clock`)."""
    lines, total, bound_cells = [], 0.0, 0
    for p in plans:
        total += p.seconds
        bound_cells += p.upper_bound_cells
        bound = f", {p.upper_bound_cells} of them at their timeout (upper bound)" if p.upper_bound_cells else ""
        lines.append(f"  {p.name:15s} {p.cells:4d} cells, {p.done:4d} recorded (skipped), {len(p.todo):4d} to run: "
                     f"~{p.seconds / 60:.0f} min{bound}")
    bound = f", {bound_cells} cells counted at their timeout" if bound_cells else ""
    lines.append(f"  {'total':15s} ~{total / 60:.0f} min of cells{bound}")
    if gpus is not None:
        clock = sum(wall_clock(p.planned, gpus) for p in plans)
        lines.append(f"  {'wall clock':15s} ~{clock / 60:.0f} min on {gpus} GPU{'s' if gpus != 1 else ''} "
                     "(long cells first, then the small-N cells one at a time)")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    gpus = None
    if "--gpus" in argv:  # --gpus N: also estimate the wall clock on N GPUs
        i = argv.index("--gpus")
        gpus, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    experiments = [a for a in argv if "=" not in a]
    extra = [a for a in argv if "=" in a]
    try:
        plans = plan(experiments, extra)
    except SettingError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"results in {plans[0].device_dir if plans else '-'}")
    print(describe(plans, gpus))


if __name__ == "__main__":
    main(sys.argv[1:])
