"""A 60-digit mpmath reference of (1)-(4) on tiny cases, both algorithms, both precisions."""
import mpmath
import numpy as np
import pytest

from kernels.tests.conftest import ALGORITHMS, assert_statistics_close, kernel_statistics, problem

mpmath.mp.dps = 60


def mp_estep(X, w, m, v):
    """Statistics in 60-digit arithmetic from the centered score (2)."""
    N, d = X.shape
    K = len(w)
    n = [mpmath.mpf(0)] * K
    s = [[mpmath.mpf(0)] * d for _ in range(K)]
    u = [[mpmath.mpf(0)] * d for _ in range(K)]
    ll = mpmath.mpf(0)
    for i in range(N):
        x = [mpmath.mpf(float(t)) for t in X[i]]
        S = []
        for k in range(K):
            q = sum((x[c] - mpmath.mpf(float(m[k, c]))) ** 2 / mpmath.mpf(float(v[k, c])) for c in range(d))
            logdet = sum(mpmath.log(mpmath.mpf(float(v[k, c]))) for c in range(d))
            S.append(mpmath.log(mpmath.mpf(float(w[k]))) - d * mpmath.log(2 * mpmath.pi) / 2 - logdet / 2 - q / 2)
        L = mpmath.log(sum(mpmath.exp(t) for t in S))
        ll += L
        for k in range(K):
            g = mpmath.exp(S[k] - L)
            n[k] += g
            for c in range(d):
                s[k][c] += g * x[c]
                u[k][c] += g * x[c] ** 2
    f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731
    return f([float(t) for t in n]), f([[float(t) for t in r] for r in s]), f([[float(t) for t in r] for r in u]), float(ll)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(37, 1, 3), (6, 9, 2), (41, 3, 5)])
def test_matches_60_digit_reference(algorithm, N, K, d, precision):
    X, w, m, v = problem(N, K, d, seed=7)
    n, s, u, ll, _ = kernel_statistics(algorithm, X, w, m, v, precision)
    rn, rs, ru, rll = mp_estep(X.cpu().numpy(), w, m, v)
    assert_statistics_close((n, s, u), (rn, rs, ru), X.cpu().numpy(), 1e-6)
    assert abs(ll - rll) <= 2e-7 * abs(rll)
