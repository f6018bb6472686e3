"""Materializing EM (the paper's Algorithm 1) written with plain torch ops in fp32.

This is the dataflow every library uses, without any library's overheads: per
iteration it writes the N x K score S to memory (two matmuls, against X and the
N x d temporary X*X, plus a per-component offset: the expanded form of
the paper's score (2)), normalizes it by a row log-sum-exp into a second N x K array Gamma,
reduces Gamma to the statistics n = Gamma.sum(0), s = Gamma^T X and
u = Gamma^T (X*X), and applies the M-step with ``reg_covar`` and scikit-learn's
``n_k + 10*eps64`` guard. In float32 that guard is a no-op unless n_k == 0
exactly (10*eps64 = 2.2e-15 is below half an ulp of any n_k >= 1e-7); an empty
component then gets mean 0 and variance ``reg_covar`` instead of 0/0 = NaN.

Numerics: fp32; the worker turns TF32 off before import (the flag read at run
time is recorded in ``Fit.info``). Runs on whatever device X is on (CPU in CI).
Where it fails silently: nowhere by construction, but float32 cancellation in
``u/n - mu^2`` can still reach a variance <= 0 at reg_covar = 0; the gate
catches that.

Full covariances (:func:`em_iteration_full`): the same dataflow with the score of
per-component products, y = X [U_1 | ... | U_K] - [mu_1 U_1 | ...] (U_k the fp32
upper precision Cholesky factor, U U^T = Sigma^-1), one N x K*d product written to
memory and squared in place, then S and Gamma (N x K) as above; the second moments
M2_k = sum_i Gamma_ik x_i x_i^T in one product of the N x K*d array Gamma (x) X with X,
and Sigma_k = M2_k / n_k - mu_k mu_k^T + reg_covar I, symmetrized. A Cholesky that fails
(Sigma not positive definite in fp32) is reported as a non-finite factor, never raised: the
gate rejects the fit.
"""
from __future__ import annotations

import math

import torch

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
COVARIANCE_TYPES = ("diag", "full")
EPS64 = 2.220446049250313e-16  # float64 machine epsilon, as in scikit-learn's guard


def available() -> str | None:
    return None  # torch is the harness's own dependency


def em_iteration(X: torch.Tensor, weights, means, variances, reg_covar: float):
    """One EM iteration in the materializing dataflow; returns the new (weights, means, variances)."""
    N, d = X.shape
    tau = variances.reciprocal()  # (K, d) precisions
    offset = (  # b_k of the lifted score
        weights.log()
        - 0.5 * d * math.log(2.0 * math.pi)
        - 0.5 * variances.log().sum(1)
        - 0.5 * (means * means * tau).sum(1)
    )
    XX = X * X  # N x d temporary, as libraries form it
    S = torch.addmm(offset, X, (means * tau).T)  # N x K score, written to memory
    S.addmm_(XX, tau.T, alpha=-0.5)
    L = torch.logsumexp(S, dim=1, keepdim=True)  # row normalizers
    G = (S - L).exp_()  # Gamma: a second N x K array, written to memory
    del S
    n = G.sum(0)
    s = G.T @ X
    u = G.T @ XX
    nk = (n + 10.0 * EPS64)[:, None]
    mu = s / nk
    var = u / nk - mu * mu + reg_covar
    return n / N, mu, var


def precision_cholesky(cov: torch.Tensor) -> torch.Tensor:
    """U (K, d, d) upper triangular with U U^T = cov^-1, in cov's dtype; NaN where cov is not positive definite."""
    C, info = torch.linalg.cholesky_ex(cov)
    eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device).expand_as(C)
    U = torch.linalg.solve_triangular(C, eye, upper=False).transpose(-1, -2)
    return torch.where((info == 0)[:, None, None], U, torch.nan)


def em_iteration_full(X: torch.Tensor, weights, means, cov, reg_covar: float):
    """One full-covariance EM iteration in the materializing dataflow; the new (weights, means, covariances)."""
    N, d = X.shape
    K = means.shape[0]
    U = precision_cholesky(cov)  # (K, d, d)
    offset = weights.log() + torch.diagonal(U, dim1=-2, dim2=-1).log().sum(1) - 0.5 * d * math.log(2.0 * math.pi)
    Y = X @ U.permute(1, 0, 2).reshape(d, K * d)  # N x K*d, written to memory
    Y = Y.view(N, K, d).sub_(torch.einsum("kd,kde->ke", means, U)).square_()
    S = offset - 0.5 * Y.sum(-1)  # N x K score
    del Y
    L = torch.logsumexp(S, dim=1, keepdim=True)
    G = (S - L).exp_()  # Gamma: N x K
    del S
    n = G.sum(0)
    nk = n + 10.0 * EPS64
    mu = (G.T @ X) / nk[:, None]
    M2 = (G[:, :, None] * X[:, None, :]).view(N, K * d).T @ X  # K*d x d: sum_i Gamma_ik x_i x_i^T
    new = M2.view(K, d, d) / nk[:, None, None] - mu[:, :, None] * mu[:, None, :]
    new = 0.5 * (new + new.transpose(1, 2)) + reg_covar * torch.eye(d, dtype=X.dtype, device=X.device)
    return n / N, mu, new


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    reg_covar = float(opts["reg_covar"])
    full = opts.get("covariance_type", "diag") == "full"
    w0, m0, v0 = (torch.as_tensor(a, device=X.device)
                  for a in (init.weights, init.means, init.covariances if full else init.variances))
    step = em_iteration_full if full else em_iteration
    info = {
        "algorithm": "materializing",
        "precision": "fp32",
        "device": str(X.device),
        "matmul_precision": torch.get_float32_matmul_precision(),  # "highest" = TF32 off
    }

    def run() -> Fit:
        w, m, v = w0, m0, v0
        done = 0
        for _ in range(n_iter):
            w, m, v = step(X, w, m, v, reg_covar)
            done += 1
        return Fit(w, m, None, n_iter=done, info=info, covariances=v) if full else Fit(w, m, v, n_iter=done, info=info)

    return run
