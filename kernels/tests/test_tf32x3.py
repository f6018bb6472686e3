"""kernels/tf32x3.py: the TF32 split against an independent rounding (frexp), on the host and in a kernel,
and the three-product dot against float64."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from turbo_gmm import tf32x3
from turbo_gmm.tests.conftest import DEVICE, PRECISIONS


def tf32_round_half_away(x):
    """x rounded to TF32: 11 significant bits, a fixed quantum below the smallest normal exponent
    (TF32 has float32's exponent range and subnormals), ties away from zero, as cvt.rna.tf32.f32."""
    x = np.asarray(x, np.float64)
    quantum = np.ldexp(1.0, np.maximum(np.frexp(x)[1], -125) - 11)
    return np.sign(x) * np.floor(np.abs(x) / quantum + 0.5) * quantum


def awkward_values(shape, seed=0):
    """Random magnitudes over 60 decades, then exact ties of both signs, a carry into the exponent,
    a subnormal tie and zero in the first row."""
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    ties = np.array([0x3F801000, 0xBF801000, 0x3F803000, 0x3FFFF000, 0x00001000, 0], dtype=np.uint32).view(np.float32)
    W[0, : ties.size] = ties
    return W


def test_host_split_is_tf32_round_to_nearest_away_and_exact():
    """Pass 1's pre-split W^T: high is W^T rounded to TF32, high + low == W^T exactly, rows contiguous."""
    W = awkward_values((64, 48))
    high, low = tf32x3.split_transposed(torch.from_numpy(W)).numpy()
    np.testing.assert_array_equal(high, tf32_round_half_away(W.T))
    np.testing.assert_array_equal(high.astype(np.float64) + low, W.T.astype(np.float64))
    assert high.flags.c_contiguous and high.shape == (48, 64)


@triton.jit
def _split_kernel(x_ptr, hi_ptr, lo_ptr, joined_ptr, R: tl.constexpr, C: tl.constexpr, PRECISION: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    hi, lo = tf32x3.split(tl.load(x_ptr + offs), PRECISION)
    tl.store(hi_ptr + offs, hi)
    tl.store(lo_ptr + offs, lo)
    tl.store(joined_ptr + offs, tf32x3.join(hi, lo, PRECISION))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_kernel_split_matches_the_host_split(precision):
    """In a kernel: tf32x3 splits as the host does, bit for bit, and high + low == x exactly; other
    precisions leave the operand whole (high is x); join gives x back either way."""
    W = awkward_values((16, 32), seed=1)
    x = torch.from_numpy(W).to(DEVICE)
    hi, lo, joined = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    _split_kernel[(1,)](x, hi, lo, joined, R=16, C=32, PRECISION=precision)
    hi, lo = hi.cpu().numpy(), lo.cpu().numpy()
    np.testing.assert_array_equal(joined.cpu().numpy(), W)
    if precision == "tf32x3":
        np.testing.assert_array_equal(hi, tf32x3.split_transposed(torch.from_numpy(W.T.copy())).numpy()[0])
        np.testing.assert_array_equal(hi.astype(np.float64) + lo, W.astype(np.float64))
    else:
        np.testing.assert_array_equal(hi, W)


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr, PRECISION: tl.constexpr):
    a_hi, a_lo = tf32x3.split(tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :]), PRECISION)
    b_hi, b_lo = tf32x3.split(tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :]), PRECISION)
    acc = tl.full([M, N], 1.0, tl.float32)  # accumulates in place: the result is 1 + a @ b
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :],
             tf32x3.dot(a_hi, a_lo, b_hi, b_lo, acc, PRECISION))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_dot_is_fp32_accurate_and_accumulates_in_place(precision):
    """1 + a @ b against float64 to fp32 accuracy at both precisions (one TF32 product alone is off by
    ~1e-3 relative: tf32x3's three products must all be there)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 16)).astype(np.float32)
    c = torch.empty((32, 16), dtype=torch.float32, device=DEVICE)
    _dot_kernel[(1,)](torch.from_numpy(a).to(DEVICE), torch.from_numpy(b).to(DEVICE), c, M=32, K=64, N=16,
                      PRECISION=precision)
    want = 1.0 + a.astype(np.float64) @ b.astype(np.float64)
    scale = 1.0 + np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.max(np.abs(c.cpu().numpy() - want) / scale) <= 1e-6
