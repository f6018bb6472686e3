"""Seeded synthetic data and the shared initialization, identical on every device.

X is drawn from a random K-component diagonal GMM with a counter-based generator (SplitMix64 on int64,
Box-Muller in float64), so the same (shape, seed) gives the same X on a GPU and a CPU (up to libm's last
bit), in row chunks, centered. A rank of data-parallel EM generates only its shard (:func:`generate_rows`).
Imports nothing of the library but :mod:`turbo_gmm.records`, so users on every floor can import it."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .records import Init

_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)
_MIX1 = 0xBF58476D1CE4E5B9 - (1 << 64)
_MIX2 = 0x94D049BB133111EB - (1 << 64)
_CHUNK = 1 << 24  # elements per generated chunk

# Parameters of the generating mixture (documented in harness/PROTOCOL.md, "Data").
MEAN_SCALE = 3.0  # true means ~ N(0, MEAN_SCALE^2) per coordinate
VAR_RANGE = (0.25, 1.0)  # true variances ~ U(VAR_RANGE)


def _lsr(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical shift right of int64 (torch's >> is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def _splitmix64(x: torch.Tensor) -> torch.Tensor:
    x = x + _GOLDEN
    x = (x ^ _lsr(x, 30)) * _MIX1
    x = (x ^ _lsr(x, 27)) * _MIX2
    return x ^ _lsr(x, 31)


def _bits(seed: int, stream: int, start: int, count: int, device) -> torch.Tensor:
    """64 random bits for counters start..start+count of (seed, stream)."""
    key = _splitmix64(torch.tensor([seed * 1_000_003 + stream], dtype=torch.int64, device=device))
    ctr = torch.arange(start, start + count, dtype=torch.int64, device=device)
    return _splitmix64(ctr ^ key)


def uniform(seed: int, stream: int, start: int, count: int, device) -> torch.Tensor:
    """float64 uniforms in (0, 1): the top 53 bits of each hash."""
    b = _lsr(_bits(seed, stream, start, count, device), 11)
    return (b.double() + 0.5) * 2.0**-53


def normal(seed: int, stream: int, start: int, count: int, device) -> torch.Tensor:
    """float64 standard normals by Box-Muller over two uniform streams."""
    u1 = uniform(seed, 2 * stream, start, count, device)
    u2 = uniform(seed, 2 * stream + 1, start, count, device)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)


@dataclass(frozen=True)
class Dataset:
    X: torch.Tensor  # (N, d) float32, centered, contiguous
    checksum: str  # float64 sum and sum of squares of X, for the row


def generating_mixture(K: int, d: int, seed: int, device="cpu"):
    """(weights, means, variances) of the mixture X is drawn from (float64)."""
    w = 0.5 + uniform(seed, 1, 0, K, device)
    w = w / w.sum()
    mu = MEAN_SCALE * normal(seed, 2, 0, K * d, device).reshape(K, d)
    lo, hi = VAR_RANGE
    var = lo + (hi - lo) * uniform(seed, 3, 0, K * d, device).reshape(K, d)
    return w, mu, var


def make_dataset(N: int, K: int, d: int, seed: int, device="cpu") -> Dataset:
    """Draw N points of a seeded K-component diagonal GMM in R^d, centered."""
    validate_shape(N, K, d)
    X = torch.empty((N, d), dtype=torch.float32, device=device)
    rows = max(1, _CHUNK // d)
    for r0 in range(0, N, rows):
        r1 = min(N, r0 + rows)
        X[r0:r1] = generate_rows(K, d, seed, r0, r1, device)
    X -= X.double().mean(0).float()
    s1 = float(X.double().sum())
    s2 = float(X.double().square().sum())
    return Dataset(X, f"{s1:.9e}/{s2:.9e}")


def generate_rows(K: int, d: int, seed: int, r0: int, r1: int, device="cpu") -> torch.Tensor:
    """Rows [r0, r1) of make_dataset(N, K, d, seed)'s X before centering (float32): the generator is
    counter-based, so a rank draws only its shard and subtracting the global mean gives make_dataset's rows."""
    validate_shape(K, K, d)  # K and d are integers >= 1
    if not 0 <= r0 <= r1:
        raise ValueError(f"row range [{r0}, {r1}) is not a range")
    w, mu, var = generating_mixture(K, d, seed, device)
    cdf = torch.cumsum(w, 0)
    cdf[-1] = 1.0
    lab = torch.searchsorted(cdf, uniform(seed, 4, r0, r1 - r0, device)).clamp_(max=K - 1)
    z = normal(seed, 5, r0 * d, (r1 - r0) * d, device).reshape(r1 - r0, d)
    return (mu[lab] + var[lab].sqrt() * z).float()


def shared_init(X: torch.Tensor, K: int, seed: int, covariance_type: str = "diag") -> Init:
    """The one initialization every arm starts from: weights 1/K, means K distinct rows of X (seeded), every
    variance X's per-dimension variance; for "full" also X's covariance (population form)."""
    if covariance_type not in ("diag", "full"):
        raise ValueError(f"covariance_type must be 'diag' or 'full', got {covariance_type!r}")
    N, d = X.shape
    if K > N:
        raise ValueError(f"K={K} components need at least K rows, got N={N}")
    idx = np.sort(np.random.default_rng(seed).choice(N, size=K, replace=False))
    means = X[torch.as_tensor(idx, device=X.device)].double().cpu().numpy()
    var = X.double().var(0, unbiased=False).cpu().numpy()
    cov = None
    if covariance_type == "full":
        Xc = X.double() - X.double().mean(0)
        cov = np.broadcast_to((Xc.T @ Xc / N).cpu().numpy(), (K, d, d)).astype(np.float32).copy()
    return Init(
        weights=np.full(K, 1.0 / K, dtype=np.float32),
        means=means.astype(np.float32),
        variances=np.broadcast_to(var, (K, d)).astype(np.float32).copy(),
        covariances=cov,
    )


def validate_shape(N, K, d) -> None:
    """Reject sizes no cell can run, before any work, with the reason."""
    for name, v in (("N", N), ("K", K), ("d", d)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {v!r}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if K > N:
        raise ValueError(f"K={K} > N={N}: a mixture needs at least one point per component")
