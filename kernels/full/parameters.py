"""Full-covariance parameters in float64: the kernels' score operands and the M-step.

Per component the kernels take U_k (U U^T = Sigma^-1) about the center: ``products`` scores
y = (x - c) [U_1 | U_2 | ...] - [mu'_1 U_1 | ...] (N K d^2 work); ``lift`` scores quadratic features of
PAIR_BLOCK-feature block pairs (half the work, but it cancels |x|^2-sized terms). Matrices are stored as TF32
halves (split once here) zero-padded to powers of two; statistics come back as one float64 table."""
from __future__ import annotations

import math

import torch

from .. import tf32x3
from ..diag.lift import SENTINEL, pow2_at_least_16
from ..diag.mstep import EPS64
from .reference import ILL_DEFINED_COVARIANCE

PAIR_BLOCK = 8  # features per block of the pair features: blocks pairs of 8 x 8 = 64 lanes, tl.dot's K >= 16
DATAFLOWS = ("products", "lift")


def padded_sizes(K: int, d: int) -> tuple[int, int]:
    return pow2_at_least_16(K), pow2_at_least_16(d)


def feature_pairs(d: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Block indices (I, J), I <= J, of the ceil(d / PAIR_BLOCK) feature blocks, as two int32 tensors."""
    blocks = -(-d // PAIR_BLOCK)
    pairs = [(i, j) for i in range(blocks) for j in range(i, blocks)]
    return (torch.tensor([p[0] for p in pairs], dtype=torch.int32, device=device),
            torch.tensor([p[1] for p in pairs], dtype=torch.int32, device=device))


def statistics_rows(d_pad: int, n_pairs: int) -> int:
    """Rows of the statistics table (rows x k_pad): n | s (d_pad rows) | M2 blocks (n_pairs * 64 rows)."""
    return 1 + d_pad + n_pairs * PAIR_BLOCK * PAIR_BLOCK


def zero_slab(lead: tuple, rows: int, width: int, shifted: bool, dtype, device) -> torch.Tensor:
    """Zeroed statistics slabs (*lead, rows, width), one a program; component-major (*lead, width, rows) for the
    component moments, whose sums the kernels add a component at a time (kernels/full/tiles.py)."""
    return torch.zeros(*lead, *((width, rows) if shifted else (rows, width)), dtype=dtype, device=device)


def slab_table(summed: torch.Tensor, shifted: bool) -> torch.Tensor:
    """The statistics table (rows x k_pad) from slabs summed over programs, (k_tiles, rows, width) or, shifted,
    (k_tiles, width, rows): component tile t holds components t * width ... (t + 1) * width - 1."""
    if shifted:
        return summed.reshape(-1, summed.shape[-1]).T
    return summed.permute(1, 0, 2).reshape(summed.shape[1], -1)


def split_tf32(W: torch.Tensor, precision: str) -> torch.Tensor:
    """(2, *W.shape) float32 under tf32x3: W's TF32 high half and the exact remainder (turbo_gmm.tf32x3.split
    on the host); (1, *W.shape), W itself, under any other precision."""
    W = W.float().contiguous()
    if precision != "tf32x3":
        return W[None]
    high = ((W.view(torch.int32) + tf32x3.TF32_HALF_UNIT.value) & tf32x3.TF32_MASK.value).view(torch.float32)
    return torch.stack((high, W - high))


def log_det_cholesky(U: torch.Tensor) -> torch.Tensor:
    """log|U| = sum log diag U, per matrix of (..., d, d)."""
    return torch.log(torch.diagonal(U, dim1=-2, dim2=-1)).sum(-1)


def _bias(weights, U, d, k_pad):
    b = torch.full((k_pad,), SENTINEL, dtype=torch.float64, device=U.device)
    b[: weights.shape[0]] = torch.where(  # weight 0 scores as a padded component (log 0 = -inf: NaN downstream)
        weights > 0, torch.log(weights) + log_det_cholesky(U) - 0.5 * d * math.log(2.0 * math.pi), SENTINEL)
    return b


def product_parameters(weights, means, U, center, k_pad: int, d_pad: int, precision: str):
    """(Lcat (2, k_pad d_pad, d_pad), off (k_pad d_pad,), b (k_pad,)) float32 for the ``products`` score; Lcat =
    [U_1 | U_2 | ...] stored K-major, the order a TF32 wgmma reads its B operand (no transposing stores a tile)."""
    K, d = means.shape
    mu = means - center
    Lcat = torch.zeros(d_pad, k_pad, d_pad, dtype=torch.float64, device=U.device)
    Lcat[:d, :K, :d] = U.permute(1, 0, 2)
    off = torch.zeros(k_pad, d_pad, dtype=torch.float64, device=U.device)
    off[:K, :d] = torch.einsum("ki,kij->kj", mu, U)
    Lcat = Lcat.reshape(d_pad, k_pad * d_pad)
    return (split_tf32(Lcat.T, precision), off.reshape(-1).float(),
            _bias(weights, U, d, k_pad).float())


def lift_parameters(weights, means, U, center, k_pad: int, d_pad: int, pairs, precision: str):
    """(Wq (2, n_pairs * 64, k_pad), Wl (2, d_pad, k_pad), bl (k_pad,)) float32 for the ``lift`` score."""
    K, d = means.shape
    F = PAIR_BLOCK
    mu = means - center
    lam = torch.zeros(k_pad, d_pad, d_pad, dtype=torch.float64, device=U.device)
    lam[:K, :d, :d] = U @ U.transpose(1, 2)
    pi, pj = (p.long() for p in pairs)
    a = torch.arange(F, device=U.device)
    rows = (pi[:, None, None] * F + a[None, :, None]).expand(-1, F, F)  # (pairs, F, F): feature row of block I
    cols = (pj[:, None, None] * F + a[None, None, :]).expand(-1, F, F)
    scale = torch.where(pi < pj, -1.0, -0.5).to(torch.float64)[:, None, None, None]
    Wq = (lam[:, rows, cols].permute(1, 2, 3, 0) * scale).reshape(-1, k_pad)  # (pairs * F * F, k_pad)
    Wl = torch.zeros(d_pad, k_pad, dtype=torch.float64, device=U.device)
    lam_mu = torch.einsum("kij,kj->ki", lam[:K, :d, :d], mu)
    Wl[:d, :K] = lam_mu.T
    bl = _bias(weights, U, d, k_pad)
    bl[:K] -= 0.5 * (lam_mu * mu).sum(1)
    return split_tf32(Wq, precision), split_tf32(Wl, precision), bl.float()


def score_parameters(dataflow: str, weights, means, U, center, k_pad: int, d_pad: int, pairs, precision: str):
    """(Wa, wa_lo, Wb, wb_lo, bias): the kernels' score operands for ``dataflow`` with the element offsets of
    the low TF32 halves (products: Wa = Lcat, Wb = off, unsplit; lift: Wa = Wq, Wb = Wl)."""
    if dataflow == "products":
        Lcat, off, b = product_parameters(weights, means, U, center, k_pad, d_pad, precision)
        return Lcat, Lcat[-1].numel(), off, 0, b
    if dataflow == "lift":
        Wq, Wl, bl = lift_parameters(weights, means, U, center, k_pad, d_pad, pairs, precision)
        return Wq, Wq[-1].numel(), Wl, Wl[-1].numel(), bl
    raise ValueError(f"dataflow must be one of {DATAFLOWS}, got {dataflow!r}")


def moment_shifts(means, center, k_pad: int, d_pad: int) -> torch.Tensor:
    """(k_pad, d_pad) float32, zero-padded: each component's incoming mean about the center, mu_k - c, the shift
    its second moments are summed about in the kernels (kernels/full/tiles.py accumulate_statistics)."""
    K, d = means.shape
    shift = torch.zeros(k_pad, d_pad, dtype=torch.float32, device=means.device)
    shift[:K, :d] = means - center
    return shift


def unpack_statistics(stats: torch.Tensor, K: int, d: int, pairs, shift: torch.Tensor | None = None):
    """(n (K,), s (K, d), M2 (K, d, d)) float64 about the center from the statistics table.

    With ``shift`` (moments "component") the table's moments are about the shifts m_k and are moved to the
    center here in float64 (s = t + n m, M2 = M2_m + m t^T + t m^T + n m m^T): the move costs u64 |m|^2, where
    float32 sums about the center would have cost u32 |x - c|^2."""
    F = PAIR_BLOCK
    k_pad = stats.shape[1]
    d_pad = stats.shape[0] - 1 - pairs[0].shape[0] * F * F
    n = stats[0, :K]
    s = stats[1 : 1 + d, :K].T
    blocks = stats[1 + d_pad :].view(-1, F, F, k_pad)[..., :K]  # (pairs, F, F, K): rows of block I, cols of block J
    width = F * (-(-d // F))
    pi, pj = (p.long() for p in pairs)
    a = torch.arange(F, device=stats.device)
    r = (pi[:, None, None] * F + a[None, :, None]).expand(-1, F, F).reshape(-1)
    c = (pj[:, None, None] * F + a[None, None, :]).expand(-1, F, F).reshape(-1)
    src = blocks.reshape(-1, K).T  # (K, pairs * F * F)
    M2 = torch.zeros(K, width * width, dtype=stats.dtype, device=stats.device)
    M2[:, r * width + c] = src
    M2[:, c * width + r] = src  # the lower block triangle by symmetry (diagonal blocks hold both orders)
    M2 = M2.view(K, width, width)[:, :d, :d]
    if shift is None:
        return n, s, M2
    m = shift[:K, :d].to(stats.dtype)
    t = s  # about the shifts
    mt = m[:, :, None] * t[:, None, :]
    M2 = M2 + mt + mt.transpose(1, 2) + n[:, None, None] * m[:, :, None] * m[:, None, :]
    return n, t + n[:, None] * m, M2


def cholesky_precisions(covariances: torch.Tensor):
    """(U, ok): U upper triangular with U U^T = covariances^-1 per matrix of (..., d, d), and a device bool
    that is False when some matrix is not positive definite (then U is not to be used). No host sync."""
    C, info = torch.linalg.cholesky_ex(covariances)
    eye = torch.eye(covariances.shape[-1], dtype=covariances.dtype, device=covariances.device)
    U = torch.linalg.solve_triangular(C, eye.expand_as(C), upper=False).transpose(-1, -2)
    return U, (info == 0).all()


def precisions_cholesky(covariances) -> torch.Tensor:
    """scikit-learn's precisions_cholesky_ from covariances ((K, d, d) or (d, d)) in float64, raising its
    ValueError when a covariance is not positive definite."""
    U, ok = cholesky_precisions(torch.as_tensor(covariances).double())
    if not bool(ok):
        raise ValueError(ILL_DEFINED_COVARIANCE)
    return U


def covariances_from_precisions_cholesky(U: torch.Tensor) -> torch.Tensor:
    """Sigma = (U U^T)^-1 = C C^T with C = U^-T."""
    eye = torch.eye(U.shape[-1], dtype=U.dtype, device=U.device)
    C = torch.linalg.solve_triangular(U, eye.expand_as(U), upper=True).transpose(-1, -2)
    return C @ C.transpose(-1, -2)


def mstep_full(n, s, M2, center, reg_covar: float, guard: float | None = None):
    """(weights, means, covariances, precisions_cholesky, ok) from statistics about ``center``, in float64, as
    scikit-learn's _m_step: n_k + 10 eps64 in every division, weights normalized to sum to one,
    Sigma_k = M2_k / n_k - mu'_k mu'_k^T + reg_covar I. ``ok`` (device bool) is False where a Cholesky failed."""
    nk = n + (10.0 * EPS64 if guard is None else guard)  # guard: turbo_gmm.diag.mstep.mstep_guard's
    mu = s / nk[:, None]
    cov = M2 / nk[:, None, None] - mu[:, :, None] * mu[:, None, :]
    cov = cov + reg_covar * torch.eye(mu.shape[1], dtype=cov.dtype, device=cov.device)
    U, ok = cholesky_precisions(cov)
    return nk / nk.sum(), mu + center, cov, U, ok
