"""Both algorithms' statistics against the float64 oracle (Theorem 1, in floating point).

Irregular sizes on purpose: K = 1, K > N, K and d not powers of two, N not a
multiple of the row tile, a single row; several tilings and program counts.
"""
import numpy as np
import pytest
import torch

from turbo_gmm.diag import reference as ref
from turbo_gmm.launch import LaunchConfig
from turbo_gmm.tests.conftest import (ALGORITHMS, assert_close_rel, assert_per_component_close, assert_statistics_close,
                                    kernel_statistics, per_component_scales, problem)

RTOL = 2e-5  # fp32 accumulation over ~1e3 rows; tf32x3 is fp32-accurate
FP64_RTOL = 1e-12  # issue 20: precision fp64 is scikit-learn's float64 arithmetic

CASES = [  # (N, K, d)
    (1023, 7, 5),
    (1023, 1, 33),  # d_pad = 64: the one-pass kernel contracts the lift's halves apart
    (5, 9, 3),  # K > N
    (1, 3, 4),  # a single row
    (700, 100, 5),
    (257, 3, 33),
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", CASES)
def test_statistics_match_float64_reference(algorithm, N, K, d, precision):
    X, w, m, v = problem(N, K, d)
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, precision)
    rn, rs, ru, rll = ref.estep(X.cpu().numpy(), w, m, v)
    assert_statistics_close((n, s, u), (rn, rs, ru), X.cpu().numpy(), RTOL)
    assert abs(ll - rll) <= 1e-6 * abs(rll), (ll, rll)
    assert abs(n.sum() - N) <= 1e-5 * N  # rows of Gamma sum to one


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", CASES)
def test_fp64_statistics_match_float64_reference_per_component(algorithm, N, K, d):
    """fp64: float64 lift, score, normalizer and sums; every component's n, s, u to 1e-12 of its own size."""
    X, w, m, v = problem(N, K, d)
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, "fp64")
    rn, rs, ru, rll = ref.estep(X.cpu().numpy(), w, m, v)
    assert_per_component_close((n, s, u), (rn, rs, ru), per_component_scales(X.cpu().numpy(), w, m, v), FP64_RTOL)
    assert abs(ll - rll) <= FP64_RTOL * abs(rll), (ll, rll)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fp64_reads_float64_x_where_it_is(algorithm):
    """float64 X is read as float64 (no rounding to float32): data that float32 cannot hold (x + 1e-9 on
    a 1e3 offset) keeps its statistics to 1e-12, where the same data rounded to float32 does not."""
    X, w, m, v = problem(1023, 7, 5, seed=3)
    X64 = X.double() + torch.linspace(0.0, 1e-6, X.shape[0], dtype=torch.float64, device=X.device)[:, None]
    n, s, u, ll, _ = kernel_statistics(algorithm, X64, w, m, v, "fp64")
    want = ref.estep(X64.cpu().numpy(), w, m, v)
    scales = per_component_scales(X64.cpu().numpy(), w, m, v)
    assert_per_component_close((n, s, u), want[:3], scales, FP64_RTOL)
    rounded = kernel_statistics(algorithm, X64.float(), w, m, v, "fp64")
    assert float((np.abs(rounded[1] - want[1]) / scales[1]).max()) > 100 * FP64_RTOL  # float32 X loses it


TILINGS = [
    LaunchConfig(block_n=16, block_k=16, programs_per_sm=1),
    LaunchConfig(block_n=32, block_k=32),
    LaunchConfig(block_n=64, block_k=16, programs_per_sm=4),
    LaunchConfig(block_n=16, block_k=32, normalizer_block_n=64, normalizer_block_k=16, normalizer_warps=8),  # pass 1 apart
    LaunchConfig(block_n=64, block_k=32, max_registers=128),  # capped registers: spills on a GPU, same sums
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_result_does_not_depend_on_tiling(algorithm):
    """Theorem 1: any row/component partition and visit order gives the same sums."""
    X, w, m, v = problem(1023, 37, 6, seed=4)
    runs = [kernel_statistics(algorithm, X, w, m, v, "ieee", cfg) for cfg in TILINGS]
    for run in runs[1:]:
        assert_statistics_close(run[:3], runs[0][:3], X.cpu().numpy(), 1e-6)
        assert abs(run[3] - runs[0][3]) <= 1e-6 * abs(runs[0][3])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_padded_lanes_stay_finite_and_empty(algorithm):
    """K = 1 pads 15 component lanes with the -3e38 sentinel: no NaN, no mass."""
    X, w, m, v = problem(300, 1, 3)
    n, s, u, ll, (n_pad, su_pad) = kernel_statistics(algorithm, X, w, m, v, "tf32x3")
    assert np.isfinite(ll) and np.isfinite(n).all()
    assert n[0] == pytest.approx(300.0, rel=1e-6)
    assert np.all(n_pad == 0.0) and np.all(su_pad == 0.0)


def test_two_passes_agree_with_one_pass():
    X, w, m, v = problem(1023, 100, 5, seed=2)
    a = kernel_statistics("one_pass", X, w, m, v, "tf32x3")
    b = kernel_statistics("two_pass", X, w, m, v, "tf32x3")
    assert_statistics_close(b[:3], a[:3], X.cpu().numpy(), 1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: X of 2**31+ elements (8.6 GB)")
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_rows_past_2_31_elements_are_read_where_they_are(algorithm):
    """Row offsets row * stride pass int32 at N*d >= 2**31 (200M x 32, the streaming benchmark's
    in-memory run, read out of bounds before offsets were int64). X is zero but for its last
    rows: zero rows add nothing to s and u (center 0), so those must be the tail's alone."""
    N, tail, K, d = 2**31 // 32 + 4096, 1000, 7, 32
    Xt, w, m, v = problem(tail, K, d, seed=3)
    X = torch.zeros(N, d, device=Xt.device)
    X[-tail:] = Xt
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, "ieee")
    del X
    _, ts, tu, _, _ = kernel_statistics(algorithm, Xt, w, m, v, "ieee")
    xmax = float(Xt.abs().max())
    assert_close_rel(s, ts, 1e-5, "s", tail * xmax)
    assert_close_rel(u, tu, 1e-5, "u", tail * xmax**2)
    assert n.sum() == pytest.approx(N, rel=1e-3) and np.isfinite(ll)
