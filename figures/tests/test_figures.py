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
    assert len(g) == 17 and [s for _, s in g].count("1M_32_32") == 2
    png, pdf = fig1_latency.render(fixture_csv, keep_rejected={("flash_gmm_bf16", "1M_4096_32")})
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"
    assert png.parent == fixture_csv.parent
