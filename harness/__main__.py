"""Hydra entry point.

    python -m harness arm=pytorch shape=1M_32_32          # one cell
    python -m harness -m experiment=table1                # the Table 1 sweep (multirun)
    python -m harness -m experiment=table1 arm=pytorch,sklearn force=true

A setting no cell can run with (``n_iter=0``, ``seed=abc``, ``shape.K`` above N, a size beyond int64, a
results_dir that cannot be written or is empty, an experiment_name or device_label that is not a plain name
and would reach outside results_dir) exits 2 with one line naming it, before any work; a multirun checks
every cell of its sweep first (harness.plan.SweepCheck).
"""
import signal
import sys

import hydra
from omegaconf import DictConfig

from harness.cell import SettingError
from harness.runner import run_cell


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        run_cell(cfg)
    except SettingError as e:  # raised before the cell is claimed: nothing was written
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the runner kills the running cell.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
