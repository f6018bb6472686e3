"""The fused score kernel of ablation rung A2 (paper §5.4, Appendix D).

One Triton kernel computes the lifted score S = [x - c | (x - c)^2] W + b of a
(row tile, component tile) and writes it to memory: X is read once per component
tile and X*X is formed in registers, so the N x d squared-data temporary of
Algorithm 1 never gets an address. Everything after the score (normalization,
responsibilities, statistics) stays materialized, as in Algorithm 1: this rung
isolates what fusing the score alone is worth.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from turbo_gmm.launch import LaunchConfig
from turbo_gmm.diag.lift import lifted_rows, pow2_at_least_16


@triton.jit
def _score_kernel(
    X, center, W, b, S,  # X (N, d) f32; center (D_PAD,) f32; W (2*D_PAD, K_PAD) f32; b (K_PAD,) f32; S (N, K) f32
    N, d, K, stride_x, stride_s,
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    xt, row_ok = lifted_rows(X, center, rows, N, d, stride_x, D_PAD)
    lanes = tl.arange(0, 2 * D_PAD)
    w = tl.load(W + lanes[:, None] * K_PAD + kk[None, :])
    s = tl.dot(xt, w, input_precision=PRECISION) + tl.load(b + kk)[None, :]
    tl.store(S + rows.to(tl.int64)[:, None] * stride_s + kk[None, :], s, mask=row_ok[:, None] & (kk < K)[None, :])


def score_config(K: int, d: int) -> LaunchConfig:
    """Tiles for the score kernel: fewer rows at d_pad = 128, where the tf32x3
    operand split of a 256-lane lifted row is register bound (as in turbo_gmm.dispatch).
    Not tuned on a GPU: the rung measures the dataflow, not a tuned kernel."""
    if pow2_at_least_16(d) >= 128:
        return LaunchConfig(block_n=32, block_k=min(32, pow2_at_least_16(K)), num_warps=4, num_stages=1)
    return LaunchConfig(block_n=64, block_k=min(64, pow2_at_least_16(K)), num_warps=4, num_stages=2)


def fused_score(X: torch.Tensor, center: torch.Tensor, W: torch.Tensor, b: torch.Tensor, K: int,
                precision: str = "tf32x3", cfg: LaunchConfig | None = None, out: torch.Tensor | None = None):
    """S (N, K) float32 from X (N, d) float32 contiguous, center (d_pad,) float32 and
    the padded lift W (2*d_pad, k_pad), b (k_pad,) of :func:`turbo_gmm.diag.lift.lift`.
    ``out`` reuses an (N, K) float32 buffer."""
    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    if d > d_pad or K > k_pad or center.shape[0] != d_pad:
        raise ValueError(f"lift of shape {tuple(W.shape)} and center {tuple(center.shape)} do not fit X {tuple(X.shape)}, K={K}")
    cfg = cfg or score_config(K, d)
    block_k = min(cfg.block_k, k_pad)
    S = out if out is not None else torch.empty((N, K), dtype=torch.float32, device=X.device)
    grid = (triton.cdiv(N, cfg.block_n), triton.cdiv(K, block_k))
    _score_kernel[grid](X, center, W, b, S, N, d, K, X.stride(0), S.stride(0),
                        K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, BLOCK_K=block_k, PRECISION=precision,
                        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return S
