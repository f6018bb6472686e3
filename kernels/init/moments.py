"""scikit-learn's four GaussianMixture initializations where X lives, in torch ops (GPU or CPU).

As ``GaussianMixture._initialize_parameters``: ``init_params`` gives responsibilities and one M-step on
them the initial parameters; that M-step's float64 moments are summed on X's device in row blocks, so
neither X nor an (N, K) responsibility matrix reaches the host. "kmeans", "k-means++" and
"random_from_data" draw scikit-learn's random numbers in its order; "random" draws its N x K uniforms from
a ``torch.Generator`` on the device seeded from ``random_state`` (not scikit-learn's)."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import KMeans, kmeans_plusplus as sklearn_kmeans_plusplus

from .kmeans import kmeans, kmeans_plusplus

HOST_BLOCK_ROWS = 1 << 14  # rows a block of the host initialization
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
        labels = kmeans(X, K, random_state, center, column_variance_mean).labels
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


def host_moments(X, n_components, init_params, random_state, center, second="diag", sample_weight=None):
    """scikit-learn's initialization on the host, drawn from ``random_state`` in the same order: the
    responsibilities' (n, s, u) about ``center`` (float64, in row blocks), u = sum r (x - c)^2 (``second``
    "diag") or sum r (x - c)(x - c)^T ("full"), r times ``sample_weight`` when given (then k-means and
    k-means++ take the weights, and "random_from_data" draws among the rows of positive weight)."""
    N, d = X.shape
    K = n_components
    sw = np.ones(N) if sample_weight is None else sample_weight
    square = (lambda r, x: r.T @ (x * x)) if second == "diag" else (  # noqa: E731
        lambda r, x: np.einsum("nk,nd,ne->kde", r, x, x))
    if init_params in ("random_from_data", "k-means++"):  # one row per component: no pass over X
        if init_params == "k-means++":
            _, indices = sklearn_kmeans_plusplus(X, K, random_state=random_state, sample_weight=sample_weight)
        elif sample_weight is None:
            indices = random_state.choice(N, size=K, replace=False)
        else:
            indices = random_state.choice(np.flatnonzero(sample_weight > 0), size=K, replace=False)
        sx = np.asarray(X[indices], np.float64) - center
        return sw[indices], sw[indices, None] * sx, square(np.diag(sw[indices]), sx)
    if init_params == "kmeans":
        labels = KMeans(n_clusters=K, n_init=1, random_state=random_state).fit(X, sample_weight=sample_weight).labels_
        resp_rows = lambda r0, r1: np.eye(K)[labels[r0:r1]]  # noqa: E731
    else:  # "random": drawn block by block, rows ascending = scikit-learn's single draw
        resp_rows = lambda r0, r1: _normalized(random_state.uniform(size=(r1 - r0, K)))  # noqa: E731
    nk, sx, sxx = np.zeros(K), np.zeros((K, d)), np.zeros((K, d) if second == "diag" else (K, d, d))
    for r0 in range(0, N, HOST_BLOCK_ROWS):
        r1 = min(N, r0 + HOST_BLOCK_ROWS)
        resp, x = resp_rows(r0, r1) * sw[r0:r1, None], np.asarray(X[r0:r1], np.float64) - center
        nk += resp.sum(0)
        sx += resp.T @ x
        sxx += square(resp, x)
    return nk, sx, sxx


def _normalized(r):
    return r / r.sum(1, keepdims=True)
