"""experiment=kmeans: the protocol's settings, its float64 gate and reference, and the CPU path from cells to the
table and figure (harness/PROTOCOL.md, "The k-means protocol")."""
import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from figures import render_all
from gate.kmeans import INERTIA_TOL, inertia, lloyd_reference, rescore_kmeans
from harness.cell import CellSpec, SettingError
from harness.results import COLUMNS, collect, read_csv
from harness.tests.conftest import PLANTED_CONF, REPO
from turbo_gmm.datasets import make_dataset

KMEANS_ARMS = ["kmeans_turbo_gmm", "kmeans_sklearn", "kmeans_flash_kmeans", "kmeans_cuvs", "kmeans_faiss"]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _spec(*overrides):
    return CellSpec.from_cfg(_compose(*overrides), environ={})


def test_kmeans_sweeps_every_kmeans_arm_over_1M_to_20M_rows_and_every_cell_is_checked():
    c = _compose("experiment=kmeans")
    params = c.hydra.sweeper.params
    assert (c.experiment_name, c.protocol, c.kmeans.iterations) == ("kmeans", "kmeans", 10)
    assert params.arm.split(",") == KMEANS_ARMS  # ours, then the reference: a sweep cut short holds them
    sizes = []
    for shape in params.shape.split(","):
        s = _compose(f"shape={shape}").shape
        sizes.append((s.N, s.K, s.d))
        for arm in KMEANS_ARMS:
            spec = _spec("experiment=kmeans", f"shape={shape}", f"arm={arm}")
            assert spec.protocol == "kmeans" and spec.n_iter == 10 and spec.data_components == -(-s.K // 8)
    Ns, Ks, ds = zip(*sizes)
    assert (min(Ns), max(Ns), min(Ks), max(Ks), min(ds), max(ds)) == (10**6, 2 * 10**7, 32, 4096, 32, 128)
    for shape in _compose("experiment=kmeans_smoke").hydra.sweeper.params.shape.split(","):
        assert _compose(f"shape={shape}").shape.N <= 20_000


def test_a_kmeans_cell_is_driven_by_the_arms_kmeans_block_and_is_a_cell_of_its_own():
    spec = _spec("arm=kmeans_sklearn", "shape=tiny_7_5", "protocol=kmeans")
    assert (spec.n_iter, spec.reps, spec.e2e_reps, spec.warmups, spec.timeout_s, spec.data_components, spec.tol) == (
        10, 2, 1, 0, 900.0, 1, None)  # conf/arm/kmeans_sklearn.yaml; ceil(7 / 8) components
    for override in ("kmeans.iterations=5", "arm.kmeans.reps=1", "arm.kmeans.e2e_reps=2", "arm.kmeans.warmups=1",
                     "kmeans.clusters_per_component=1", "seed=1"):
        assert _spec("arm=kmeans_sklearn", "shape=tiny_7_5", "protocol=kmeans", override).key != spec.key, override
    assert spec.as_dict()["data_components"] == 1 and "data_components" not in _spec("arm=sklearn").as_dict()
    assert CellSpec.from_dict(spec.as_dict()) == spec


@pytest.mark.parametrize("overrides, message", [
    (["arm=sklearn", "protocol=kmeans"], "arm=sklearn has no k-means fit: protocol=kmeans runs the k-means arms"),
    (["arm=kmeans_sklearn"], "arm=kmeans_sklearn runs under protocol=kmeans only, not protocol=fixed_init"),
    (["arm=kmeans_sklearn", "protocol=kmeans", "kmeans.iterations=0"], "kmeans.iterations=0: must be an integer >= 1"),
])
def test_an_arm_runs_only_under_its_protocols_and_bad_settings_are_refused(overrides, message):
    with pytest.raises(SettingError) as e:
        _spec("shape=tiny_7_5", *overrides)
    assert str(e.value).startswith(message)


@pytest.fixture(scope="module")
def blob():
    X = make_dataset(1023, 2, 5, 0).X
    seeds = X[torch.as_tensor([3, 500, 800, 1000, 17])]
    return X, seeds


def test_the_float64_reference_is_scikit_learns_lloyd_empty_clusters_included(blob):
    """From the same seeds, scikit-learn's Lloyd (tol 0, 10 iterations) and the gate's float64 one end at the same
    centers; with a duplicated seed one cluster empties at once and both relocate it to the farthest row."""
    from sklearn.cluster import KMeans

    X, seeds = blob
    for start in (seeds, torch.cat([seeds[:4], seeds[:1]])):  # the second: seeds 0 and 4 equal, cluster 4 empty
        ref = lloyd_reference(X, start, 10, chunk_elems=256)  # many row blocks
        km = KMeans(len(start), init=start.double().numpy(), n_init=1, max_iter=10, tol=0.0).fit(X.double().numpy())
        assert ref.n_iter == km.n_iter_
        np.testing.assert_allclose(ref.centers.numpy(), km.cluster_centers_, rtol=0, atol=1e-12)
        assert ref.inertia == pytest.approx(km.inertia_, rel=1e-12)
        assert inertia(X, km.cluster_centers_) == pytest.approx(ref.inertia, rel=1e-12)


def test_the_gate_rejects_doctored_centers_and_keeps_honest_ones(blob):
    X, seeds = blob
    ref = lloyd_reference(X, seeds, 10)
    rows = np.arange(0, 1023, 7)
    honest = rescore_kmeans(X, ref.centers.float(), ref.inertia, rows, 10, 10)
    assert honest.gate == "valid" and honest.inertia == pytest.approx(ref.inertia, rel=1e-6)
    assert (honest.labels == ref.labels[torch.as_tensor(rows)].numpy()).all()
    better = lloyd_reference(X, seeds, 300)  # lower inertia than the reference's: another end, not a failure
    assert better.inertia <= ref.inertia and rescore_kmeans(X, better.centers, ref.inertia).gate == "valid"
    doctored = ref.centers.clone()
    doctored[0, 0] += 0.5
    verdict = rescore_kmeans(X, doctored, ref.inertia)
    assert verdict.inertia > ref.inertia * (1 + INERTIA_TOL)
    assert verdict.gate.startswith("rejected (inertia +") and "float64 Lloyd reference" in verdict.gate
    nan = ref.centers.clone()
    nan[2, 1] = float("nan")
    assert rescore_kmeans(X, nan, ref.inertia, rows).gate == "rejected (non-finite centers)"
    assert rescore_kmeans(X, ref.centers[:, :3], ref.inertia).gate.startswith("rejected (centers of shape (5, 3)")
    assert rescore_kmeans(X, ref.centers, ref.inertia, None, 10, 11).gate == "rejected (ran 11 of 10 iterations)"


@pytest.mark.parametrize("module", ["arms.kmeans_flash_kmeans", "arms.kmeans_cuvs", "arms.kmeans_faiss"])
def test_the_gpu_arms_say_why_they_cannot_run_here(module):
    import importlib

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: whether these libraries load is the GPU run's to say")
    reason = importlib.import_module(module).available()
    assert isinstance(reason, str) and reason.strip()


def _run(args, tmp_path, timeout=240):
    env = dict(os.environ, TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "harness", *args, f"results_dir={tmp_path / 'results'}", "device_label=testdev"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_kmeans_smoke_sweep_goes_from_cells_to_table_and_figure(tmp_path):
    """Ours (the fused kernels in the interpreter), scikit-learn, a GPU-only arm and a planted doctored arm, through
    the CLI: records, the CSV, the gate's verdicts, the reference, and the rendered table and figure."""
    _run(["-m", "experiment=kmeans_smoke", "shape=tiny_7_5", f"hydra.searchpath=[file://{PLANTED_CONF}]",
          "arm=kmeans_turbo_gmm,kmeans_sklearn,kmeans_flash_kmeans,planted_kmeans_doctored",
          f"hydra.sweep.dir={tmp_path / 'hydra'}"], tmp_path)
    device_dir = tmp_path / "results" / "testdev"
    cells = device_dir / "kmeans_smoke" / "cells"
    assert len(list(cells.glob("*.json"))) == 4 and len(list(cells.glob("*.npz"))) == 3  # unavailable: no params
    rows = {r["arm"]: r for r in read_csv(device_dir / "kmeans_smoke.csv")}
    ours, sk = rows["kmeans_turbo_gmm"], rows["kmeans_sklearn"]
    for r in (ours, sk):
        assert (r["status"], r["gate"], r["protocol"]) == ("ok", "valid", "kmeans")
        assert r["reference_arm"] == "kmeans_sklearn"
        assert r["n_iter"] == r["n_iter_reported"] == "10" and float(r["ms_per_iter_min"]) > 0
        assert abs(float(r["rel_inertia_diff"])) < 1e-6 and float(r["ari"]) == 1.0
        assert abs(float(r["inertia"]) / float(r["reference_inertia"]) - 1) < 1e-6
        assert (r["e2e_status"], r["e2e_gate"], r["e2e_reference"]) == ("ok", "valid", "kmeans_sklearn")
        assert float(r["e2e_wall_s"]) > 0 and int(r["iterations"]) >= 1 and float(r["e2e_inertia"]) > 0
        assert r["info"]["seeding"] == "sklearn.cluster.kmeans_plusplus"
    assert ours["info"]["seeds_sha"] == sk["info"]["seeds_sha"] and ours["data_checksum"] == sk["data_checksum"]
    assert ours["info"]["backend"] == "triton-interpreter" and ours["precision"] == "tf32x3"
    assert rows["kmeans_flash_kmeans"]["status"].startswith("unavailable: ")  # no package here, or no GPU
    doctored = rows["planted_kmeans_doctored"]
    assert doctored["status"] == "ok" and doctored["gate"].startswith("rejected (inertia +")  # kept, never dropped
    assert float(doctored["rel_inertia_diff"]) > INERTIA_TOL
    assert doctored["e2e_status"] == "fail (OOM)" and doctored["e2e_wall_s"] == ""  # SIGKILLed after (a) was filed
    paths = render_all.render_folder(device_dir, say=lambda _: None)
    assert {p.name for p in paths} >= {"kmeans_smoke.md", "kmeans_smoke_fig.png", "kmeans_smoke_fig.pdf"}
    table = (device_dir / "kmeans_smoke.md").read_text()
    assert "| tiny/7/5 | Turbo-GMM KMeans |" in table and "rejected (inertia +" in table
    assert "| flash-kmeans |" in table and "unavailable: " in table

    # without scikit-learn's row the reference is the float64 Lloyd each cell computed
    alone = tmp_path / "alone" / "kmeans_smoke"
    (alone / "cells").mkdir(parents=True)
    for f in cells.iterdir():
        if f.name.startswith(("kmeans_turbo_gmm__", "planted_")):
            shutil.copy(f, alone / "cells" / f.name)
    rows = {r["arm"]: r for r in read_csv(collect(alone))}
    ours = rows["kmeans_turbo_gmm"]
    assert ours["reference_arm"] == "float64 Lloyd" and float(ours["ari"]) == 1.0
    assert rows["kmeans_turbo_gmm"]["e2e_reference"] == "float64 Lloyd"
    assert float(rows["planted_kmeans_doctored"]["rel_inertia_diff"]) > INERTIA_TOL


def test_one_kmeans_cell_from_the_command_line_is_recorded_once_and_then_skipped(tmp_path):
    args = ["arm=kmeans_sklearn", "shape=tiny_3_33", "protocol=kmeans"]
    first = _run(args, tmp_path)
    assert "[harness] done kmeans_sklearn__tiny_3_33__" in first.stdout and "own fit: ok valid" in first.stdout
    (row,) = read_csv(tmp_path / "results" / "testdev" / "adhoc.csv")
    assert (row["arm"], row["status"], row["gate"], row["e2e_status"], row["protocol"]) == (
        "kmeans_sklearn", "ok", "valid", "ok", "kmeans")
    assert "record exists" in _run(args, tmp_path).stdout


def test_a_csv_without_a_gpu_row_still_renders(tmp_path):
    """Every GPU arm unavailable and nothing else: the table lists why, the figure says nothing ran."""
    path = tmp_path / "kmeans.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for arm, label in (("kmeans_flash_kmeans", "flash-kmeans"), ("kmeans_faiss", "FAISS Kmeans (GPU)")):
            w.writerow({c: "" for c in COLUMNS} | dict(
                device="cpu", experiment="kmeans", arm=arm, label=label, shape="1M_1024_32", N=10**6, K=1024, d=32,
                n_iter=10, timeout_s=300, status="unavailable: needs a CUDA GPU; none is visible", protocol="kmeans"))
    paths = render_all.render_folder(tmp_path, say=lambda m: pytest.fail(m))
    assert {p.name for p in paths} == {"kmeans.md", "fig_kmeans.png", "fig_kmeans.pdf"}
    assert "| 1M/1024/32 | flash-kmeans |" in (tmp_path / "kmeans.md").read_text()
