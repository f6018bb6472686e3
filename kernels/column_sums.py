"""One read of X for its validation and centering: float64 column sums, sums of squares and extremes.

The estimator and :func:`kernels.fit` need, before the first E-step, the column
mean of X (the in-kernel center), the knowledge that every entry is finite, and
the columns' range (the float32 lift's error bound, :mod:`kernels.precision`).
Done with torch ops in row chunks that cost as much as ten EM iterations at
20M x 32 (a float64 copy, ``isfinite``, boolean indexing and a host sync per
chunk). Here one persistent launch reads each float32 entry once, accumulates
it and its square in float64 registers and keeps its columns' minimum and maximum
in X's dtype; each program writes its own partial sums and extremes (no atomics:
the sums do not depend on scheduling), and torch adds the few hundred partials.
Finiteness costs nothing per entry: a NaN or an infinity makes its column's sum of
squares non-finite. Nothing here synchronizes with the host: the caller reads one flag.

Per entry the loop is a load's share, one conversion, an add, a fused multiply-add
and two extremes (about six instructions): the rows of a step are unmasked, only the
last program's tail is. Rows are not flagged here: :func:`bad_row_counts` counts
them on the error path, where time does not matter.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import program_count

COLUMN_TILE = 128  # columns per program: wider X is covered by a second grid axis
TILE_ELEMENTS = 1024  # rows x columns of one load: 4 float32 a thread at 8 warps, one 16-byte load each
LOADS = 4  # loads issued back to back before their sums: 64 bytes a thread in flight
PROGRAMS_PER_SM = 3


@triton.jit
def _column_sums_kernel(
    X, partial,  # X (N, d) f32 or f64 contiguous; out: partial (P, 4, d) f64 = [sum x | sum x^2 | min x | max x]
    N, d, rows_per_program,  # rows_per_program: a multiple of BLOCK_ROWS * LOADS
    BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, LOADS: tl.constexpr, EVEN_COLS: tl.constexpr,
):
    p = tl.program_id(0)
    ct = tl.program_id(1)
    cols = ct * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    col_ok = cols < d
    offsets = tl.arange(0, BLOCK_ROWS)[:, None] * d + cols[None, :]  # int32 within a tile; rows go in the base
    s1 = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float64)
    s2 = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float64)
    low = tl.full((BLOCK_ROWS, BLOCK_COLS), float("inf"), X.dtype.element_ty)  # X's dtype: registers of float32 X
    high = tl.full((BLOCK_ROWS, BLOCK_COLS), float("-inf"), X.dtype.element_ty)
    r_start = p.to(tl.int64) * rows_per_program
    r_end = tl.minimum(r_start + rows_per_program, N)
    full_end = r_start + (r_end - r_start) // (BLOCK_ROWS * LOADS) * (BLOCK_ROWS * LOADS)
    # Whole steps of LOADS tiles, unmasked along rows; the columns a mask hides (EVEN_COLS false) are summed as 0
    # and never stored, so their extremes need no select either
    for r0 in range(r_start, full_end, BLOCK_ROWS * LOADS):
        tile = X + r0 * d + offsets
        for u in tl.static_range(LOADS):
            if EVEN_COLS:
                x = tl.load(tile + u * BLOCK_ROWS * d)
            else:
                x = tl.load(tile + u * BLOCK_ROWS * d, mask=col_ok[None, :], other=0.0)
            low = tl.minimum(low, x)
            high = tl.maximum(high, x)
            x64 = x.to(tl.float64)
            s1 += x64
            s2 += x64 * x64
    for r0 in range(full_end, r_end, BLOCK_ROWS):  # the last program's rows past its last whole step
        ok = (r0 + tl.arange(0, BLOCK_ROWS) < r_end)[:, None] & col_ok[None, :]
        x = tl.load(X + r0 * d + offsets, mask=ok, other=0.0)
        low = tl.minimum(low, tl.where(ok, x, float("inf")))
        high = tl.maximum(high, tl.where(ok, x, float("-inf")))
        x64 = x.to(tl.float64)
        s1 += x64
        s2 += x64 * x64
    tl.store(partial + (p * 4) * d + cols, tl.sum(s1, 0), mask=col_ok)
    tl.store(partial + (p * 4 + 1) * d + cols, tl.sum(s2, 0), mask=col_ok)
    tl.store(partial + (p * 4 + 2) * d + cols, tl.min(low, 0).to(tl.float64), mask=col_ok)
    tl.store(partial + (p * 4 + 3) * d + cols, tl.max(high, 0).to(tl.float64), mask=col_ok)


def column_sums(X: torch.Tensor, tile_elements: int = TILE_ELEMENTS, loads: int = LOADS,
                programs_per_sm: float = PROGRAMS_PER_SM, num_warps: int = 8):
    """(sum of x (d,) f64, sum of x^2 (d,) f64, non-finite () bool, (min of x (d,), max of x (d,)) f64), all on
    X's device; the keywords are the launch geometry (``harness.studies.validation_phase --tiles``).

    X: (N, d) float32 (or float64), contiguous, on CUDA (or on the CPU under TRITON_INTERPRET=1).
    ``non-finite`` is true where some entry is NaN or infinite: the sums of such a column are then not finite,
    which costs the kernel nothing per entry (a float32 square cannot overflow float64; a float64 one beyond
    1.3e154 can, and reads as non-finite too: :func:`non_finite_message` tells the two apart). The extremes
    skip NaN and are meaningless where ``non-finite``: the caller raises."""
    N, d = X.shape
    block_cols = min(COLUMN_TILE, triton.next_power_of_2(d))
    block_rows = max(1, tile_elements // block_cols)
    step = block_rows * loads
    programs = program_count(triton.cdiv(N, step), X.device, programs_per_sm)
    rows_per_program = triton.cdiv(triton.cdiv(N, programs), step) * step
    programs = triton.cdiv(N, rows_per_program)
    col_tiles = triton.cdiv(d, block_cols)
    partial = torch.empty((programs, 4, d), dtype=torch.float64, device=X.device)
    _column_sums_kernel[(programs, col_tiles)](X, partial, N, d, rows_per_program, BLOCK_ROWS=block_rows,
                                               BLOCK_COLS=block_cols, LOADS=loads, EVEN_COLS=d % block_cols == 0,
                                               num_warps=num_warps)
    sums = partial[:, :2].sum(0)
    return sums[0], sums[1], ~torch.isfinite(sums).all(), (partial[:, 2].amin(0), partial[:, 3].amax(0))


def bad_row_counts(X: torch.Tensor, rows_per_chunk: int = 1 << 18) -> tuple[int, int, int]:
    """(rows holding NaN, rows holding +-inf, rows holding either) of any (N, d) tensor, for the error message."""
    nan = inf = either = 0
    for r0 in range(0, X.shape[0], rows_per_chunk):
        x = X[r0 : r0 + rows_per_chunk]
        has_nan, has_inf = torch.isnan(x).any(1), torch.isinf(x).any(1)
        nan, inf, either = (a + int(b.sum()) for a, b in ((nan, has_nan), (inf, has_inf), (either, has_nan | has_inf)))
    return nan, inf, either


def non_finite_message(X: torch.Tensor) -> str:
    """The ValueError's text for X whose sums are not finite: how many rows hold NaN or infinity, of which
    kind; or, where none does (float64 X beyond ~1e154), that the squares overflow."""
    nan, inf, either = bad_row_counts(X)
    if not either:
        return (f"X's squared entries overflow float64 (|x| up to {float(X.abs().max()):.3g}); scale the data "
                "first")
    return (f"X has {either} of {X.shape[0]} rows with NaN or infinity ({nan} with NaN, {inf} with infinity); "
            "drop or impute them first")
