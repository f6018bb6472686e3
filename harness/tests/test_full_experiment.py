"""experiment=full: its sweep composes, and its CPU twin runs from cells to the CSV and the table."""
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from figures import render_all
from harness.results import read_csv
from harness.tests.conftest import REPO

FULL_SHAPES = ["1M_32_32", "4M_16_64", "1M_128_32", "20M_32_16", "1M_256_16"]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def test_full_sweeps_its_shapes_with_our_arm_first_and_full_covariances():
    c = _compose("experiment=full")
    params = c.hydra.sweeper.params
    assert (c.experiment_name, c.covariance_type, c.protocol, c.n_iter) == ("full", "full", "fixed_init", 10)
    assert params.shape.split(",") == FULL_SHAPES
    arms = params.arm.split(",")
    assert arms[0] == "turbo_gmm" and set(arms) == {"turbo_gmm", "flash_gmm", "cuvs", "pytorch", "sklearn", "gmmx",
                                                     "torchgmm", "pomegranate"}
    for s in FULL_SHAPES:
        shape = _compose(f"shape={s}").shape
        assert f"{shape.N // 10**6}M_{shape.K}_{shape.d}" == s


def test_full_smoke_runs_cells_to_csv_and_table(tmp_path):
    """Ours (interpreter), PyTorch and scikit-learn fit full covariances and agree; an arm without them
    (an ablation rung) is a classified unsupported row, and the table renders."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "harness", "-m", "experiment=full_smoke", "shape=tiny_7_5",
           "arm=turbo_gmm,pytorch,sklearn,ablation_a1", "arm.reps=1", f"hydra.sweep.dir={tmp_path / 'hydra'}",
           f"results_dir={tmp_path / 'results'}", "device_label=testdev"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    device_dir = tmp_path / "results" / "testdev"
    rows = {r["arm"]: r for r in read_csv(device_dir / "full_smoke.csv")}
    assert rows["ablation_a1"]["status"] == "unsupported: covariance_type=full"
    for arm in ("turbo_gmm", "pytorch", "sklearn"):
        r = rows[arm]
        assert (r["status"], r["gate"], r["covariance_type"], r["reference_arm"]) == ("ok", "valid", "full", "turbo_gmm")
        assert abs(float(r["rel_ll_diff"])) < 1e-5 and float(r["ari"]) == 1.0
        assert r["roofline_fraction"] == ""  # the diagonal FLOP count is not charged to a full fit
    paths = render_all.render_folder(device_dir, say=lambda _: None)
    assert {p.name for p in paths} >= {"full_smoke.md", "full_smoke_fig.png", "full_smoke_fig.pdf"}
    table = (device_dir / "full_smoke.md").read_text()
    assert "| tiny/7/5 | Turbo-GMM |" in table and "unsupported: covariance_type=full" in table


@pytest.mark.parametrize("experiment", ["full", "full_smoke"])
def test_a_full_cell_is_not_a_diag_cell(experiment):
    from harness.cell import CellSpec

    full = CellSpec.from_cfg(_compose(f"experiment={experiment}", "arm=pytorch", "shape=tiny_7_5"), environ={})
    diag = CellSpec.from_cfg(_compose("arm=pytorch", "shape=tiny_7_5"), environ={})
    assert full.covariance_type == "full" and full.digest != diag.digest
