"""The e2e protocol: its cell spec, and the whole CPU path (cells, records, CSV, table, figure) on tiny shapes."""
import json
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from figures import render_all, table_e2e
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


def test_full_covariances_and_empty_caches_are_cells_of_their_own_and_diag_keeps_its_key():
    e2e = _spec("protocol=e2e")
    assert _spec("protocol=e2e", "covariance_type=diag", "e2e.cold_cache=false").key == e2e.key
    assert "cold_cache" not in e2e.as_dict() and "covariance_type" not in e2e.as_dict()
    full, cold = _spec("protocol=e2e", "covariance_type=full"), _spec("protocol=e2e", "e2e.cold_cache=true")
    both = _spec("protocol=e2e", "covariance_type=full", "e2e.cold_cache=true")
    assert len({e2e.key, full.key, cold.key, both.key}) == 4
    assert full.as_dict()["covariance_type"] == "full" and cold.as_dict()["cold_cache"] is True
    for spec in (full, cold):
        assert CellSpec.from_dict(json.loads(json.dumps(spec.as_dict()))) == spec
    assert _spec("e2e.cold_cache=true").key == _spec().key  # an e2e setting: no part of a fixed_init cell
    with pytest.raises(SettingError, match=r"^e2e.cold_cache=1: must be true or false$"):
        _spec("protocol=e2e", "e2e.cold_cache=1")


def test_the_committed_diag_e2e_cells_keep_their_keys():
    """Every committed e2e record is the diag cell that experiment=e2e composes today at its arm and shape (with
    the limit, reps and warm-ups it ran under): the covariance axis and the cold-start fields rekey none."""
    records = sorted((REPO / "results" / "h200" / "e2e" / "cells").glob("*.json"))
    assert len(records) >= 30
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        for path in records:
            ran = json.loads(path.read_text())["spec"]
            cfg = compose("config", overrides=[
                "experiment=e2e", f"arm={ran['arm']}", f"shape={ran['shape']}", "covariance_type=diag",
                f"arm.e2e.timeout_s={ran['timeout_s']}", f"arm.e2e.reps={ran['reps']}",
                f"arm.e2e.warmups={ran['warmups']}"])
            assert CellSpec.from_cfg(cfg, environ=ran["env"]).key == path.stem


def test_the_committed_e2e_table_renders_unchanged(tmp_path):
    """No committed row has a covariance type other than diag or a first fit: the table is what it was."""
    committed = REPO / "results" / "h200"
    (md,) = table_e2e.render(committed / "e2e.csv", tmp_path)
    assert md.read_text() == (committed / "e2e.md").read_text()


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


def _sweep(tmp_path, *overrides, env=None):
    cmd = [sys.executable, "-m", "harness", "-m", "experiment=e2e_smoke", f"hydra.sweep.dir={tmp_path / 'hydra'}",
           f"results_dir={tmp_path / 'results'}", "device_label=testdev", f"cache_dir={tmp_path / 'cache'}",
           *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TRITON_INTERPRET="1", **(env or {})))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / "results" / "testdev"


def test_the_e2e_smoke_sweep_goes_from_cells_to_table_and_figure(tmp_path):
    """Our estimator, scikit-learn and an arm without an end-to-end fit, diag and full, through the CLI, then
    render_all."""
    device_dir = _sweep(tmp_path, "shape=tiny_7_5", "arm=turbo_gmm,sklearn,pytorch,turbo_gmm_sklearn_init")
    every = read_csv(device_dir / "e2e_smoke.csv")
    arms = ("turbo_gmm", "sklearn", "pytorch", "turbo_gmm_sklearn_init")
    assert sorted((r["arm"], r["covariance_type"]) for r in every) == sorted(
        (arm, kind) for arm in arms for kind in ("diag", "full"))
    # every cell reports its process's first fit and whether the compilation caches were empty at its start
    for r in every:
        assert r["cache_state"] in ("empty", "warm"), r["arm"]
        assert (r["e2e_first_fit_s"] == "") == (r["status"] != "ok"), r["arm"]
    full = {r["arm"]: r for r in every if r["covariance_type"] == "full"}
    rows = {r["arm"]: r for r in every if r["covariance_type"] == "diag"}
    assert rows["pytorch"]["status"] == full["pytorch"]["status"] == "unavailable: no end-to-end fit"
    # full covariances: every arm's own "full" fit, gated in float64 and compared with scikit-learn's full fit only
    for r in (full["turbo_gmm"], full["sklearn"], full["turbo_gmm_sklearn_init"]):
        assert (r["status"], r["gate"], r["reference_arm"]) == ("ok", "valid", "sklearn"), r["arm"]
        assert 1 <= int(r["iterations"]) < 100 and r["info"]["converged"]
    assert float(full["turbo_gmm_sklearn_init"]["ari"]) == 1.0
    assert abs(float(full["turbo_gmm_sklearn_init"]["rel_ll_diff"])) < 1e-6
    for r in (rows["sklearn"], full["sklearn"]):  # each type's own reference: no full fit scored against a diag one
        assert float(r["rel_ll_diff"]) == 0.0 and float(r["ari"]) == 1.0
    # the first fit: scikit-learn warms up nothing, so it is its first timed fit; ours is the untimed warm-up
    for r in (rows["sklearn"], full["sklearn"]):
        assert float(r["e2e_first_fit_s"]) == r["rep_seconds"][0] and r["info"]["e2e_first_fit_timed"]
    for r in (rows["turbo_gmm"], full["turbo_gmm"]):
        assert float(r["e2e_first_fit_s"]) > 0 and not r["info"]["e2e_first_fit_timed"]
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
    assert "| tiny/7/5 | diag | Turbo-GMM |" in table and "|  | full | Turbo-GMM |" in table
    assert "unavailable: no end-to-end fit" in table and "First fit, host array (s; caches)" in table


def test_a_cold_cache_cell_starts_with_empty_caches_of_its_own(tmp_path):
    """e2e.cold_cache=false,true: one sweep records both states; the cold cell's caches are a fresh temporary
    folder, removed after it, and the shared caches are left as they were."""
    planted = tmp_path / "cache" / "testdev" / "jax" / "planted"  # a compilation a warm cell could hit
    planted.parent.mkdir(parents=True)
    planted.write_text("x")
    device_dir = _sweep(tmp_path, "shape=tiny_7_5", "arm=sklearn", "covariance_type=diag",
                        "e2e.cold_cache=false,true")
    recs = {rec["spec"].get("cold_cache", False): rec for rec in
            (json.loads(p.read_text()) for p in (device_dir / "e2e_smoke" / "cells").glob("*.json"))}
    warm, cold = recs[False], recs[True]
    assert (warm["cache_state"], cold["cache_state"]) == ("warm", "empty")
    twin = {k: v for k, v in cold["spec"].items() if k != "cold_cache"}  # the only difference: warm keeps its key
    assert "cold_cache" not in warm["spec"] and CellSpec.from_dict(twin).key == warm["cell"] != cold["cell"]
    assert warm["cache_usage"]["jax"] == {"path": str(planted.parent), "files": 1, "bytes": 1}
    cold_dir = os.path.dirname(cold["cache_usage"]["jax"]["path"])
    assert not os.path.exists(cold_dir) and str(tmp_path / "cache") not in cold_dir
    assert {u["files"] for u in cold["cache_usage"].values()} == {0} and planted.exists()
    rows = read_csv(device_dir / "e2e_smoke.csv")
    assert sorted(r["cache_state"] for r in rows) == ["empty", "warm"]
    assert all(float(r["e2e_first_fit_s"]) > 0 for r in rows)
