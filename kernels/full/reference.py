"""Plain float64 NumPy EM for full- and tied-covariance GMMs: the oracle of kernels/full and kernels/tied.

Scores in scikit-learn's form, y = (x - mu_k) U_k with U_k the upper-triangular precision
Cholesky factor (U U^T = Sigma^-1), computed directly (no lift, no whitening trick) so that it
checks both dataflows of the kernels. Optional sample weights multiply every statistic."""
from __future__ import annotations

import numpy as np

from ..diag.reference import EPS64, LOG_2PI, logsumexp_rows

ILL_DEFINED_COVARIANCE = (
    "Fitting the mixture model failed because some components have ill-defined empirical covariance "
    "(for instance caused by singleton or collapsed samples). Try to decrease the number of components, "
    "increase reg_covar, or scale the input data.")


def precisions_cholesky(covariances) -> np.ndarray:
    """U with U U^T = Sigma^-1, upper triangular, per matrix of (..., d, d); scikit-learn's
    ValueError when a matrix is not positive definite."""
    cov = np.asarray(covariances, np.float64)
    try:
        C = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError(ILL_DEFINED_COVARIANCE) from None
    eye = np.broadcast_to(np.eye(cov.shape[-1]), cov.shape)
    return np.swapaxes(np.linalg.solve(C, eye), -1, -2)


def log_prob_full(X, weights, means, prec_chol) -> np.ndarray:
    """S (N, K): log pi_k + log N(x_i; mu_k, Sigma_k), float64."""
    X, m, U = (np.asarray(a, np.float64) for a in (X, means, prec_chol))
    d = X.shape[1]
    log_det = np.log(np.diagonal(U, axis1=1, axis2=2)).sum(1)
    y = np.einsum("nd,kde->nke", X, U) - np.einsum("kd,kde->ke", m, U)[None]
    return np.log(np.asarray(weights, np.float64))[None] + log_det[None] - 0.5 * d * LOG_2PI - 0.5 * (y * y).sum(-1)


def log_prob_tied(X, weights, means, prec_chol) -> np.ndarray:
    U = np.asarray(prec_chol, np.float64)
    return log_prob_full(X, weights, means, np.broadcast_to(U, (np.shape(means)[0],) + U.shape))


def _responsibilities(X, weights, means, prec_chol, log_prob, sample_weight, chunk):
    X = np.asarray(X, np.float64)
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, np.float64)
    for r0 in range(0, X.shape[0], chunk):
        S = log_prob(X[r0 : r0 + chunk], weights, means, prec_chol)
        L = logsumexp_rows(S)
        yield X[r0 : r0 + chunk], np.exp(S - L[:, None]) * w[r0 : r0 + chunk, None], L, w[r0 : r0 + chunk]


def estep_full(X, weights, means, prec_chol, sample_weight=None, center=None, chunk: int = 2048):
    """(n (K,), s (K, d), M2 (K, d, d), ell) with s = sum_i g_ik (x_i - c), M2 = sum_i g_ik (x_i - c)(x_i - c)^T,
    g_ik = w_i gamma_ik, ell = sum_i w_i L_i; c = ``center`` (default 0)."""
    K, d = np.shape(means)
    c = np.zeros(d) if center is None else np.asarray(center, np.float64)
    n, s, M2, ell = np.zeros(K), np.zeros((K, d)), np.zeros((K, d, d)), 0.0
    for x, G, L, w in _responsibilities(X, weights, means, prec_chol, log_prob_full, sample_weight, chunk):
        xc = x - c
        n += G.sum(0)
        s += G.T @ xc
        M2 += np.einsum("nk,nd,ne->kde", G, xc, xc)
        ell += float(w @ L)
    return n, s, M2, ell


def estep_tied(X, weights, means, prec_chol, sample_weight=None, chunk: int = 2048):
    """(n (K,), s (K, d) = sum_i g_ik x_i, ell) for the shared precision Cholesky ``prec_chol`` (d, d)."""
    K, d = np.shape(means)
    n, s, ell = np.zeros(K), np.zeros((K, d)), 0.0
    for x, G, L, w in _responsibilities(X, weights, means, prec_chol, log_prob_tied, sample_weight, chunk):
        n += G.sum(0)
        s += G.T @ x
        ell += float(w @ L)
    return n, s, ell


def mstep_full(n, s, M2, reg_covar: float, center=None):
    """(weights, means, covariances, precisions_cholesky) from statistics about ``center``, as scikit-learn:
    n_k + 10 eps64 in every division, weights normalized to sum to one."""
    nk = np.asarray(n, np.float64) + 10.0 * EPS64
    mu = np.asarray(s, np.float64) / nk[:, None]
    cov = np.asarray(M2, np.float64) / nk[:, None, None] - mu[:, :, None] * mu[:, None, :]
    cov += reg_covar * np.eye(mu.shape[1])
    c = 0.0 if center is None else np.asarray(center, np.float64)
    return nk / nk.sum(), mu + c, cov, precisions_cholesky(cov)


def scatter(X, sample_weight=None) -> np.ndarray:
    """sum_i w_i x_i x_i^T (d, d): the data's part of the tied covariance, once per fit."""
    X = np.asarray(X, np.float64)
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, np.float64)
    return (X * w[:, None]).T @ X


def mstep_tied(n, s, data_scatter, reg_covar: float):
    """Sigma_tied = (sum_i w x x^T - sum_k n_k mu_k mu_k^T) / sum_k n_k + reg_covar I, as scikit-learn's
    _estimate_gaussian_covariances_tied (n_k + 10 eps64 throughout)."""
    nk = np.asarray(n, np.float64) + 10.0 * EPS64
    mu = np.asarray(s, np.float64) / nk[:, None]
    cov = (np.asarray(data_scatter, np.float64) - (nk[:, None] * mu).T @ mu) / nk.sum()
    cov += reg_covar * np.eye(mu.shape[1])
    return nk / nk.sum(), mu, cov, precisions_cholesky(cov)


def em_full(X, weights, means, prec_chol, n_iter: int, reg_covar: float = 1e-6, sample_weight=None):
    """n_iter iterations; ((weights, means, covariances, precisions_cholesky), ell per iteration at its
    incoming parameters). The covariances are None when n_iter = 0."""
    params = (np.asarray(weights, np.float64), np.asarray(means, np.float64), None, np.asarray(prec_chol, np.float64))
    lls = []
    for _ in range(n_iter):
        n, s, M2, ell = estep_full(X, params[0], params[1], params[3], sample_weight)
        lls.append(ell)
        params = mstep_full(n, s, M2, reg_covar)
    return params, lls


def em_tied(X, weights, means, prec_chol, n_iter: int, reg_covar: float = 1e-6, sample_weight=None):
    params = (np.asarray(weights, np.float64), np.asarray(means, np.float64), None, np.asarray(prec_chol, np.float64))
    data_scatter = scatter(X, sample_weight)
    lls = []
    for _ in range(n_iter):
        n, s, ell = estep_tied(X, params[0], params[1], params[3], sample_weight)
        lls.append(ell)
        params = mstep_tied(n, s, data_scatter, reg_covar)
    return params, lls
