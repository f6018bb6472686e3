"""A 60-digit mpmath reference of (1)-(4) on tiny cases, both algorithms, every precision."""
import pytest

from turbo_gmm.diag.reference import mp_estep
from turbo_gmm.tests.conftest import (ALGORITHMS, assert_per_component_close, assert_statistics_close, kernel_statistics,
                                    per_component_scales, problem)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(37, 1, 3), (6, 9, 2), (41, 3, 5)])
def test_matches_60_digit_reference(algorithm, N, K, d, precision):
    X, w, m, v = problem(N, K, d, seed=7)
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, precision)
    rn, rs, ru, rll = mp_estep(X.cpu().numpy(), w, m, v)
    assert_statistics_close((n, s, u), (rn, rs, ru), X.cpu().numpy(), 1e-6)
    assert abs(ll - rll) <= 2e-7 * abs(rll)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(37, 1, 3), (6, 9, 2), (41, 3, 5), (33, 17, 5)])
def test_fp64_matches_60_digit_reference_to_1e_12(algorithm, N, K, d):
    """precision fp64 against 60 digits, every component to 1e-12 of its own size (issue 20)."""
    X, w, m, v = problem(N, K, d, seed=7)
    Xn = X.cpu().numpy()
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, "fp64")
    rn, rs, ru, rll = mp_estep(Xn, w, m, v)
    assert_per_component_close((n, s, u), (rn, rs, ru), per_component_scales(Xn, w, m, v), 1e-12)
    assert abs(ll - rll) <= 1e-12 * abs(rll)
