"""Hydra composition for the harness tests: the real conf/ plus the planted arms."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parents[2]
PLANTED_CONF = Path(__file__).resolve().parent / "conf"


@pytest.fixture
def make_cfg(tmp_path):
    """compose(overrides) with results in tmp_path, the planted arms on the search path."""
    def _make(*overrides, results_dir=None):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return compose("config", overrides=[
                f"hydra.searchpath=[file://{PLANTED_CONF}]", f"results_dir={results_dir or tmp_path}",
                "device_label=testdev", "env_probes=false", *overrides])
    return _make
