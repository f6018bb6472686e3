"""Plain float64 NumPy EM for diagonal GMMs: the oracle every kernel and arm is tested against.

The paper's centered score, normalizer, statistics and M-step computed directly (no lift, so it checks the
lift too), and the statistics in 60-digit mpmath (:func:`mp_estep`) where float64 itself is the question."""
from __future__ import annotations

import mpmath
import numpy as np

MP_DIGITS = 60
LOG_2PI = float(np.log(2.0 * np.pi))
EPS64 = float(np.finfo(np.float64).eps)


def log_prob(X, weights, means, variances) -> np.ndarray:
    """S (N, K): log pi_k + log N(x_i; mu_k, diag V_k), centered form, float64."""
    X = np.asarray(X, np.float64)
    m = np.asarray(means, np.float64)
    v = np.asarray(variances, np.float64)
    d = X.shape[1]
    quad = ((X[:, None, :] - m[None, :, :]) ** 2 / v[None, :, :]).sum(-1)
    return np.log(np.asarray(weights, np.float64))[None, :] - 0.5 * (d * LOG_2PI + np.log(v).sum(1))[None, :] - 0.5 * quad


def logsumexp_rows(S: np.ndarray) -> np.ndarray:
    m = S.max(1, keepdims=True)
    return (m + np.log(np.exp(S - m).sum(1, keepdims=True)))[:, 0]


def estep(X, weights, means, variances, chunk: int = 4096):
    """Statistics (n, s, u) and ell at the given parameters, float64, in row chunks."""
    X = np.asarray(X, np.float64)
    K, d = np.shape(means)
    n = np.zeros(K)
    s = np.zeros((K, d))
    u = np.zeros((K, d))
    ell = 0.0
    for r0 in range(0, X.shape[0], chunk):
        x = X[r0 : r0 + chunk]
        S = log_prob(x, weights, means, variances)
        L = logsumexp_rows(S)
        G = np.exp(S - L[:, None])
        n += G.sum(0)
        s += G.T @ x
        u += G.T @ (x * x)
        ell += L.sum()
    return n, s, u, ell


def mstep(n, s, u, N: int, reg_covar: float):
    """(5) with scikit-learn's guard: divide by n_k + 10*eps64, weights (n_k + 10 eps64) / (N + K 10 eps64) (an
    empty component keeps a weight > 0, as scikit-learn's and the kernels' M-step, kernels/diag/mstep.py)."""
    nk = np.asarray(n, np.float64) + 10.0 * EPS64
    mu = s / nk[:, None]
    var = u / nk[:, None] - mu * mu + reg_covar
    return nk / (N + nk.shape[0] * 10.0 * EPS64), mu, var


def em(X, weights, means, variances, n_iter: int, reg_covar: float = 1e-6):
    """n_iter EM iterations: final (weights, means, variances) and ell at each iteration's incoming parameters."""
    w, m, v = (np.asarray(a, np.float64) for a in (weights, means, variances))
    lls = []
    for _ in range(n_iter):
        n, s, u, ell = estep(X, w, m, v)
        lls.append(ell)
        w, m, v = mstep(n, s, u, np.shape(X)[0], reg_covar)
    return (w, m, v), lls


def mean_log_likelihood(X, weights, means, variances, chunk: int = 4096) -> float:
    """Per-point average of (1) in float64."""
    return estep(X, weights, means, variances, chunk)[3] / np.shape(X)[0]


def mp_estep(X, w, m, v, digits: int = MP_DIGITS):
    """Statistics (n, s, u, ell) in `digits`-digit arithmetic from the centered score (2)."""
    with mpmath.workdps(digits):
        N, d = X.shape
        K = len(w)
        n = [mpmath.mpf(0)] * K
        s = [[mpmath.mpf(0)] * d for _ in range(K)]
        u = [[mpmath.mpf(0)] * d for _ in range(K)]
        ll = mpmath.mpf(0)
        mm = [[mpmath.mpf(float(m[k, c])) for c in range(d)] for k in range(K)]
        vv = [[mpmath.mpf(float(v[k, c])) for c in range(d)] for k in range(K)]
        const = [mpmath.log(mpmath.mpf(float(w[k]))) - d * mpmath.log(2 * mpmath.pi) / 2
                 - sum(mpmath.log(t) for t in vv[k]) / 2 for k in range(K)]
        for i in range(N):
            x = [mpmath.mpf(float(t)) for t in X[i]]
            S = [const[k] - sum((x[c] - mm[k][c]) ** 2 / vv[k][c] for c in range(d)) / 2 for k in range(K)]
            L = mpmath.log(sum(mpmath.exp(t) for t in S))
            ll += L
            for k in range(K):
                g = mpmath.exp(S[k] - L)
                n[k] += g
                for c in range(d):
                    s[k][c] += g * x[c]
                    u[k][c] += g * x[c] ** 2
        f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731
        return (f([float(t) for t in n]), f([[float(t) for t in r] for r in s]),
                f([[float(t) for t in r] for r in u]), float(ll))
