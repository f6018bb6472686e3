"""The e2e table and figure from a CSV built through the real record -> collect path."""
import numpy as np

from figures import fig_e2e, table_e2e
from harness.results import collect, write_json_atomic, write_npz_atomic

LABELS = {"turbo_gmm": "Turbo-GMM", "sklearn": "scikit-learn", "cuvs": "cuVS"}


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
    recs = [_record("turbo_gmm", host=0.5, device=0.3, split={"transfer": 0.1, "validation": 0.01, "init": 0.2,
                                                             "em": 0.18, "other": 0.01}),
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
    assert "0.500 | 0.300 | transfer 0.100, validation 0.010, init 0.200, EM 0.180, other 0.010 | 5" in rows["Turbo-GMM"]
    assert "10.000 | — | init 4.000, not split 6.000 | 6" in rows["scikit-learn"]
    assert "20.00x slower" in rows["scikit-learn"] and "1.0000 |" in rows["Turbo-GMM"]  # ARI vs scikit-learn
    assert "| -40.000000 (+0.0e+00) |" in rows["Turbo-GMM"] and "| -40.000000 |" in rows["scikit-learn"]
    assert "> 120 |" in rows["cuVS"] and "> 240x slower" in rows["cuVS"] and "fail (TIMEOUT)" in rows["cuVS"]
    paths = fig_e2e.render(csv)
    assert [p.name for p in paths] == ["fig_e2e.png", "fig_e2e.pdf"] and all(p.stat().st_size > 0 for p in paths)
