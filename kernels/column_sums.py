"""One read of X for its validation and centering: float64 column sums, sums of squares, extremes, non-finite count.

The estimator and :func:`kernels.fit` need, before the first E-step, the column
mean of X (the in-kernel center), the knowledge that every entry is finite, and
the columns' range (the float32 lift's error bound, :mod:`kernels.precision`).
Done with torch ops in row chunks that cost as much as ten EM iterations at
20M x 32 (a float64 copy, ``isfinite``, boolean indexing and a host sync per
chunk). Here one persistent launch reads each float32 entry once, accumulates
it and its square in float64 registers, keeps its columns' minimum and maximum in
X's dtype, and counts the entries that are NaN or infinite; each program writes its
own partial sums and extremes (no atomics: the sums do not
depend on scheduling), and torch adds the few hundred partials. Nothing here
synchronizes with the host: the caller reads the count once.

Rows are not flagged here: a row with several bad entries is counted once only
by :func:`bad_row_counts`, which the caller runs when the entry count is not 0
(the error path, where time does not matter).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import program_count

COLUMN_TILE = 128  # columns per program: wider X is covered by a second grid axis
TILE_ELEMENTS = 4096  # rows x columns of one tile (two float64 accumulators of this size per program)
PROGRAMS_PER_SM = 2  # 128 registers x 8 warps: two programs fill an SM (sm_90 compile), so one wave
# On the H200 at 20M x 32 (results/h200/kernel_measure/column_sums_tiles_2026-12-02_ed7aeb8.csv) this geometry reads
# X in 0.925 ms, 64% of the HBM floor; the best of 72 (2048 elements a tile, 4 warps) 0.914, and issuing the next
# tile's load before this tile's sums (twice the bytes in flight) 1.6 ms at 8 warps: nothing to take.


@triton.jit
def _column_sums_kernel(
    X, partial, bad,  # X (N, d) f32 or f64 contiguous; out: partial (P, 4, d) f64 = [sum x | sum x^2 | min x | max x],
    # bad (P, n_ct) int64
    N, d, rows_per_program,
    BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, FINITE_MAX: tl.constexpr,
):
    p = tl.program_id(0)
    ct = tl.program_id(1)
    cols = ct * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    col_ok = cols < d
    s1 = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float64)
    s2 = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float64)
    n_bad = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.int32)
    low = tl.full((BLOCK_ROWS, BLOCK_COLS), float("inf"), X.dtype.element_ty)  # X's dtype: registers of float32 X
    high = tl.full((BLOCK_ROWS, BLOCK_COLS), float("-inf"), X.dtype.element_ty)
    r_start = p.to(tl.int64) * rows_per_program
    r_end = tl.minimum(r_start + rows_per_program, N)
    for r0 in range(r_start, r_end, BLOCK_ROWS):
        rows = r0 + tl.arange(0, BLOCK_ROWS).to(tl.int64)
        ok = (rows < r_end)[:, None] & col_ok[None, :]
        x = tl.load(X + rows[:, None] * d + cols[None, :], mask=ok, other=0.0)
        n_bad += (ok & ~(tl.abs(x) <= FINITE_MAX)).to(tl.int32)  # NaN compares false, +-inf exceeds the max
        low = tl.minimum(low, tl.where(ok, x, float("inf")))
        high = tl.maximum(high, tl.where(ok, x, float("-inf")))
        x64 = x.to(tl.float64)
        s1 += x64
        s2 += x64 * x64
    tl.store(partial + (p * 4) * d + cols, tl.sum(s1, 0), mask=col_ok)
    tl.store(partial + (p * 4 + 1) * d + cols, tl.sum(s2, 0), mask=col_ok)
    tl.store(partial + (p * 4 + 2) * d + cols, tl.min(low, 0).to(tl.float64), mask=col_ok)
    tl.store(partial + (p * 4 + 3) * d + cols, tl.max(high, 0).to(tl.float64), mask=col_ok)
    tl.store(bad + p * tl.num_programs(1) + ct, tl.sum(tl.sum(n_bad, 1).to(tl.int64), 0))


def column_sums(X: torch.Tensor, tile_elements: int = TILE_ELEMENTS, programs_per_sm: float = PROGRAMS_PER_SM,
                num_warps: int = 8, num_stages: int = 1):
    """(sum of x (d,) f64, sum of x^2 (d,) f64, non-finite entries () int64, (min of x (d,), max of x (d,)) f64),
    all on X's device; the keywords are the launch geometry (``harness.studies.validation_phase --tiles``).

    X: (N, d) float32 (or float64), contiguous, on CUDA (or on the CPU under TRITON_INTERPRET=1).
    Entries that are NaN or infinite are counted and enter the sums as they are (the extremes are then
    meaningless: the caller raises on the count)."""
    N, d = X.shape
    block_cols = min(COLUMN_TILE, triton.next_power_of_2(d))
    block_rows = max(1, tile_elements // block_cols)
    programs = program_count(triton.cdiv(N, block_rows), X.device, programs_per_sm)
    rows_per_program = triton.cdiv(triton.cdiv(N, programs), block_rows) * block_rows
    programs = triton.cdiv(N, rows_per_program)
    col_tiles = triton.cdiv(d, block_cols)
    partial = torch.empty((programs, 4, d), dtype=torch.float64, device=X.device)
    bad = torch.empty((programs, col_tiles), dtype=torch.int64, device=X.device)
    _column_sums_kernel[(programs, col_tiles)](X, partial, bad, N, d, rows_per_program,
                                               BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
                                               FINITE_MAX=float(torch.finfo(X.dtype).max), num_warps=num_warps,
                                               num_stages=num_stages)
    sums = partial[:, :2].sum(0)
    return sums[0], sums[1], bad.sum(), (partial[:, 2].amin(0), partial[:, 3].amax(0))


def bad_row_counts(X: torch.Tensor, rows_per_chunk: int = 1 << 18) -> tuple[int, int, int]:
    """(rows holding NaN, rows holding +-inf, rows holding either) of any (N, d) tensor, for the error message."""
    nan = inf = either = 0
    for r0 in range(0, X.shape[0], rows_per_chunk):
        x = X[r0 : r0 + rows_per_chunk]
        has_nan, has_inf = torch.isnan(x).any(1), torch.isinf(x).any(1)
        nan, inf, either = (a + int(b.sum()) for a, b in ((nan, has_nan), (inf, has_inf), (either, has_nan | has_inf)))
    return nan, inf, either


def non_finite_message(X: torch.Tensor) -> str:
    """The ValueError's text for X with non-finite entries: how many rows, of which kind."""
    nan, inf, either = bad_row_counts(X)
    return (f"X has {either} of {X.shape[0]} rows with NaN or infinity ({nan} with NaN, {inf} with infinity); "
            "drop or impute them first")
