"""The validation pass (kernels/_column_sums.py) against float64 NumPy: sums, sums of squares, extremes and
the non-finite flag in one read, across row programs, whole steps and tails, column tiles, float32 and
float64 X; and the extremes it leaves for the float32 lift's bound, so that bound reads X no more."""
import numpy as np
import pytest
import torch

from turbo_gmm._column_sums import COLUMN_TILE, column_sums, non_finite_message
from turbo_gmm.diag.em import column_moments
from turbo_gmm.diag.precision import column_extremes, data_radius
from turbo_gmm.tests.conftest import DEVICE


@pytest.mark.parametrize("geometry", [{}, dict(tile_elements=256, loads=1, num_warps=4),
                                      dict(tile_elements=64, loads=8)], ids=str)
@pytest.mark.parametrize("N, d, dtype", [(1, 1, torch.float32), (5000, 7, torch.float32),
                                         (700, COLUMN_TILE + 3, torch.float32), (3001, 33, torch.float64)])
def test_sums_squares_and_extremes_are_those_of_float64_numpy(N, d, dtype, geometry):
    """Offset, scaled columns (the mean matters) and rows that do not fill a program's last step, also with many
    short steps a program and with steps of eight loads, whose tail is most of a step."""
    rng = np.random.default_rng(N + d)
    X = (rng.normal(0.0, 1.0, (N, d)) * rng.uniform(0.1, 1e3, d) + rng.uniform(-1e4, 1e4, d)).astype(
        torch.empty(0, dtype=dtype).numpy().dtype)
    sums = column_sums(torch.as_tensor(X, device=DEVICE), **geometry)
    X64 = X.astype(np.float64)
    np.testing.assert_allclose(sums.total.cpu().numpy(), X64.sum(0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(sums.squares.cpu().numpy(), (X64 * X64).sum(0), rtol=1e-12)
    np.testing.assert_array_equal(sums.low.cpu().numpy(), X64.min(0))  # exact: each is one of X's entries
    np.testing.assert_array_equal(sums.high.cpu().numpy(), X64.max(0))
    np.testing.assert_allclose(sums.mean.cpu().numpy(), X64.mean(0), rtol=1e-12, atol=1e-12)
    # E[x^2] - mean^2 in float64 loses (mean / std)^2 * 1e-16 (up to 1e10 * 1e-16 here): rtol 1e-5
    np.testing.assert_allclose(sums.std.cpu().numpy(), X64.std(0), rtol=1e-5)
    assert sums.finite()


@pytest.mark.parametrize("row, col, value", [(0, 0, float("nan")), (39, 5, float("inf")), (21, 3, -float("inf"))])
def test_one_non_finite_entry_anywhere_is_flagged(row, col, value):
    """One entry in the first row, the last program's tail (row 39: steps of three rows) or mid-step: the flag, and
    only then."""
    X = torch.arange(40 * 6, dtype=torch.float32).reshape(40, 6) - 100.0
    assert column_sums(X.to(DEVICE), tile_elements=8, loads=3).finite()
    X[row, col] = value
    assert not column_sums(X.to(DEVICE), tile_elements=8, loads=3).finite()


def test_non_finite_entries_are_named_by_row():
    X = torch.arange(40 * 6, dtype=torch.float32).reshape(40, 6)
    X[3, 1] = float("nan")
    X[3, 4] = float("inf")
    X[17, 0] = -float("inf")
    X[39, 5] = float("nan")
    assert non_finite_message(X).startswith("X has 3 of 40 rows with NaN or infinity (2 with NaN, 2 with infinity)")
    with pytest.raises(ValueError, match="X has 3 of 40 rows"):
        column_moments(X.to(DEVICE))


def test_float64_squares_that_overflow_are_named_as_such():
    """float64 X beyond ~1e154 is finite but its squares are not: an error that says so, not one about NaN."""
    X = torch.ones(50, 3, dtype=torch.float64)
    X[7, 2] = 1e200
    with pytest.raises(ValueError, match=r"X's squared entries overflow float64 \(\|x\| up to 1e\+200\)"):
        column_moments(X.to(DEVICE))


def test_column_moments_leave_the_extremes_for_the_lift_bound():
    """After the validation pass, the lift bound's radius comes from its extremes (the very tensors, no second
    read of X), and equals max_i |x_ij - c_j|; an in-place write to X makes them stale and they are read anew."""
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(3.0, 2.0, (2000, 9)).astype(np.float32), device=DEVICE)
    mean, _ = column_moments(X)
    sums = column_sums(X)
    kept = column_extremes(X)
    assert torch.equal(kept[0].double(), sums.low) and torch.equal(kept[1].double(), sums.high)
    assert column_extremes(X) is kept
    X64 = X.double().cpu().numpy()
    np.testing.assert_allclose(data_radius(X, mean).cpu().numpy(), np.abs(X64 - X64.mean(0)).max(0), rtol=1e-12)
    X[0, 0] = 1e3
    assert float(column_extremes(X)[1][0]) == 1e3
