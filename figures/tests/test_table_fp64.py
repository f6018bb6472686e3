"""figures.table_fp64: the floor's products are the FLOP the hardware counted at the peak ncu reports, its
arithmetic the launch's float64-pipe time per entry; Algorithm 3 is charged 12 N K d and twice the arithmetic;
a rejected fit is shown as rejected; without counters the table keeps its timings and leaves the floor out."""
from pathlib import Path

import pytest

from figures import render_all, table_counters, table_fp64
from figures.tests.conftest import record, write_experiment

RESULTS = Path(__file__).resolve().parents[2] / "results" / "h200"


def test_the_h200_floor_is_the_counted_products_and_float64_pipe_time_of_the_profiled_launch():
    table, rates = table_fp64.rows(RESULTS)
    raw = table_counters.read_raw(RESULTS / "ncu" / f"{rates['file']}.raw.csv")
    n = table_counters.number
    row = next(r for r in table if r["shape"] == rates["shape"])
    # 8 N K d FLOP as the model charges them are what sm__ops_path_tensor_src_fp64 counted, at its peak
    counted_ms = 1e3 * n(raw, "sm__ops_path_tensor_src_fp64.sum") / n(raw, table_fp64.DMMA_PEAK)
    assert row["products_ms"] == pytest.approx(counted_ms, rel=1e-9)
    assert row["arithmetic_ms"] == pytest.approx(n(raw, "duration_ms") * n(raw, table_fp64.FP64_PIPE) / 100, rel=1e-9)
    # the pipe the two share: its busy share over the launch is the two utilizations added
    busy = (row["products_ms"] + row["arithmetic_ms"]) / n(raw, "duration_ms")
    shared_pipe = n(raw, "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_elapsed")
    assert 100 * busy == pytest.approx(shared_pipe, abs=0.5)
    assert len(table) == 16 and all(r["fp64_gate"] == "valid" and r["tf32x3_gate"] == "valid" for r in table)


def _ncu(folder, shape, duration_ms, fp64_pct, peak_flops, stem="ncu_fp64_one_pass_x_abc1234"):
    ncu = folder / "ncu"
    ncu.mkdir()
    (ncu / "README.md").write_text(f"| `{stem}.*` | `_one_pass_kernel`, fp64 | {shape} | abc1234 |\n")
    header = ["Kernel Name", "gpu__time_duration.sum", table_fp64.FP64_PIPE, table_fp64.DMMA_PEAK]
    units = ["", "ms", "%", ""]
    values = ["_one_pass_kernel", str(duration_ms), str(fp64_pct), f"{peak_flops:,.2f}"]
    (ncu / f"{stem}.raw.csv").write_text("\n".join(",".join(f'"{v}"' for v in row) for row in (header, units, values)))


def test_floor_per_algorithm_target_and_rejected_fits(tmp_path):
    rows = [record("table1", "turbo_gmm", "1M_32_32", 1_000_000, 32, 32, 1.0, algorithm="one_pass"),
            record("table1", "turbo_gmm_fp64", "1M_32_32", 1_000_000, 32, 32, 1.4, algorithm="one_pass"),
            record("table1", "turbo_gmm", "1M_512_32", 1_000_000, 512, 32, 2.0, algorithm="two_pass"),
            record("table1", "turbo_gmm_fp64", "1M_512_32", 1_000_000, 512, 32, 7.0, algorithm="two_pass"),
            record("table1", "turbo_gmm", "1M_64_16", 1_000_000, 64, 16, 1.0, algorithm="one_pass"),
            record("table1", "turbo_gmm_fp64", "1M_64_16", 1_000_000, 64, 16, 1.2, algorithm="one_pass",
                   gate="rejected (non-finite LL)"),
            record("table1", "turbo_gmm", "2M_32_32", 2_000_000, 32, 32, 1.0, algorithm="one_pass")]  # no fp64 row
    csv = write_experiment(tmp_path / "dev", "table1", rows)
    folder = csv.parent
    _ncu(folder, "1M_32_32", duration_ms=2.0, fp64_pct=25.0, peak_flops=50e12)
    table, rates = table_fp64.rows(folder)
    assert rates["ps_per_entry"] == pytest.approx(2.0 * 0.25 * 1e9 / (1e6 * 32))  # 15.625 ps an entry
    assert rates["fp64_tflops"] == pytest.approx(50.0)
    by = {r["shape"]: r for r in table}
    assert set(by) == {"1M_32_32", "1M_512_32", "1M_64_16"}
    one, two = by["1M_32_32"], by["1M_512_32"]
    assert one["products_ms"] == pytest.approx(1e3 * 8 * 1e6 * 32 * 32 / 50e12)
    assert one["arithmetic_ms"] == pytest.approx(0.5)  # the profiled launch's own entries
    assert two["products_ms"] == pytest.approx(1e3 * 12 * 1e6 * 512 * 32 / 50e12)
    assert two["arithmetic_ms"] == pytest.approx(2 * 1e6 * 512 * 15.625e-9)
    assert one["ratio"] == pytest.approx(1.4) and one["target_ms"] == pytest.approx(1.5)
    assert one["floor_share"] == pytest.approx((one["products_ms"] + 0.5) / 1.5)
    assert by["1M_64_16"]["fp64_ms"] is None and by["1M_64_16"]["ratio"] is None
    md = table_fp64.render(folder)[0].read_text()
    assert "| 1M_32_32 | one_pass | 1.000 | 1.400 | **1.40x** | 1.500 |" in md
    assert "| 1M_64_16 | one_pass | 1.000 | rejected (non-finite LL) | — |" in md
    assert "Within 1.5x: 1 of 3 shapes (1M_32_32)" in md
    assert "2.19x" not in md and "| 1M_512_32 | two_pass | 2.000 | 7.000 | 3.50x |" in md


def test_without_counters_the_timings_stay_and_the_floor_is_left_out(tmp_path):
    rows = [record("table1", "turbo_gmm", "1M_32_32", 1_000_000, 32, 32, 1.0, algorithm="one_pass"),
            record("table1", "turbo_gmm_fp64", "1M_32_32", 1_000_000, 32, 32, 3.0, algorithm="one_pass")]
    folder = write_experiment(tmp_path / "dev", "table1", rows).parent
    table, rates = table_fp64.rows(folder)
    assert rates is None and table[0]["ratio"] == pytest.approx(3.0) and "floor_ms" not in table[0]
    assert folder / "fp64.md" in render_all.render_folder(folder)  # make figures writes it
    md = (folder / "fp64.md").read_text()
    assert "| 1M_32_32 | one_pass | 1.000 | 3.000 | 3.00x | 1.500 | — | — | — | — |" in md
