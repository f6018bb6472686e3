"""The full-covariance table and figure from a CSV built through the real record -> collect path, and the
roofline's FLOP count against the kernels' own statistics layout."""
import json

import pytest

from figures import fig_full, render_all, table_full
from figures.tests.conftest import record, write_experiment

# a device folder's env.json probes (harness.env): 396 TF32 TFLOP/s, so tf32x3 runs at 132
PROBES = {"tf32_tflops": 396.0, "fp64_tflops": 60.0, "fp32_tflops": 50.0, "hbm_read_gb_per_s": 4000.0}


def _full(arm, shape, N, K, d, ms, git_commit="", timestamp="", **kw):
    rec = {**record("full", arm, shape, N, K, d, ms, **kw), "git_commit": git_commit, "timestamp": timestamp}
    rec["covariance_type"] = "full"
    return rec


@pytest.fixture
def full_csv(tmp_path):
    recs = [_full("turbo_gmm", "1M_32_32", 1_000_000, 32, 32, 20.0, algorithm="one_pass", git_commit="bbbbbbb",
                  timestamp="2026-12-02T10:00:00+0000"),
            _full("pytorch", "1M_32_32", 1_000_000, 32, 32, 50.0),
            _full("sklearn", "1M_32_32", 1_000_000, 32, 32, 80.0),
            _full("turbo_gmm", "20M_32_16", 20_000_000, 32, 16, 30.0, gate="rejected (non-finite LL)",
                  algorithm="one_pass"),
            _full("pytorch", "20M_32_16", 20_000_000, 32, 16, 90.0),
            _full("sklearn", "20M_32_16", 20_000_000, 32, 16, 0, status="fail (OOM)"),
            _full("ablation_a1", "20M_32_16", 20_000_000, 32, 16, 0, status="unsupported: covariance_type=full")]
    csv = write_experiment(tmp_path / "dev", "full", recs)
    (csv.parent / "env.json").write_text(json.dumps({"probes": PROBES}))
    return csv


def test_the_flop_count_is_the_score_product_plus_the_kernels_statistics_lanes():
    from turbo_gmm.full.parameters import PAIR_BLOCK, feature_pairs, padded_sizes, statistics_rows

    assert table_full.PAIR_BLOCK == PAIR_BLOCK
    for d in (5, 16, 32, 33, 64, 128):
        n_pairs = feature_pairs(d, "cpu")[0].shape[0]
        lanes = statistics_rows(padded_sizes(1, d)[1], n_pairs) - 1 - padded_sizes(1, d)[1]  # second-moment rows
        assert table_full.products_flops(1000, 7, d) == 2 * 1000 * 7 * (d * d + d + lanes)
    assert table_full.products_flops(1, 1, 32) == 2 * (32 * 32 + 32 + 32 * 32 // 2 + 4 * 32)  # d^2/2 + 4d at 8 | d


def test_roofline_is_the_longer_of_compute_and_hbm_at_the_rows_precision_and_the_devices_rates():
    row = {"N": "20000000", "K": "32", "d": "16", "precision": "tf32x3", "algorithm": "one_pass"}
    ms, bound = table_full.roofline_ms(row, PROBES)
    assert bound == "compute" and ms == pytest.approx(1e3 * table_full.products_flops(20_000_000, 32, 16) / 132e12)
    ms64, _ = table_full.roofline_ms(dict(row, precision="fp64"), PROBES)
    assert ms64 == pytest.approx(ms * 132 / 60)
    ms32, _ = table_full.roofline_ms(dict(row, precision="ieee"), PROBES)  # float32 FMAs on the CUDA cores
    assert ms32 == pytest.approx(ms * 132 / 50)
    hbm, bound = table_full.roofline_ms(dict(row, K="1", d="1", algorithm="two_pass"), PROBES)
    assert bound == "HBM" and hbm == pytest.approx(1e3 * 2 * 20e6 * 4 / 4e12)
    assert table_full.roofline_ms(dict(row, precision="int8"), PROBES) is None
    assert table_full.roofline_ms(row, {}) is None  # a device without probes: no roofline


def test_table_ranks_valid_fits_and_gives_the_fastest_its_lead_over_the_runner_up(full_csv):
    (md,) = table_full.render(full_csv)
    assert md.name == "full.md"
    rows, shape = {}, None
    for line in md.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] != "Shape":
            shape = cells[0] or shape
            rows[(shape, cells[1])] = cells
    turbo = rows[("1M/32/32", "Turbo-GMM")]
    assert turbo[2:4] == ["20.00", "fastest, 2.50x ahead of PyTorch"]
    frac = table_full.roofline_ms({"N": 1_000_000, "K": 32, "d": 32, "precision": "tf32x3"}, PROBES)[0] / 20.0
    assert turbo[4] == f"{frac:.0%} of tf32x3 compute ({frac * 20:.3g} ms)"
    assert rows[("1M/32/32", "scikit-learn")][3] == "4.00x slower" and rows[("1M/32/32", "PyTorch")][4] == "—"
    assert turbo[7] == "2026-12-02 bbbbbbb"  # the run each row comes from
    # 20M: ours rejected (not ranked, no roofline), scikit-learn out of memory: PyTorch is the one valid fit
    assert rows[("20M/32/16", "Turbo-GMM")][3:5] == ["—", "—"]
    assert rows[("20M/32/16", "Turbo-GMM")][6] == "rejected (non-finite LL)"
    assert rows[("20M/32/16", "PyTorch")][3] == "fastest (no other valid fit)"
    assert rows[("20M/32/16", "scikit-learn")][2] == "fail (OOM)"
    assert rows[("20M/32/16", "A1")][6] == "unsupported: covariance_type=full"


def test_figure_and_render_all_draw_full_and_skip_it_when_absent(full_csv, tmp_path):
    paths = fig_full.render(full_csv)
    assert {p.name for p in paths} == {"fig_full.png", "fig_full.pdf"} and all(p.stat().st_size > 0 for p in paths)
    out = render_all.render_folder(full_csv.parent, say=lambda _: None)
    assert {"full.md", "fig_full.png", "fig_full.pdf"} <= {p.name for p in out}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert render_all.render_folder(empty, say=lambda _: None) == []
