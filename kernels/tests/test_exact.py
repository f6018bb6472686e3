"""A 60-digit mpmath reference of (1)-(4) on tiny cases, both algorithms, both precisions."""
import pytest

from kernels.reference import mp_estep
from kernels.tests.conftest import ALGORITHMS, assert_statistics_close, kernel_statistics, problem


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(37, 1, 3), (6, 9, 2), (41, 3, 5)])
def test_matches_60_digit_reference(algorithm, N, K, d, precision):
    X, w, m, v = problem(N, K, d, seed=7)
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, precision)
    rn, rs, ru, rll = mp_estep(X.cpu().numpy(), w, m, v)
    assert_statistics_close((n, s, u), (rn, rs, ru), X.cpu().numpy(), 1e-6)
    assert abs(ll - rll) <= 2e-7 * abs(rll)
