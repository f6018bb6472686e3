"""harness.roofline: issue 23's roofline as its table states it, the longer of compute and the read of X, each
precision at its own charge and probe, and no floor where a rate is unknown."""
import pytest

from harness.roofline import ISSUE_23_RATES, bound_ms, compute_ms, diagonal_ms, read_ms

PROBES = {"tf32_tflops": 400.0, "fp64_tflops": 60.0, "fp32_tflops": 50.0, "bf16_tflops": 800.0,
          "hbm_read_gb_per_s": 4000.0}


@pytest.mark.parametrize("shape,want_ms", [((20_000_000, 32, 32), 1.24), ((4_000_000, 32, 32), 0.25),
                                           ((1_000_000, 32, 32), 0.062), ((1_000_000, 128, 32), 0.25),
                                           ((4_000_000, 16, 128), 0.50)])
def test_matches_the_issue_table(shape, want_ms):
    """Issue 23's column "tf32x3 roofline on useful FLOP (8NKd x 3 at 396 TFLOP/s)", as rounded there."""
    assert diagonal_ms(*shape, "tf32x3", ISSUE_23_RATES) == pytest.approx(want_ms, rel=0.03)


def test_takes_the_read_of_x_where_that_is_longer():
    N, K, d = 20_000_000, 2, 32
    assert diagonal_ms(N, K, d, "tf32x3", ISSUE_23_RATES) == pytest.approx(N * d * 4 / 4.3e12 * 1e3)
    assert diagonal_ms(N, K, d, "tf32x3", ISSUE_23_RATES) > 8.0 * N * K * d * 3 / 396e12 * 1e3
    assert bound_ms(1e9, 1e12, "fp64", PROBES) == (pytest.approx(250.0), "HBM")
    assert bound_ms(1e12, 1e9, "fp64", PROBES) == (pytest.approx(1e3 / 60), "compute")


def test_each_precision_at_its_charge_and_probe():
    flop = 1e12
    assert compute_ms(flop, "tf32x3", PROBES) == pytest.approx(1e3 * 3 / 400)
    assert compute_ms(flop, "tf32", PROBES) == pytest.approx(1e3 / 400)
    assert compute_ms(flop, "fp64", PROBES) == pytest.approx(1e3 / 60)
    assert compute_ms(flop, "bf16", PROBES) == pytest.approx(1e3 / 800)
    assert compute_ms(flop, "ieee", PROBES) == compute_ms(flop, "fp32", PROBES) == pytest.approx(1e3 / 50)
    assert read_ms(4e9, PROBES) == pytest.approx(1.0)


def test_no_floor_without_a_rate_or_at_an_unknown_precision():
    assert compute_ms(1e12, "fp64", ISSUE_23_RATES) is None  # issue 23 gives no float64 rate
    assert compute_ms(1e12, "int8", PROBES) is None
    assert read_ms(1e9, {"tf32_tflops": 400.0}) is None
    assert diagonal_ms(1000, 16, 8, "fp64", {"fp64_tflops": 60.0}) is None
