"""Table 1 and Figure 1 render from a results CSV alone, with the paper's conventions."""
import numpy as np
import pytest
from omegaconf import OmegaConf

from figures import fig1_latency, table1
from harness.results import REPO, collect, write_json_atomic, write_npz_atomic

TABLE1_SHAPES = OmegaConf.load(REPO / "conf" / "experiment" / "table1.yaml").hydra.sweeper.params.shape.split(",")
SHAPES = [OmegaConf.load(REPO / "conf" / "shape" / f"{name}.yaml") for name in sorted(TABLE1_SHAPES)]
LABELS = {"turbo_gmm": "Turbo-GMM", "flash_gmm_bf16": "Flash-GMM (bf16, as released)", "pytorch": "PyTorch",
          "gmmx": "gmmx"}
SLOWDOWN = {"turbo_gmm": 1.0, "flash_gmm_bf16": 1.5, "pytorch": 2.5, "gmmx": 0.5}


@pytest.fixture
def fixture_csv(tmp_path):
    """A table1 CSV built through the real record -> collect path, with failures planted."""
    exp = tmp_path / "dev" / "table1"
    for s in SHAPES:
        base = s.N * s.K * s.d * 1e-12  # seconds per iteration, made up but shape-dependent
        for arm, slow in SLOWDOWN.items():
            rec = {"device": "dev", "experiment": "table1", "arm": arm, "label": LABELS[arm], "shape": s.name,
                   "N": s.N, "K": s.K, "d": s.d, "regimes": ";".join(s.regimes), "seed": 0, "numerics": "fp32",
                   "precision": "fp32", "n_iter": 10, "reps": 3, "status": "ok", "gate": "valid",
                   "rep_seconds": [10 * base * slow * f for f in (1.2, 1.0, 1.1)], "peak_mb": 100.0 * slow,
                   "ll_per_point": -40.0, "data_checksum": "c", "params_file": f"cells/{arm}__{s.name}.npz",
                   "algorithm": "two_pass" if arm == "turbo_gmm" and s.K >= 512 else ""}
            if (arm, s.name) == ("gmmx", "1M_128_32"):
                rec["gate"] = "rejected (non-finite LL)"
            if (arm, s.name) == ("flash_gmm_bf16", "1M_4096_32"):
                rec["gate"] = "rejected (sum(pi)=4300)"
            if (arm, s.name) == ("pytorch", "1M_4096_32"):
                rec = {k: rec[k] for k in ("device", "experiment", "arm", "label", "shape", "N", "K", "d", "regimes",
                                           "seed", "numerics", "n_iter", "reps")} | {"status": "fail (OOM)"}
            write_json_atomic(exp / "cells" / f"{arm}__{s.name}.json", rec)
            write_npz_atomic(exp / "cells" / f"{arm}__{s.name}.npz", labels=np.zeros(4, np.int32))
    return collect(exp)


def test_table1_markdown_and_latex(fixture_csv):
    md, tex = table1.render([fixture_csv], {("flash_gmm_bf16", "1M_4096_32")})
    text = md.read_text()
    lines = text.splitlines()
    assert lines[0] == "| Shape | Arm | ms/iter | Speedup vs Turbo-GMM | Mem (MB) | Gate |"
    assert sum(1 for ln in lines if ln.startswith("| ") and ln not in lines[:2]) == 16 * 4
    assert text.count("Turbo-GMM (Alg. 3)") == 3
    assert "| 20K/16/32 | Turbo-GMM | 0.01 | — | 100 | valid |" in text  # 20000*16*32e-12 s = 0.0102 ms
    assert "| PyTorch | 0.03 | 2.50x slower | 250 | valid |" in text
    assert "| gmmx | 0.01 | 2.00x faster | 50 | valid |" in text
    assert "| gmmx | 2.05 | — | 50 | rejected (non-finite LL) |" in text  # rejected: no speedup
    assert "| PyTorch | fail (OOM) | — | — | fail (OOM) |" in text
    assert "| 196.61 | 1.50x slower † | 150 | rejected (sum(pi)=4300) † |" in text and "† kept although the gate rejected it" in text
    assert r"2.50$\times$ slower" in tex.read_text() and r"\end{tabular}" in tex.read_text()


def test_table1_minimum_comes_from_raw_rep_seconds(fixture_csv):
    md, _ = table1.render([fixture_csv], set())
    assert f"| 20M/32/32 | Turbo-GMM | {1e3 * 20e6 * 32 * 32 * 1e-12:.2f} |" in md.read_text()


def test_fig1_has_seventeen_groups_and_writes_png_pdf(fixture_csv):
    from harness.results import read_csv
    g = fig1_latency.groups(read_csv(fixture_csv))
    assert len(g) == 17 and [s[0] for _, s in g].count("1M_32_32") == 2
    png, pdf = fig1_latency.render(fixture_csv, keep_rejected={("flash_gmm_bf16", "1M_4096_32")})
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"
    assert png.parent == fixture_csv.parent


def _smoke(tmp_path, extra=()):
    """smoke.csv: Turbo-GMM and PyTorch at the default tiny_7_5 (N=1023), and PyTorch at an override of it
    (``shape=tiny_7_5 shape.N=200000``: the same name, another size)."""
    from figures.tests.conftest import record, write_experiment

    recs = [record("smoke", "turbo_gmm", "tiny_7_5", 1023, 7, 5, 1.0, regimes="tiny"),
            record("smoke", "pytorch", "tiny_7_5", 1023, 7, 5, 2.0, regimes="tiny"),
            record("smoke", "pytorch", "tiny_7_5", 200_000, 7, 5, 153.21, regimes="tiny"), *extra]
    for r in recs:  # write_experiment's keys tell cells apart by K and d only
        r["params_file"] = r["params_file"].replace(".npz", f"_{r['N']}.npz") if r.get("params_file") else None
    from harness.results import collect, write_json_atomic, write_npz_atomic
    for r in recs:
        key = f"{r['arm']}__{r['shape']}__{r['N']}"
        write_json_atomic(tmp_path / "dev" / "smoke" / "cells" / f"{key}.json", dict(r, params_file=f"cells/{key}.npz"))
        write_npz_atomic(tmp_path / "dev" / "smoke" / "cells" / f"{key}.npz", labels=np.zeros(8, np.int32))
    return collect(tmp_path / "dev" / "smoke", ["turbo_gmm", "pytorch"])


def test_an_overridden_shape_is_a_shape_of_its_own(tmp_path):
    """Issue 47 (2): a shape override keeps the shape's name; the table and figure key rows by (name, N, K, d), so
    the N=200000 PyTorch row is neither divided by Turbo-GMM's N=1023 row nor dropped from the figure."""
    from harness.results import read_csv

    csv = _smoke(tmp_path)
    md, _ = table1.render([csv], set())
    text = md.read_text()
    assert "| tiny/7/5 (N=1023, K=7, d=5) | Turbo-GMM | 1.00 | — |" in text
    assert "|  | PyTorch | 2.00 | 2.00x slower |" in text
    assert "| tiny/7/5 (N=200000, K=7, d=5) | PyTorch | 153.21 | — |" in text  # no Turbo-GMM at its size
    assert "faster" not in text
    rows = read_csv(csv)
    assert len(fig1_latency.groups(rows)) == 2
    shapes, arms, cell = table1.shape_arm_grid(rows)
    assert len(shapes) == 2 and sum(1 for (_, a) in cell if a == "pytorch") == 2  # both PyTorch rows drawn
    png, _ = fig1_latency.render(csv)
    assert png.exists()


def test_table1_names_its_runs_and_says_when_commits_differ(tmp_path):
    """Issue 47 (11): the table names the run(s) its rows come from (date, commit), and says so, marking the
    speedups across commits with ‡, when they come from more than one commit."""
    import json

    from harness.results import collect, write_json_atomic

    one = _smoke(tmp_path / "one")
    assert "Run: — (3 rows)." in table1.render([one], set())[0].read_text()  # records without a commit: unknown
    two = _smoke(tmp_path / "two")
    cells = tmp_path / "two" / "dev" / "smoke" / "cells"
    for p, (commit, day) in zip(sorted(cells.glob("*.json")), [("bbbbbbb", "2026-12-05"), ("aaaaaaa", "2026-12-01"),
                                                                ("aaaaaaa", "2026-12-01")]):
        write_json_atomic(p, dict(json.loads(p.read_text()), git_commit=commit, timestamp=f"{day}T10:00:00+0000"))
    collect(tmp_path / "two" / "dev" / "smoke", ["turbo_gmm", "pytorch"])
    md, tex = table1.render([two], set())
    text = md.read_text()
    assert "Runs: 2026-12-01 aaaaaaa (2 rows); 2026-12-05 bbbbbbb (1 row)." in text
    assert "Rows come from 2 commits (aaaaaaa, bbbbbbb), not one run" in text
    assert "|  | PyTorch | 2.00 | 2.00x slower ‡ |" in text  # PyTorch at aaaaaaa over Turbo-GMM at bbbbbbb
    assert r"$^\ddagger$" in tex.read_text()
