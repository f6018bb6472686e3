"""Ablation rung A1: the materializing dataflow of Algorithm 1 with the lift (paper §5.4, Appendix D).

Library calls only (torch, fp32 matmuls with TF32 off, set by the worker: as
accurate as the kernels' tf32x3). Per iteration: the N x d temporary X*X is
written; the lifted score S = [X | X*X] W + b is written to memory as two
products into one N x K array (the lift of turbo_gmm.diag.lift, split at the bar);
S is normalized in memory by a row log-sum-exp into a second N x K array Gamma;
Gamma is read back once per statistic: n = Gamma.sum(0), s = Gamma^T X,
u = Gamma^T (X*X). Every rung shares the lift and the float64 M-step of
turbo_gmm.diag.mstep, so the ladder varies dataflow, not arithmetic. X is used as the
harness gives it (already centered), as Algorithm 1 does; no in-kernel shift.
"""
from __future__ import annotations

import torch

from turbo_gmm.records import Fit, Init

MEMORY = "torch"
RUNG = "A1"
U_ROWS_PER_CHUNK = 1 << 16  # rung A2's row chunk for u: a bounded (chunk x d) square, 32 MB at d = 128


def available() -> str | None:
    return None  # torch is the harness's own dependency


def lifted(weights, means, variances):
    """(W (2d, K), b (K,)) float32: the unpadded lift, shared with the kernels."""
    from turbo_gmm.diag.lift import lift

    K, d = means.shape
    return lift(weights, means, variances, K, d)


def normalized_statistics(S: torch.Tensor, X: torch.Tensor, XX: torch.Tensor | None):
    """(n, s, u, ll) from a materialized score S (N, K): L and Gamma in memory,
    Gamma read once per statistic. XX=None (rung A2): u is reduced over row chunks
    whose squares are bounded temporaries, so no N x d array of X*X exists."""
    L = torch.logsumexp(S, dim=1, keepdim=True)  # row normalizers
    G = (S - L).exp_()  # Gamma: a second N x K array in memory
    n = G.sum(0)
    s = G.T @ X
    if XX is not None:
        u = G.T @ XX
    else:
        u = torch.zeros_like(s)
        step = U_ROWS_PER_CHUNK
        for r0 in range(0, X.shape[0], step):
            x = X[r0 : r0 + step]
            u.addmm_(G[r0 : r0 + step].T, x * x)
    return n, s, u, L.double().sum()


def statistics(X: torch.Tensor, weights, means, variances):
    """One E-step of rung A1 at the given parameters: (n, s, u, ll)."""
    d = X.shape[1]
    W, b = lifted(weights, means, variances)
    XX = X * X  # N x d temporary, as Algorithm 1's Kernel 3 writes it
    S = torch.addmm(b, X, W[:d])  # N x K score, written to memory
    S.addmm_(XX, W[d:])
    return normalized_statistics(S, X, XX)


def materializing_prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict, estep, info: dict):
    """The fit loop shared by rungs A1 and A2: estep -> float64 M-step of turbo_gmm.diag.mstep."""
    from turbo_gmm.diag.mstep import mstep

    N, d = X.shape
    K = init.means.shape[0]
    reg_covar = float(opts["reg_covar"])
    w0, m0, v0 = (torch.as_tensor(a, device=X.device).double() for a in (init.weights, init.means, init.variances))
    origin = torch.zeros(d, dtype=torch.float64, device=X.device)
    info = dict(info, device=str(X.device), matmul_precision=torch.get_float32_matmul_precision())

    def run() -> Fit:
        w, m, v = w0, m0, v0
        floored = 0
        for _ in range(n_iter):
            n, s, u, _ = estep(X, w, m, v)
            w, m, v, f = mstep(n.double(), torch.cat([s, u], 1).double(), N, K, d, origin, reg_covar)
            floored += f
        return Fit(w, m, v, n_iter=n_iter, info=dict(info, n_floored=int(floored)))

    return run


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    return materializing_prepare(X, init, n_iter, opts, statistics,
                                 {"algorithm": "materializing_lifted", "precision": "fp32"})
