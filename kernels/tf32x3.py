"""tf32x3 by hand: fp32-accurate products from three TF32 tensor-core products (internal).

``tl.dot(..., input_precision="tf32x3")`` splits both operands in every call and returns a fresh tile; the
kernels here split each operand once where it is formed and accumulate in the products' own accumulator, in
tl.dot's order (lo*hi, hi*lo, hi*hi). Inputs are validated finite, so tl.dot's NaN scrub is not needed.
Under "fp64" the operands are float64 and one ``tl.dot`` (DMMA) is the product."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# cvt.rna.tf32.f32 in integer arithmetic, for the kernels and the host alike: add half a unit of TF32's last
# mantissa bit, then clear the 13 bits below it (ties away from zero; a carry rounds into the exponent)
TF32_HALF_UNIT = tl.constexpr(0x1000)
TF32_MASK = tl.constexpr(-8192)


@triton.jit
def tf32_high(x):
    """x rounded to TF32 (10 mantissa bits, ties away from zero), in integer arithmetic so the
    interpreter runs it too; x - tf32_high(x) is exact."""
    return ((x.to(tl.int32, bitcast=True) + TF32_HALF_UNIT) & TF32_MASK).to(tl.float32, bitcast=True)


@triton.jit
def split(x, PRECISION: tl.constexpr):
    """An operand as (high, low): x's TF32 halves under tf32x3 (high + low == x exactly);
    (x, x) under any other precision (ieee, fp64), where :func:`dot` reads only the first."""
    if PRECISION == "tf32x3":
        high = tf32_high(x)
        return high, x - high
    else:
        return x, x


@triton.jit
def join(high, low, PRECISION: tl.constexpr):
    """The operand :func:`split` made (high, low) from, exactly."""
    if PRECISION == "tf32x3":
        return high + low
    else:
        return high


@triton.jit
def dot(a_hi, a_lo, b_hi, b_lo, acc, PRECISION: tl.constexpr):
    """acc + a @ b from operands made by :func:`split`: three TF32 products accumulated in acc
    under tf32x3, one float64 product into a float64 acc under fp64, one tl.dot at ``PRECISION`` otherwise."""
    if PRECISION == "tf32x3":
        acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
        acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
        return tl.dot(a_hi, b_hi, acc, input_precision="tf32")
    elif PRECISION == "fp64":
        return tl.dot(a_hi, b_hi, acc, input_precision="ieee", out_dtype=tl.float64)
    else:
        return tl.dot(a_hi, b_hi, acc, input_precision=PRECISION)


def split_transposed(W: torch.Tensor) -> torch.Tensor:
    """(2, cols, rows) float32: W^T's TF32 high half and the exact remainder, rows contiguous
    (host side of :func:`split`, for operands whose tiles a kernel streams from memory)."""
    Wt = W.t().contiguous()
    high = ((Wt.view(torch.int32) + TF32_HALF_UNIT.value) & TF32_MASK.value).view(torch.float32)
    return torch.stack((high, Wt - high))
