"""figures.table_fp64: the floor's products are the FLOP the hardware counted at the peak ncu reports, its
arithmetic the launch's float64-pipe time per entry; Algorithm 3 is charged 12 N K d and twice the arithmetic;
the one pass's shared-memory floor is its tiles' wavefronts at one a cycle per SM; a rejected fit is shown as
rejected; without counters the table keeps its timings and leaves the floors out."""
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
    # the modelled shared-memory floor (the same kernel's layouts, compiled offline) is what the launch's counted
    # shared loads and stores take at one wavefront a cycle per SM, within the model's 10% and not above it (the
    # count's cp.async writes of X are not modelled)
    counted = sum(n(raw, f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum") for op in ("ld", "st"))
    counted_ms = 1e3 * counted / (n(raw, "launch__sm_count") * n(raw, "sm__cycles_elapsed.avg.per_second") * 1e9)
    assert 0.9 * counted_ms <= row["shared_ms"] <= counted_ms


def _ncu(folder, shape, duration_ms, fp64_pct, peak_flops, stem="ncu_fp64_one_pass_x_abc1234"):
    ncu = folder / "ncu"
    ncu.mkdir()
    (ncu / "README.md").write_text(f"| `{stem}.*` | `_one_pass_kernel`, fp64 | {shape} | abc1234 |\n")
    header = ["Kernel Name", "gpu__time_duration.sum", table_fp64.FP64_PIPE, table_fp64.DMMA_PEAK, "launch__sm_count",
              "sm__cycles_elapsed.avg", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
              "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
              "sm__warps_active.avg.per_cycle_active", "launch__registers_per_thread"]
    units = ["", "ms", "%", "", "", "cycle", "%", "", "", "warp", "register/thread"]  # 100 SMs at 1.5 GHz
    values = ["_one_pass_kernel", str(duration_ms), str(fp64_pct), f"{peak_flops:,.2f}", "100",
              f"{1.5e6 * duration_ms:,}", "80", "1000", "0", "8", "200"]  # the L1 80% busy: its floor 0.8 x duration
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
    (folder / "shared_wavefronts.csv").write_text(  # the study's --out: the fp64 one pass's tile at (32, 32)
        "kernel,K,d,precision,BLOCK_N,num_warps,load_wavefronts,load_fewest,store_wavefronts,store_fewest,triton,"
        "git_commit,date\none_pass,32,32,fp64,64,4,1000,900,200,200,3.6.0,abc1234def,2026-12-05\n"
        "one_pass,32,32,tf32x3,64,4,1,1,1,1,3.6.0,abc1234def,2026-12-05\n")
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
    # the one pass's 15625 tiles of 1200 wavefronts at one a cycle on each of 100 SMs at 1.5 GHz; no tile for others
    assert one["shared_ms"] == pytest.approx(1e3 * 15625 * 1200 / (100 * 1.5e9))
    assert one["shared_share"] == pytest.approx(one["shared_ms"] / 1.5) and "shared_ms" not in two
    # the shape's own launch: its busiest unit's floor over the target; Algorithm 3's shape has none
    assert one["own_launch"]["unit"] == "L1" and one["unit_share"] == pytest.approx(0.8 * 2.0 / 1.5)
    assert two["own_launch"] is None and "unit_share" not in two
    md = table_fp64.render(folder)[0].read_text()
    assert "| 1M_32_32 | one_pass | 1.000 | 1.400 | **1.40x** | 1.500 |" in md and "(wavefronts: abc1234)" in md
    assert "| L1 1.600 ms, 106.7% (abc1234) |" in md
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
    assert "| 1M_32_32 | one_pass | 1.000 | 3.000 | 3.00x | 1.500 | — | — | — | — | — | — |" in md
