"""One read of X for its validation and centering: float64 column sums, sums of squares and extremes (internal).

Before the first E-step the fit needs the column mean (the in-kernel center), that every entry is finite,
and the columns' range (the float32 lift's bound). One persistent launch reads each entry once, sums it and
its square in float64 and keeps its column's min and max; each program writes its own partials (no atomics:
deterministic) and a second launch adds them. A NaN or infinity makes its column's sum of squares
non-finite, so finiteness costs nothing; the caller reads one flag. :func:`bad_row_counts` counts bad rows
on the error path only."""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .launch import program_count

COLUMN_TILE = 128  # columns per program: wider X is covered by a second grid axis
TILE_ELEMENTS = 1024  # rows x columns of one load: 4 float32 a thread at 8 warps, one 16-byte load each
LOADS = 2  # tiles a step
PROGRAMS_PER_SM = 4  # 52 registers x 8 warps (sm_90 compile): 32 warps an SM
# This geometry reads X at ~90% of the HBM floor on the H200 (faster than torch's X.sum(0)); the neighbours
# measured within 2%, one program an SM 2-3.6x slower.
FINISH_ROWS = 16  # partials a step of the finishing launch (x 128 columns: 16 float64 a thread at 4 warps)
FLOAT64_MAX = tl.constexpr(float(torch.finfo(torch.float64).max))


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


@triton.jit
def _finish_kernel(
    partial, out, flags,  # partial (P, 4, d) f64; out (6, d) f64 = [sum | sum of squares | min | max | mean | std];
    # flags (n_ct,) f64: 1 where a column of this tile has a sum that is not finite
    P, N, d,
    BLOCK_P: tl.constexpr, BLOCK_COLS: tl.constexpr,
):
    """The programs' partials added in a fixed order, per column tile, in one launch."""
    ct = tl.program_id(0)
    cols = ct * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    col_ok = cols < d
    s1 = tl.zeros((BLOCK_P, BLOCK_COLS), tl.float64)
    s2 = tl.zeros((BLOCK_P, BLOCK_COLS), tl.float64)
    low = tl.full((BLOCK_P, BLOCK_COLS), float("inf"), tl.float64)
    high = tl.full((BLOCK_P, BLOCK_COLS), float("-inf"), tl.float64)
    for p0 in range(0, P, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        ok = (ps < P)[:, None] & col_ok[None, :]
        at = partial + ps[:, None] * (4 * d) + cols[None, :]
        s1 += tl.load(at, mask=ok, other=0.0)
        s2 += tl.load(at + d, mask=ok, other=0.0)
        low = tl.minimum(low, tl.load(at + 2 * d, mask=ok, other=float("inf")))
        high = tl.maximum(high, tl.load(at + 3 * d, mask=ok, other=float("-inf")))
    total, squares = tl.sum(s1, 0), tl.sum(s2, 0)
    mean = total / N
    std = tl.sqrt(tl.maximum(squares / N - mean * mean, 0.0))
    tl.store(out + cols, total, mask=col_ok)
    tl.store(out + d + cols, squares, mask=col_ok)
    tl.store(out + 2 * d + cols, tl.min(low, 0), mask=col_ok)
    tl.store(out + 3 * d + cols, tl.max(high, 0), mask=col_ok)
    tl.store(out + 4 * d + cols, mean, mask=col_ok)
    tl.store(out + 5 * d + cols, std, mask=col_ok)
    finite = col_ok & (tl.abs(total) <= FLOAT64_MAX) & (squares <= FLOAT64_MAX)  # NaN compares false
    tl.store(flags + ct, tl.max((col_ok & ~finite).to(tl.float64), 0))


class ColumnSums(NamedTuple):
    """Per-column float64 statistics of one read of X; ``non_finite`` is non-zero per column tile holding NaN or inf."""
    total: torch.Tensor
    squares: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    non_finite: torch.Tensor

    def finite(self) -> bool:
        """Every entry finite: the one host sync of the validation pass."""
        return not any(self.non_finite.tolist())


def column_sums(X: torch.Tensor, tile_elements: int = TILE_ELEMENTS, loads: int = LOADS,
                programs_per_sm: float = PROGRAMS_PER_SM, num_warps: int = 8) -> ColumnSums:
    """Sums, sums of squares, extremes, mean and spread (population) of X's columns: two launches, no host sync.

    X (N, d) float32 or float64, contiguous, on CUDA (or CPU under TRITON_INTERPRET=1). A NaN or infinity makes
    its column's sum of squares non-finite (so does a float64 square past its range: :func:`non_finite_message`
    tells them apart); the extremes are then meaningless and the caller raises. The keywords are the geometry."""
    N, d = X.shape
    block_cols = min(COLUMN_TILE, triton.next_power_of_2(d))
    block_rows = max(1, tile_elements // block_cols)
    step = block_rows * loads
    programs = program_count(triton.cdiv(N, step), X.device, programs_per_sm)
    rows_per_program = triton.cdiv(triton.cdiv(N, programs), step) * step
    programs = triton.cdiv(N, rows_per_program)
    col_tiles = triton.cdiv(d, block_cols)
    buffer = torch.empty(programs * 4 * d + 6 * d + col_tiles, dtype=torch.float64, device=X.device)  # one allocation
    partial = buffer[: programs * 4 * d].view(programs, 4, d)
    out = buffer[programs * 4 * d : (programs * 4 + 6) * d].view(6, d)
    flags = buffer[(programs * 4 + 6) * d :]
    _column_sums_kernel[(programs, col_tiles)](X, partial, N, d, rows_per_program, BLOCK_ROWS=block_rows,
                                               BLOCK_COLS=block_cols, LOADS=loads, EVEN_COLS=d % block_cols == 0,
                                               num_warps=num_warps)
    _finish_kernel[(col_tiles,)](partial, out, flags, programs, N, d, BLOCK_P=FINISH_ROWS,
                                 BLOCK_COLS=block_cols, num_warps=4)
    return ColumnSums(*out.unbind(0), flags)


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
