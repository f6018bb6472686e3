"""The e2e table and figure from a CSV built through the real record -> collect path."""
import numpy as np

from figures import fig_e2e, table1, table_e2e
from harness.results import collect, write_json_atomic, write_npz_atomic

LABELS = {"turbo_gmm": "Turbo-GMM", "sklearn": "scikit-learn", "cuvs": "cuVS", "pomegranate": "pomegranate"}


def _record(arm, status="ok", host=None, device=None, split=None, timeout_s=60.0, iterations=5):
    rec = {"device": "dev", "experiment": "e2e", "arm": arm, "label": LABELS[arm], "shape": "1M_32_32",
           "N": 1_000_000, "K": 32, "d": 32, "regimes": "large_N", "seed": 0, "numerics": "fp32", "n_iter": 100,
           "reps": 2, "protocol": "e2e", "tol": 1e-3, "timeout_s": timeout_s, "status": status}
    if status == "ok":
        rec.update(gate="valid", rep_seconds=[host, host * 1.1], e2e_wall_s_host=host, e2e_wall_s_device=device,
                   iterations=iterations, ll_per_point=-40.0, data_checksum="x", params_file=f"cells/{arm}.npz",
                   **{f"{p}_s": s for p, s in (split or {}).items()},
                   unsplit_s=host - sum((split or {}).values()))
    return rec


def test_table_and_figure_show_walls_splits_and_a_timeout_as_a_lower_bound(tmp_path):
    exp = tmp_path / "dev" / "e2e"
    recs = [_record("turbo_gmm", host=0.5, device=0.3, split={"transfer": 0.1, "validation": 0.00247, "init": 0.2,
                                                             "em": 0.18, "other": 0.01753}),
            _record("sklearn", host=10.0, split={"init": 4.0}, iterations=6),
            _record("cuvs", status="fail (TIMEOUT)", timeout_s=120.0)]
    labels = {"turbo_gmm": [0, 0, 1, 1], "sklearn": [1, 1, 0, 0]}  # the same partition, permuted
    for r in recs:
        write_json_atomic(exp / "cells" / f"{r['arm']}.json", r)
        if r["arm"] in labels:
            write_npz_atomic(exp / "cells" / f"{r['arm']}.npz", labels=np.array(labels[r["arm"]], np.int32))
    csv = collect(exp, ["turbo_gmm", "sklearn", "cuvs"])
    (md,) = table_e2e.render(csv)
    rows = {line.split(" | ")[1]: line for line in md.read_text().splitlines() if line.startswith("| ")}
    # phases to 3 significant digits: a 2.47 ms phase is not rounded to 0.002 s
    assert "0.500 | 0.300 | transfer 0.100, validation 0.00247, init 0.200, EM 0.180, other 0.0175 | 5" in rows["Turbo-GMM"]
    assert "10.000 | — | init 4.00, not split 6.00 | 6" in rows["scikit-learn"]
    assert "20.00x slower" in rows["scikit-learn"] and "1.0000 |" in rows["Turbo-GMM"]  # ARI vs scikit-learn
    assert "| -40.000000 (+0.0e+00) |" in rows["Turbo-GMM"] and "| -40.000000 |" in rows["scikit-learn"]
    assert "> 120 |" in rows["cuVS"] and "> 240x slower" in rows["cuVS"] and "fail (TIMEOUT)" in rows["cuVS"]
    paths = fig_e2e.render(csv)
    assert [p.name for p in paths] == ["fig_e2e.png", "fig_e2e.pdf"] and all(p.stat().st_size > 0 for p in paths)


def test_each_arm_is_divided_by_the_turbo_gmm_row_of_its_own_run(tmp_path):
    """Turbo-GMM run twice at a shape: scikit-learn (run A) against A's Turbo-GMM, cuVS (run B) against B's, and
    pomegranate (run C, no Turbo-GMM with it) against the newest, named; the figure takes the newest Turbo-GMM."""
    exp = tmp_path / "dev" / "e2e"
    runs = {"turbo_gmm_a": ("turbo_gmm", 0.5, "aaaaaaa", "2026-12-01T10:00:00+0000"),
            "sklearn_a": ("sklearn", 10.0, "aaaaaaa", "2026-12-01T10:05:00+0000"),
            "turbo_gmm_b": ("turbo_gmm", 0.25, "bbbbbbb", "2026-12-02T10:00:00+0000"),
            "cuvs_b": ("cuvs", 1.0, "bbbbbbb", "2026-12-02T10:05:00+0000"),
            "pomegranate_c": ("pomegranate", 2.0, "ccccccc", "2026-11-30T10:00:00+0000")}
    for name, (arm, host, commit, stamp) in runs.items():
        write_json_atomic(exp / "cells" / f"{name}.json", {**_record(arm, host=host, split={"em": host / 2}),
                                                           "params_file": f"cells/{name}.npz", "git_commit": commit,
                                                           "timestamp": stamp})
        write_npz_atomic(exp / "cells" / f"{name}.npz", labels=np.array([0, 0, 1, 1], np.int32))
    csv = collect(exp, ["turbo_gmm", "sklearn", "cuvs", "pomegranate"])
    (md,) = table_e2e.render(csv)
    lines = [line for line in md.read_text().splitlines() if line.startswith("| ") and " | Arm | " not in line]
    by_run = {(line.split(" | ")[1], line.split(" | ")[2].split()[-1]): line for line in lines}
    assert "20.00x slower |" in by_run[("scikit-learn", "aaaaaaa")]
    assert "4.00x slower |" in by_run[("cuVS", "bbbbbbb")]
    assert "8.00x slower (vs bbbbbbb) |" in by_run[("pomegranate", "ccccccc")]
    assert [line.split(" | ")[2] for line in lines if " | Turbo-GMM | " in line] == ["2026-12-02 bbbbbbb",
                                                                                    "2026-12-01 aaaaaaa"]
    rows = table_e2e.read_csv(csv)
    _, _, cell = fig_e2e.shape_arm_grid(table_e2e.newest_first(rows)[::-1])
    assert cell[(table1.shape_key(rows[0]), "turbo_gmm")]["git_commit"] == "bbbbbbb"


def test_covariance_and_first_fit_columns_appear_with_rows_that_have_them(tmp_path):
    """A full row adds the Covariances column (each type compared within itself), a row with its first fit the
    cold-start columns; a row made before them reads "—" there; the figure draws one panel per type."""
    exp = tmp_path / "dev" / "e2e"
    recs = {"turbo_gmm_old": _record("turbo_gmm", host=0.5, split={"em": 0.25}),  # made before the columns
            "turbo_gmm_full": dict(_record("turbo_gmm", host=2.0, split={"em": 1.0}), covariance_type="full",
                                   e2e_first_fit_s=9.5, cache_state="empty"),
            "sklearn_full": dict(_record("sklearn", host=8.0, split={"init": 4.0}), covariance_type="full",
                                 e2e_first_fit_s=8.0, cache_state="warm"),
            "sklearn": _record("sklearn", host=10.0, split={"init": 4.0})}
    for name, r in recs.items():
        write_json_atomic(exp / "cells" / f"{name}.json", dict(r, params_file=f"cells/{name}.npz"))
        write_npz_atomic(exp / "cells" / f"{name}.npz", labels=np.array([0, 0, 1, 1], np.int32))
    csv = collect(exp, ["turbo_gmm", "sklearn"])
    (md,) = table_e2e.render(csv)
    text = md.read_text()
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| Shape | Covariances | Arm | Run | Wall, host array (s) | Wall, device tensor (s) | "
                               "First fit, host array (s; caches) | First fit over the fastest (s) | Split")
    body = [line.split(" | ")[1:4] for line in lines[2:]]
    assert [cells[:2] for cells in body] == [["diag", "Turbo-GMM"], ["", "scikit-learn"], ["full", "Turbo-GMM"],
                                             ["", "scikit-learn"]]
    old, sk, ours_full, sk_full = lines[2:]
    assert "| 0.500 | — | — | — | EM 0.250" in old and "| 10.000 | — | — | — | init 4.00" in sk
    assert "| 2.000 | — | 9.500 (empty) | +7.500 |" in ours_full
    assert "| 8.000 | — | 8.000 (warm) | +0.000 |" in sk_full
    assert "20.00x slower" in sk and "4.00x slower" in sk_full  # each divided by Turbo-GMM of its own type
    assert "First fit: the wall time of the cell process's first fit" in text
    paths = fig_e2e.render(csv)
    assert all(p.stat().st_size > 0 for p in paths)
