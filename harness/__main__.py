"""Hydra entry point.

    python -m harness arm=pytorch shape=1M_32_32          # one cell
    python -m harness -m experiment=table1                # the Table 1 sweep (multirun)
    python -m harness -m experiment=table1 arm=pytorch,sklearn force=true
"""
import signal
import sys

import hydra
from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

from kernels.datasets import validate_shape
from harness.runner import run_cell


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        validate_shape(cfg.shape.N, cfg.shape.K, cfg.shape.d)
    except (ValueError, MissingMandatoryValue) as e:  # bad or missing sizes: say what is wrong, before any work
        print(f"error: shape {cfg.shape.name}: {e}", file=sys.stderr)
        sys.exit(2)
    run_cell(cfg)


if __name__ == "__main__":
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the runner kills the running cell.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
