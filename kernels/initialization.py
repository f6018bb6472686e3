"""scikit-learn's four GaussianMixture initializations where X lives, in torch ops (GPU or CPU).

As ``sklearn.mixture.GaussianMixture._initialize_parameters``: ``init_params`` gives
responsibilities, and one M-step on them the initial parameters. Here that M-step's
float64 moments (n_k, s_k, u_k) about a center c are computed on X's device in row
blocks, so neither X nor an (N, K) responsibility matrix goes to the host:

* "kmeans": one-hot labels of :func:`turbo_gmm.kmeans.kmeans` (KMeans(n_init=1)'s defaults);
* "k-means++": the k-means++ seeds, one row per component;
* "random": uniform draws, normalized per row;
* "random_from_data": K distinct rows drawn uniformly.

The random numbers of "kmeans", "k-means++" and "random_from_data" are scikit-learn's: drawn
from the estimator's NumPy ``RandomState`` in ``_initialize_parameters``' order (the k-means++
first-seed and candidate uniforms, ``choice(N, K, replace=False)``), so on the same points these
pick scikit-learn's seeds and rows (k-means++ up to float64 near-ties of its cumulative sums;
``choice`` without replacement is NumPy's full permutation of N on the host, ~0.3 s at 20M).
"random" needs N x K uniforms, too many to draw on the host at 20M rows: it draws them from a
``torch.Generator`` on X's device seeded from ``random_state``, so its responsibilities are not
scikit-learn's.
"""
from __future__ import annotations

import numpy as np
import torch

from .kmeans import kmeans, kmeans_plusplus

MOMENT_BLOCK_BYTES = 1 << 28  # float64 temporaries of one block: responsibilities and the centered rows


def initial_moments(X: torch.Tensor, n_components: int, init_params: str, random_state: np.random.RandomState,
                    center: torch.Tensor, column_variance_mean: float, second: str = "diag"):
    """(n (K,), s (K, d), u) float64 on X's device: the responsibilities' counts and their sums of (x - c) and
    of (x - c)^2 (u (K, d), ``second`` "diag") or (x - c)(x - c)^T (u (K, d, d), "full": full and tied
    covariances), c = ``center`` (d,) float64. X (N, d) float32/float64."""
    K, dev = n_components, X.device
    if init_params in ("k-means++", "random_from_data"):
        if init_params == "k-means++":
            rows = kmeans_plusplus(X, K, random_state, center)
        else:
            rows = torch.as_tensor(random_state.choice(X.shape[0], size=K, replace=False), device=dev)
        s = X[rows].double() - center
        return torch.ones(K, dtype=torch.float64, device=dev), s, s * s if second == "diag" else s[:, :, None] * s[:, None]
    if init_params == "kmeans":
        labels, _, _ = kmeans(X, K, random_state, center, column_variance_mean)
        return _moments(X, center, K, lambda r0, r1: _one_hot(labels[r0:r1], K), second)
    if init_params == "random":
        generator = torch.Generator(device=dev).manual_seed(int(random_state.randint(np.iinfo(np.int32).max)))

        def uniform(r0, r1):
            r = torch.rand((r1 - r0, K), generator=generator, dtype=torch.float64, device=dev)
            return r.div_(r.sum(1, keepdim=True))
        return _moments(X, center, K, uniform, second)
    raise ValueError(f"init_params must be one of 'kmeans', 'k-means++', 'random', 'random_from_data', "
                     f"got {init_params!r}")


def _one_hot(labels: torch.Tensor, K: int) -> torch.Tensor:
    out = torch.zeros((labels.shape[0], K), dtype=torch.float64, device=labels.device)
    return out.scatter_(1, labels[:, None], 1.0)


def _moments(X, center, K, responsibilities, second="diag"):
    """Float64 (n, s, u) of the responsibilities(r0, r1) -> (rows, K) of each row block."""
    N, d = X.shape
    rows = max(1, MOMENT_BLOCK_BYTES // (8 * (K + 2 * d + (K * d if second == "full" else 0))))
    n = torch.zeros(K, dtype=torch.float64, device=X.device)
    s = torch.zeros((K, d), dtype=torch.float64, device=X.device)
    u = torch.zeros_like(s) if second == "diag" else torch.zeros((K, d, d), dtype=torch.float64, device=X.device)
    for r0 in range(0, N, rows):
        r1 = min(N, r0 + rows)
        resp = responsibilities(r0, r1)
        x = X[r0:r1].double() - center
        n += resp.sum(0)
        s += resp.T @ x
        u += resp.T @ x.square_() if second == "diag" else torch.einsum("nk,nd,ne->kde", resp, x, x)
    return n, s, u
