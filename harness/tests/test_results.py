"""The experiment CSV: a function of the cell records, safe under parallel writers."""
import json
import multiprocessing as mp

import numpy as np
import pytest

from harness.results import COLUMNS, collect, read_csv, write_json_atomic, write_npz_atomic


def _record(arm, shape="s", gate="valid", ll=-7.0, secs=(0.02, 0.01, 0.03), precision="fp32", N=1000, K=4, d=8):
    return {"device": "dev", "experiment": "e", "arm": arm, "label": arm, "shape": shape, "N": N, "K": K, "d": d,
            "seed": 0, "numerics": precision, "precision": precision, "n_iter": 10, "reps": len(secs),
            "rep_seconds": list(secs), "status": "ok", "gate": gate, "ll_per_point": ll, "data_checksum": "c",
            "params_file": f"cells/{arm}__{shape}.npz"}


def _write(exp, rec, labels):
    """As the runner files a cell: the parameters first, then the record that names them."""
    write_npz_atomic(exp / "cells" / f"{rec['arm']}__{rec['shape']}.npz", labels=np.asarray(labels, np.int32))
    write_json_atomic(exp / "cells" / f"{rec['arm']}__{rec['shape']}.json", rec)


def test_derived_columns(tmp_path):
    exp = tmp_path / "dev" / "e"
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "env.json").write_text(json.dumps(
        {"probes": {"hbm_read_gb_per_s": 4000.0, "tf32_tflops": 400.0, "fp32_tflops": 50.0, "fp64_tflops": 4.5}}))
    _write(exp, _record("turbo_gmm", gate="rejected (non-finite LL)", precision="tf32x3"), [0, 0, 1, 1])
    _write(exp, _record("turbo_gmm_fp64", gate="rejected (non-finite LL)", precision="fp64"), [0, 0, 1, 1])
    _write(exp, _record("pytorch", ll=-7.0), [0, 0, 1, 1])
    _write(exp, _record("sklearn", ll=-7.0007), [1, 1, 0, 0])
    _write(exp, _record("gmmx", ll=-6.0), [0, 1, 0, 1])
    rows = {r["arm"]: r for r in read_csv(collect(exp))}
    assert list(rows) == ["turbo_gmm", "turbo_gmm_fp64", "pytorch", "sklearn", "gmmx"]  # conf/config.yaml arm_order
    p = rows["pytorch"]
    assert float(p["ms_per_iter_min"]) == pytest.approx(1.0) and float(p["ms_per_iter_median"]) == pytest.approx(2.0)
    assert float(p["ms_per_iter_spread"]) == pytest.approx(2.0)
    assert float(p["x_gb_per_s"]) == pytest.approx(1000 * 8 * 4 / 1e-3 / 1e9)
    assert float(p["hbm_fraction"]) == pytest.approx(float(p["x_gb_per_s"]) / 4000)
    # the roofline: each precision's products at its probe or one read of X, the longer (harness.roofline)
    read_s = 1000 * 8 * 4 / 4000e9
    assert float(p["roofline_fraction"]) == pytest.approx(read_s / 1e-3)  # 8NKd at 50 TFLOP/s is shorter
    assert 8 * 1000 * 4 * 8 / 50e12 < read_s
    assert float(rows["turbo_gmm"]["roofline_fraction"]) == pytest.approx(read_s / 1e-3)
    assert 3 * 8 * 1000 * 4 * 8 / 400e12 < read_s
    assert float(rows["turbo_gmm_fp64"]["roofline_fraction"]) == pytest.approx(8 * 1000 * 4 * 8 / 4.5e12 / 1e-3)
    # turbo_gmm is rejected, so the reference is the first valid arm in table order
    assert {r["reference_arm"] for r in rows.values() if r["gate"] == "valid"} == {"pytorch"}
    assert rows["turbo_gmm"]["reference_arm"] == "" and rows["turbo_gmm"]["ari"] == ""
    assert float(rows["sklearn"]["rel_ll_diff"]) == pytest.approx(-1e-4) and float(rows["sklearn"]["ari"]) == 1.0
    assert float(rows["gmmx"]["ari"]) < 0.5
    with open(exp.with_suffix(".csv")) as f:
        assert f.readline().strip().split(",") == COLUMNS


@pytest.mark.parametrize("gpu, one_pass_at", [("NVIDIA H200", {(16, 16), (64, 128), (256, 16), (128, 32)}),
                                              (None, {(16, 16)})])  # no GPU named: the paper's A100 rule
def test_dispatch_choice_is_the_kernels_rule_for_the_folders_gpu(tmp_path, gpu, one_pass_at):
    """Measured on the H200, one pass runs up to K_pad * d_pad = 8192 at K_pad <= 128 and at (256, 16);
    the A100 rule stops at 4096 and K_pad <= 128. Whatever the arm: the column describes the cell's (K, d), at
    its precision: fp64 at (128, 32) is asked at (128, 64), 8192, one pass on the H200 only."""
    exp = tmp_path / "dev" / "e"
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "env.json").write_text(json.dumps({"gpu": gpu}))
    cells = (("turbo_gmm", 16, 16, "tf32x3"), ("turbo_gmm", 64, 128, "tf32x3"), ("pytorch", 256, 16, "fp32"),
             ("turbo_gmm", 256, 32, "tf32x3"), ("turbo_gmm_fp64", 128, 32, "fp64"))
    for arm, K, d, precision in cells:
        _write(exp, _record(arm, shape=f"s{K}_{d}", K=K, d=d, precision=precision), [0, 1, 1, 0])
    rows = read_csv(collect(exp))
    assert {(int(r["K"]), int(r["d"])): r["dispatch_choice"] for r in rows} == {
        (K, d): "one_pass" if (K, d) in one_pass_at else "two_pass" for _, K, d, _ in cells}


def _writer(exp, worker, n):
    for i in range(n):
        rec = _record(f"arm{worker}", shape=f"s{i}", N=1000 + i)
        _write(exp, rec, [0, 1, 1, 0])
        rows = read_csv(collect(exp))  # never a partial file
        assert all(r["status"] == "ok" for r in rows)


def test_parallel_writers_lose_and_duplicate_nothing(tmp_path):
    exp = tmp_path / "dev" / "e"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(exp, w, 8)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    rows = read_csv(exp.with_suffix(".csv"))
    keys = [(r["arm"], r["shape"]) for r in rows]
    assert len(keys) == 32 and len(set(keys)) == 32


def test_diagnostic_csv_takes_every_key_in_first_seen_order(tmp_path):
    from harness.results import read_csv, write_diagnostic_csv

    path = tmp_path / "m.csv"
    write_diagnostic_csv(path, [{"shape": "1M_32_32", "iter_ms": 0.28}, {"shape": "1M_512_32", "error": "OutOfResources"}])
    assert path.read_text().splitlines()[0] == "shape,iter_ms,error"
    rows = read_csv(path)
    assert rows[1]["error"] == "OutOfResources" and rows[1]["iter_ms"] == ""


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize("damage, reason", [
    (lambda p: _truncate(p), "JSONDecodeError"),
    (lambda p: p.write_text("{}"), "no arm, shape, status, N, K, d, n_iter, seed"),
    (lambda p: _truncate(p.with_suffix(".npz")), "its pytorch__s.npz: BadZipFile"),
    (lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), n_iter=0))), "n_iter=0, not an integer >= 1"),
])
def test_an_unreadable_record_is_quarantined_and_the_csv_rebuilt_without_it(tmp_path, capsys, damage, reason):
    exp = tmp_path / "dev" / "e"
    _write(exp, _record("pytorch"), [0, 0, 1, 1])
    _write(exp, _record("sklearn"), [1, 1, 0, 0])
    bad = exp / "cells" / "pytorch__s.json"
    damage(bad)
    rows = read_csv(collect(exp))
    assert [r["arm"] for r in rows] == ["sklearn"] and rows[0]["reference_arm"] == "sklearn"
    err = capsys.readouterr().err
    assert f"warning: unreadable cell record {bad} ({reason}" in err and "counts as not yet run" in err
    quarantined = sorted(p.name for p in (exp / "cells" / "quarantine").iterdir())
    assert quarantined == ["pytorch__s.json", "pytorch__s.npz"] and not bad.exists()
    assert [r["arm"] for r in read_csv(collect(exp))] == ["sklearn"]  # and the next collect is quiet
    assert "warning" not in capsys.readouterr().err


def test_a_record_whose_cell_is_held_is_left_in_place(tmp_path, capsys):
    """Another runner holds the cell (it is rewriting the record): leave the file, keep it out of the CSV."""
    exp = tmp_path / "dev" / "e"
    _write(exp, _record("pytorch"), [0, 0, 1, 1])
    bad = exp / "cells" / "pytorch__s.json"
    bad.write_text("{")
    ctx = mp.get_context("spawn")
    held, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(bad, held, release))
    holder.start()
    assert held.wait(60)
    try:
        assert read_csv(collect(exp)) == [] and bad.exists()
        assert "its cell is being rerun, left out of this CSV" in capsys.readouterr().err
    finally:
        release.set()
        holder.join(30)


def _hold_lock(record, held, release):
    from harness.results import cell_lock

    with cell_lock(record):
        held.set()
        release.wait(60)


@pytest.mark.parametrize("labels", [[0, 0, 1], [[0, 0], [1, 1]]], ids=["another_length", "not_one_vector"])
def test_labels_that_cannot_be_compared_never_block_the_csv(tmp_path, capsys, labels):
    """Issue 47 (3): a cell run with another ari_rows (or an .npz whose labels were cut short) beside the others
    made adjusted_rand_score raise inside collect, so no job of the folder could write the CSV again. Now its row
    is written without an ARI, a warning names it, and every other row keeps its own."""
    exp = tmp_path / "dev" / "e"
    _write(exp, _record("turbo_gmm"), [0, 0, 1, 1])
    _write(exp, _record("pytorch", ll=-7.0007), labels)
    _write(exp, _record("sklearn", ll=-7.0007), [1, 1, 0, 0])
    rows = {r["arm"]: r for r in read_csv(collect(exp, ["turbo_gmm", "pytorch", "sklearn"]))}
    assert list(rows) == ["turbo_gmm", "pytorch", "sklearn"]
    assert rows["pytorch"]["ari"] == "" and float(rows["pytorch"]["rel_ll_diff"]) == pytest.approx(-1e-4)
    assert float(rows["sklearn"]["ari"]) == 1.0
    err = capsys.readouterr().err
    assert "warning: cell pytorch__s: no ARI against turbo_gmm__s" in err
    _write(exp, _record("gmmx", ll=-7.0), [0, 0, 1, 1])  # the next record still reaches the CSV
    assert "gmmx" in {r["arm"] for r in read_csv(collect(exp, ["turbo_gmm", "pytorch", "sklearn", "gmmx"]))}
