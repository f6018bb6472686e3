"""harness.studies.one_pass_ws without a GPU: its roofline is issue 23's, and a part that fails leaves a row
saying so while the other parts still run."""
import csv

import pytest
import torch

from harness.studies import one_pass_ws as study


@pytest.mark.parametrize("shape,want_ms", [((20_000_000, 32, 32), 1.24), ((4_000_000, 32, 32), 0.25),
                                           ((1_000_000, 32, 32), 0.062), ((1_000_000, 128, 32), 0.25),
                                           ((4_000_000, 16, 128), 0.50)])
def test_roofline_matches_the_issue_table(shape, want_ms):
    """Issue 23's column "tf32x3 roofline on useful FLOP (8NKd x 3 at 396 TFLOP/s)", as rounded there."""
    assert study.roofline_ms(*shape) == pytest.approx(want_ms, rel=0.03)


def test_roofline_takes_the_read_of_x_where_that_is_longer():
    N, K, d = 20_000_000, 2, 32
    assert study.roofline_ms(N, K, d) == pytest.approx(N * d * 4 / 4.3e12 * 1e3)
    assert study.roofline_ms(N, K, d) > 8.0 * N * K * d * 3 / 396e12 * 1e3


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the parts would run the measurement itself")
def test_every_part_that_fails_is_a_row_and_the_others_still_run(tmp_path):
    """Without a GPU every part fails at its first CUDA call: the parent records each failure and goes on."""
    assert study.main(["--out", str(tmp_path)]) == 1
    with open(tmp_path / "one_pass_ws.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    failed = [r for r in rows if r["error"].startswith("part ")]
    assert [r["part"] for r in failed] == list(study.PART_TIMEOUT_S)
    assert all(r["commit"] and r["date_utc"] for r in rows)
