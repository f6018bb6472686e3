"""The e2e protocol: its cell spec, and the whole CPU path (cells, records, CSV, table, figure) on tiny shapes."""
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from figures import render_all
from harness.cell import CellSpec, SettingError
from harness.results import read_csv
from harness.tests.conftest import REPO


def _spec(*overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["arm=sklearn", "shape=tiny_7_5", *overrides])
    return CellSpec.from_cfg(cfg, environ={})


def test_an_e2e_cell_is_driven_by_the_arms_e2e_block_and_is_a_cell_of_its_own():
    fixed, e2e = _spec(), _spec("protocol=e2e")
    assert e2e.key != fixed.key and e2e.key.startswith("sklearn__tiny_7_5__")
    assert (e2e.n_iter, e2e.tol, e2e.reps, e2e.warmups, e2e.timeout_s) == (100, 1e-3, 1, 0, 60.0)  # conf/arm/sklearn.yaml
    assert (fixed.n_iter, fixed.tol, fixed.reps, fixed.timeout_s) == (10, None, 3, 1800.0)
    for override in ("e2e.tol=1e-4", "e2e.max_iter=50", "arm.e2e.warmups=1", "arm.e2e.reps=2", "arm.e2e.timeout_s=5"):
        assert _spec("protocol=e2e", override).key != e2e.key, override
    assert _spec("protocol=e2e", "n_iter=3").key == e2e.key  # Table 1's iteration count plays no part in e2e
    assert _spec("e2e.tol=1e-4").key == fixed.key  # nor e2e's settings in a fixed_init cell


def test_an_arm_without_an_e2e_block_runs_e2e_with_its_own_reps_and_timeout():
    spec = _spec("protocol=e2e", "arm=pytorch")
    assert (spec.reps, spec.warmups, spec.timeout_s, spec.protocol) == (3, 1, 1800.0, "e2e")


@pytest.mark.parametrize("override, message", [
    ("protocol=fast", "protocol='fast': must be one of fixed_init, e2e, kmeans"),
    ("e2e.tol=-1", "e2e.tol=-1: must be a finite number >= 0"),
    ("e2e.max_iter=0", "e2e.max_iter=0: must be an integer >= 1"),
])
def test_bad_e2e_settings_are_refused_with_their_range(override, message):
    with pytest.raises(SettingError) as e:
        _spec("protocol=e2e", override)
    assert str(e.value) == message


def test_the_e2e_smoke_sweep_goes_from_cells_to_table_and_figure(tmp_path):
    """Our estimator, scikit-learn and an arm without an end-to-end fit, through the CLI, then render_all."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "harness", "-m", "experiment=e2e_smoke", "shape=tiny_7_5",
           "arm=turbo_gmm,sklearn,pytorch,turbo_gmm_sklearn_init", f"hydra.sweep.dir={tmp_path / 'hydra'}",
           f"results_dir={tmp_path / 'results'}", "device_label=testdev"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    device_dir = tmp_path / "results" / "testdev"
    rows = {r["arm"]: r for r in read_csv(device_dir / "e2e_smoke.csv")}
    assert set(rows) == {"turbo_gmm", "sklearn", "pytorch", "turbo_gmm_sklearn_init"}
    assert rows["pytorch"]["status"] == "unavailable: no end-to-end fit"
    ours, sk = rows["turbo_gmm"], rows["sklearn"]
    for r in (ours, sk):
        assert (r["status"], r["gate"], r["protocol"], r["reference_arm"]) == ("ok", "valid", "e2e", "sklearn")
        assert 1 <= int(r["iterations"]) < 100 and r["ms_per_iter_min"] == ""  # converged; no ms/iter in e2e
        assert float(r["e2e_wall_s_host"]) == min(r["rep_seconds"]) > 0 and r["e2e_wall_s_device"] == ""  # no GPU
    # ours: the estimator's fit_profile_ accounts for the wall time the worker measured around the fit
    phases = sum(float(ours[c]) for c in ("transfer_s", "validation_s", "init_s", "em_s", "other_s"))
    assert float(ours["init_s"]) > 0 and float(ours["em_s"]) > 0
    assert abs(float(ours["unsplit_s"])) < 0.1 * float(ours["e2e_wall_s_host"]) and phases > 0
    # scikit-learn: init timed from outside, the rest not split (never invented)
    assert 0 < float(sk["init_s"]) < float(sk["e2e_wall_s_host"]) and sk["em_s"] == sk["other_s"] == ""
    assert float(sk["unsplit_s"]) == pytest.approx(float(sk["e2e_wall_s_host"]) - float(sk["init_s"]))
    # both converge to the same optimum of well-separated data: same labels, same float64 likelihood
    assert float(sk["ari"]) == 1.0 and float(ours["ari"]) > 0.99
    assert abs(float(ours["rel_ll_diff"])) < 1e-4
    # from scikit-learn's own draws: its iterations and optimum, to float32's agreement (tf32x3 in the e2e arm)
    same = rows["turbo_gmm_sklearn_init"]
    assert same["info"]["init_backend"] == "sklearn" and same["iterations"] == sk["iterations"]
    assert float(same["ari"]) == 1.0 and abs(float(same["rel_ll_diff"])) < 1e-6
    paths = render_all.render_folder(device_dir, say=lambda _: None)
    assert {p.name for p in paths} >= {"e2e_smoke.md", "e2e_smoke_fig.png", "e2e_smoke_fig.pdf"}
    table = (device_dir / "e2e_smoke.md").read_text()
    assert "| tiny/7/5 | Turbo-GMM |" in table and "unavailable: no end-to-end fit" in table
