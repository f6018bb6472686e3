"""harness.studies.shared_wavefronts: the bank model on layouts whose wavefronts are known by hand, and the
fp64 one pass's prediction against the Nsight Compute counts committed for it (results/h200/ncu, 207e226).
Compiling needs Triton's compiler, not its interpreter, so the study runs in a subprocess without
TRITON_INTERPRET."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.studies.shared_wavefronts import wavefronts

REPO = Path(__file__).resolve().parents[3]
NCU_FP64 = REPO / "results" / "h200" / "ncu" / "ncu_fp64_one_pass_20M.raw.csv"
TILES_20M = 20_000_000 // 64


def study(*args: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "harness.studies.shared_wavefronts", *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return [json.loads(line) for line in p.stdout.splitlines()]


def lanes_along(dim: int) -> dict:
    """A warp's 32 lanes along one dimension of a 32 x 32 tile, one register each (no register bases)."""
    return {"reg": [], "lane": [[1 << i, 0] if dim == 0 else [0, 1 << i] for i in range(5)], "warp": []}


def test_a_row_is_one_wavefront_a_column_is_32_and_a_swizzle_spreads_it():
    row, column = lanes_along(1), lanes_along(0)
    plain = (1, 1, 1, [1, 0])  # no swizzle, row-major
    assert wavefronts(row, [32, 32], 4, plain) == {"wavefronts": 1, "fewest": 1, "bytes_per_access": 4}
    assert wavefronts(column, [32, 32], 4, plain)["wavefronts"] == 32  # 32 rows of 128 B: every lane in bank 0
    assert wavefronts(column, [32, 32], 4, (1, 1, 32, [1, 0]))["wavefronts"] == 1  # XOR by the row: 32 banks
    half = wavefronts(lanes_along(0), [32, 32], 8, plain)  # float64 column: a half warp a pass, 2 banks a lane
    assert half == {"wavefronts": 32, "fewest": 2, "bytes_per_access": 8}


def test_the_fp64_one_pass_prediction_matches_its_nsight_compute_counts():
    """207e226's layouts (W row-major) at 20M_32_32: load and store wavefronts and their bank-conflict excess
    within 10% of what ncu counted in the launch."""
    with open(NCU_FP64, newline="") as f:
        header, _, values = list(csv.reader(f))[:3]
    ncu = {k: float(v.replace(",", "")) for k, v in zip(header, values) if k.startswith("l1tex__data_")}
    (row,) = study("--K", "32", "--d", "32", "--algorithm", "one_pass", "--precision", "fp64", "--w-storage", "rows",
                   "--x-columns", "twice")
    for op, op_ncu in (("load", "ld"), ("store", "st")):
        counted = ncu[f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op_ncu}.sum"]
        excess = ncu[f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op_ncu}.sum"]
        tile = row["tile"][op]
        assert tile["wavefronts"] * TILES_20M == pytest.approx(counted, rel=0.10), op
        assert (tile["wavefronts"] - tile["fewest"]) * TILES_20M == pytest.approx(excess, rel=0.10), op


def test_lanes_contiguous_weights_and_gathered_columns_cut_the_fp64_one_pass_wavefronts():
    """turbo_gmm.diag.lift.weights_buffer stores the fp64 W lanes-contiguous: its B-operand load takes the fewest
    wavefronts, the row tile's loads 17% fewer than with the row-major W (2944 -> 2432 at (32, 32)); gathering X's
    columns into both halves of the lifted tile (turbo_gmm.diag.lift.gathers_rows) makes its stores conflict-free."""
    shape = ("--K", "32", "--d", "32", "--algorithm", "one_pass", "--precision", "fp64")
    (before,), (w_only,), (launch,) = (study(*shape, "--w-storage", "rows", "--x-columns", "twice"),
                                       study(*shape, "--x-columns", "twice"), study(*shape))
    w_load = [a for a in w_only["accesses"] if a["op"] == "load" and a["shape"] == [64, 32]][0]  # W, the score's B
    assert w_load["swizzle"]["order"] == [0, 1] and w_load["wavefronts"] == w_load["fewest"]
    assert w_only["tile"]["load"]["wavefronts"] <= 0.85 * before["tile"]["load"]["wavefronts"]
    assert w_only["tile"]["store"] == before["tile"]["store"]
    stores = launch["tile"]["store"]
    assert stores["wavefronts"] == stores["fewest"] < before["tile"]["store"]["wavefronts"]
    assert launch["tile"]["load"]["wavefronts"] <= w_only["tile"]["load"]["wavefronts"]


def test_linear_layouts_reads_a_distributed_linear_layout_back():
    """A TTGIR #linear register layout goes to the probe as a Gluon DistributedLinearLayout, which prints its bases
    as tuples: they come back as the same bases."""
    from harness.studies.shared_wavefronts import linear_layouts

    reg, lane, warp = [[1, 0], [0, 8], [8, 0], [16, 0]], [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], [[0, 16], [0, 32]]
    (found,) = linear_layouts([(f"gl.DistributedLinearLayout({reg}, {lane}, {warp}, [], [32, 64])", [32, 64])], 4)
    assert found == {"reg": reg, "lane": lane, "warp": warp}


def test_out_merges_each_kernels_tile_into_the_csv(tmp_path):
    """--out writes the printed tile as a CSV row with its provenance; compiling the same kernel again replaces that
    row and keeps the others (figures.table_fp64 reads this CSV)."""
    out = tmp_path / "shared_wavefronts.csv"
    args = ("--algorithm", "one_pass", "--precision", "fp64", "--out", str(out))
    (first,) = study("--K", "16", "--d", "32", *args)
    study("--K", "64", "--d", "16", *args)
    (again,) = study("--K", "16", "--d", "32", *args)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["K"], r["d"]) for r in rows] == [("16", "32"), ("64", "16")]
    row = rows[0]
    assert again["tile"] == first["tile"]
    assert (int(row["load_wavefronts"]), int(row["store_wavefronts"])) == (first["tile"]["load"]["wavefronts"],
                                                                           first["tile"]["store"]["wavefronts"])
    assert (int(row["BLOCK_N"]), int(row["num_warps"]), row["kernel"]) == (first["BLOCK_N"], first["num_warps"],
                                                                           "one_pass")
    assert row["git_commit"] and row["triton"]
