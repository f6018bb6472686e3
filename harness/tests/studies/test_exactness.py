"""The exactness battery's CSV at a tiny size: every configuration ran, errors are
small where they must be, and a planted wrong reference is caught."""
import csv

import numpy as np
import pytest

from harness.studies import exactness


def test_quick_battery_writes_every_configuration(tmp_path):
    out = tmp_path / "exactness.csv"
    assert exactness.main(["--out", str(out), "--quick"]) == 0
    rows = list(csv.DictReader(open(out)))
    n_mp, n_or = len(exactness.QUICK_MP_CASES), len(exactness.QUICK_ORACLE_CASES) * len(exactness.QUICK_TILINGS)
    assert len(rows) == (n_mp + n_or) * 2 * 3  # x algorithms x precisions
    assert list(rows[0]) == exactness.COLUMNS
    assert {r["reference"] for r in rows} == {"mpmath-60", "float64-oracle"}
    assert {(r["algorithm"], r["precision"]) for r in rows} == {(a, p) for a in exactness.ALGORITHMS
                                                                for p in exactness.PRECISIONS}
    for r in rows:
        assert r["status"] == "ok" and r["git_commit"] and "triton" in r["versions"]
        errs = [float(r[c]) for c in exactness.ERROR_COLUMNS]
        assert max(errs) < 2e-6, r  # fp32 roundoff over <= 203 rows
        if r["precision"] == "fp64":  # issue 20: float64 EM's arithmetic, against both references
            assert float(r["bound"]) == 1e-12 and r["within_bound"] == "True" and max(errs) <= 1e-12, r
        else:
            assert r["bound"] == "" and r["within_bound"] == "", r


def test_relative_errors_see_a_wrong_statistic():
    X = np.ones((10, 2))
    good = (np.full(1, 10.0), np.full((1, 2), 10.0), np.full((1, 2), 10.0), -5.0)
    bad = (good[0], good[1], good[2] * 1.01, -5.0)
    scales = exactness.statistic_scales(X, np.ones(1), np.ones((1, 2)), np.ones((1, 2)))
    e = exactness.relative_errors(bad, good, scales)
    assert e["max_rel_err_u"] == pytest.approx(0.01) and e["max_rel_err_n"] == 0.0


def test_relative_errors_are_per_component():
    """A 1e-4 relative error in u of a component holding ~1e-3 of the mass: the battery reads 1e-4; N max|x|^2,
    its scale before issue 21, read 2e-8."""
    X, w, m, v = exactness.problem(400, 3, 2, seed=1)
    Xn = X.cpu().numpy()
    w = np.array([0.4995, 0.4995, 0.001])
    want = exactness.ref.estep(Xn, w, m, v)
    got = (want[0], want[1], want[2].copy(), want[3])
    got[2][2] *= 1 + 1e-4
    e = exactness.relative_errors(got, want, exactness.statistic_scales(Xn, w, m, v))
    assert e["max_rel_err_u"] == pytest.approx(1e-4, rel=1e-6) and e["max_rel_err_n"] == 0.0
    assert float(np.abs(got[2] - want[2]).max()) / (400 * float(np.abs(Xn).max()) ** 2) < 1e-7


def test_fp64_bound_sees_a_float32_sized_error(monkeypatch, tmp_path):
    """A kernel whose fp64 rows carried float32-sized errors would be flagged over the bound, not pass."""
    real = exactness.kernel_statistics

    def rounded(algorithm, X, w, m, v, precision, cfg):
        got = real(algorithm, X, w, m, v, precision, cfg)
        if precision != "fp64":
            return got
        return (*(np.float32(a).astype(np.float64) for a in got[:3]), float(np.float32(got[3])), got[4])

    monkeypatch.setattr(exactness, "kernel_statistics", rounded)
    rows = exactness.battery(exactness.QUICK_MP_CASES[:1], [], [], progress=lambda _: None)
    fp64 = [r for r in rows if r["precision"] == "fp64"]
    assert fp64 and all(r["within_bound"] is False for r in fp64)
