"""k-means where X lives (GPU or CPU torch tensors): scikit-learn's k-means++ seeding and Lloyd's algorithm.

The estimator's ``init_params="kmeans"`` and ``"k-means++"`` without sending X to the host (scikit-learn's
host k-means was most of a large fit's time). The random draws are scikit-learn's, from the caller's
``RandomState`` in its order, so on the same points the seeds are scikit-learn's (up to float64 near-ties):

* :func:`kmeans_plusplus`: greedy D^2 seeding, ``2 + int(log K)`` candidates a step;
* :func:`lloyd`: Lloyd iterations, empty clusters relocated to the farthest points, one host read an
  iteration for the convergence test;
* :func:`kmeans`: ``KMeans(n_clusters=K, n_init=1)``'s defaults.

The passes over X are the fused kernels of :mod:`turbo_gmm.init.kmeans_assign` where they apply (float32 X
on CUDA), else torch ops in row blocks with distances about the data's mean c,
||x - y||^2 = ||x - c||^2 + ||y'||^2 - 2 (x.y' - c.y'), so offset data keeps its digits without a copy."""
from __future__ import annotations

import math

import numpy as np
import torch

from . import kmeans_assign
from ..diag.em import Float32RangeError

SCORE_BLOCK_BYTES = 1 << 29  # the (rows, K) float32 score block of one assignment (torch ops)
NORM_BLOCK_ROWS = 1 << 20  # rows per block of ||x - c||^2 (a (rows, d) temporary)
KMEANS_TOL = 1e-4  # scikit-learn KMeans's default tol, relative to the mean column variance
KMEANS_MAX_ITER = 300  # scikit-learn KMeans's default max_iter
FLOAT64_EPS = 2.0**-53
RANGE_MARGIN = 2.0  # the score bound must fit finfo.max / RANGE_MARGIN: room for its accumulation's rounding


def n_local_trials(n_clusters: int) -> int:
    """scikit-learn's number of candidates per k-means++ step."""
    return 2 + int(math.log(n_clusters))


def _fused(X: torch.Tensor, fused) -> bool:
    if fused is None:
        return kmeans_assign.supported(X)
    if fused and not kmeans_assign.supported(X):
        raise ValueError("the fused k-means kernels take float32 contiguous X with d <= "
                         f"{kmeans_assign.MAX_FEATURES} on CUDA (or TRITON_INTERPRET=1 on the CPU)")
    return bool(fused)


def centered_sq_norms(X: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
    """||x_i - c||^2 (N,) in X's dtype, in row blocks."""
    out = torch.empty(X.shape[0], dtype=X.dtype, device=X.device)
    c = center.to(X.dtype)
    for r0 in range(0, X.shape[0], NORM_BLOCK_ROWS):
        out[r0 : r0 + NORM_BLOCK_ROWS] = (X[r0 : r0 + NORM_BLOCK_ROWS] - c).square_().sum(1)
    return out


def check_score_range(X: torch.Tensor, center: torch.Tensor) -> None:
    """Raise :class:`Float32RangeError` where the distance scores in X's dtype could overflow, before a label
    indexes anything (an argmin over inf/NaN is no nearest center). Every center lies in X's bounding box, so
    each partial sum of the score is within 2 sum M_j R_j + 3 sum R_j^2 + 2 sum R_j |c_j| (R_j, M_j from the
    column min and max)."""
    lo, hi = torch.aminmax(X, dim=0)
    lo, hi, c = lo.double(), hi.double(), center.double()
    R = torch.maximum(hi - c, c - lo)
    M = torch.maximum(lo.abs(), hi.abs())
    bound = float(2.0 * (M * R).sum() + 3.0 * (R * R).sum() + 2.0 * (R * c.abs()).sum())
    if not bound <= torch.finfo(X.dtype).max / RANGE_MARGIN:
        raise Float32RangeError(
            f"The {X.dtype} k-means of the initialization would overflow: its distances reach {bound:.3g} (X's "
            f"spread times its magnitude), beyond {X.dtype}'s exponent range. Scale the input data, or fit in "
            "float64 (GaussianMixture(device='cpu')).")


def sq_distances(X: torch.Tensor, x_sq: torch.Tensor, Y: torch.Tensor, center: torch.Tensor) -> torch.Tensor:
    """Squared distances (N, T) in X's dtype from X's rows to Y's, clipped at 0 as scikit-learn's."""
    y = Y.double() - center
    bias = ((y * y).sum(1) + 2.0 * (y @ center)).to(X.dtype)
    out = torch.addmm(bias, X, y.to(X.dtype).T, alpha=-2.0)
    return out.add_(x_sq[:, None]).clamp_min_(0.0)


def first_seed(n_samples: int, draw: float, dtype) -> int:
    """scikit-learn's first k-means++ seed from its one uniform ``draw``: floor(draw * N), unless draw * N is
    within the cumulative sum's rounding of an integer, where NumPy's sum decides on the host."""
    t = draw * n_samples
    j = int(t)
    margin = 4.0 * n_samples * n_samples * FLOAT64_EPS + 1e-12
    if t - j > margin and j + 1 - t > margin:
        return j
    w = np.ones(n_samples, dtype)
    cdf = np.cumsum((w / w.sum()).astype(np.float64))
    cdf /= cdf[-1]
    return int(cdf.searchsorted(draw, side="right"))


def kmeans_plusplus(X: torch.Tensor, n_clusters: int, random_state: np.random.RandomState, center: torch.Tensor,
                    x_sq: torch.Tensor | None = None, fused: bool | None = None) -> torch.Tensor:
    """Row indices (n_clusters,) of the k-means++ seeds, drawn from ``random_state`` as scikit-learn draws them.

    ``center``: the torch ops' expansion point; ``x_sq``: :func:`centered_sq_norms` if known; ``fused``: the
    kernels of :mod:`turbo_gmm.init.kmeans_assign` (None: where they run)."""
    N, dev = X.shape[0], X.device
    fused = _fused(X, fused)
    if not fused:  # the fused kernels' distances are float64 (see turbo_gmm.init.kmeans_assign)
        check_score_range(X, center)
    trials = n_local_trials(n_clusters)
    first = first_seed(N, random_state.random_sample(), np.float32 if X.dtype == torch.float32 else np.float64)
    draws = torch.as_tensor(random_state.uniform(size=(n_clusters - 1, trials)), device=dev)  # K - 1 steps' draws
    indices = torch.empty(n_clusters, dtype=torch.int64, device=dev)
    indices[0] = first
    if fused:
        closest = torch.full((N,), math.inf, dtype=torch.float64, device=dev)
        kmeans_assign.fold_nearest(X, indices[:1], closest)
    else:
        if x_sq is None:
            x_sq = centered_sq_norms(X, center)
        closest = sq_distances(X, x_sq, X[indices[:1]], center)[:, 0].contiguous()
    potential = closest.sum(dtype=torch.float64)
    for c in range(1, n_clusters):
        candidates = torch.searchsorted(torch.cumsum(closest, 0, dtype=torch.float64), draws[c - 1] * potential)
        candidates.clamp_(max=N - 1)
        if fused:
            potentials = kmeans_assign.candidate_potentials(X, candidates, closest)
        else:
            dist = sq_distances(X, x_sq, X[candidates], center)
            torch.minimum(dist, closest[:, None], out=dist)
            potentials = dist.sum(0, dtype=torch.float64)
        best = potentials.argmin().view(1)
        potential = potentials[best[0]]
        indices[c : c + 1] = candidates[best]
        if fused:
            kmeans_assign.fold_nearest(X, indices[c : c + 1], closest)
        else:
            closest = dist.index_select(1, best)[:, 0].contiguous()
    return indices


class _Assignment:
    """Nearest-center labels of X in row blocks, with the per-cluster counts and sums they imply (torch ops)."""

    def __init__(self, X: torch.Tensor, center: torch.Tensor, n_clusters: int):
        self.X, self.center = X, center
        self.rows = max(1, SCORE_BLOCK_BYTES // (X.element_size() * n_clusters))

    def __call__(self, centers: torch.Tensor, labels: torch.Tensor, update: bool = True):
        """Labels in place for ``centers``; (sums (K, d), counts (K,), labels changed), sums None without update."""
        X, K = self.X, centers.shape[0]
        y = centers - self.center
        W = (-2.0 * y).to(X.dtype).T.contiguous()
        bias = ((y * y).sum(1) + 2.0 * (y @ self.center)).to(X.dtype)  # score = ||x - y||^2 - ||x - c||^2
        sums = torch.zeros(centers.shape, dtype=torch.float64, device=X.device) if update else None
        counts = torch.zeros(K, dtype=torch.float64, device=X.device) if update else None
        changed = torch.zeros((), dtype=torch.int64, device=X.device)
        for r0 in range(0, X.shape[0], self.rows):
            xb = X[r0 : r0 + self.rows]
            score = torch.addmm(bias, xb, W)
            lab = score.argmin(1)
            changed += (lab != labels[r0 : r0 + self.rows]).sum()
            labels[r0 : r0 + self.rows] = lab
            if update:
                onehot = score.zero_().scatter_(1, lab[:, None], 1.0)
                counts += onehot.sum(0, dtype=torch.float64)
                sums += (onehot.T @ xb).double()
        return sums, counts, changed


def relocate_empty_clusters(X, centers_old, labels, sums, counts) -> None:
    """scikit-learn's rule, in place: each empty cluster takes the farthest point (rare: a host loop)."""
    empty = torch.nonzero(counts == 0)[:, 0].tolist()
    far_dist = torch.empty(X.shape[0], dtype=torch.float64, device=X.device)
    for r0 in range(0, X.shape[0], NORM_BLOCK_ROWS):
        xb = X[r0 : r0 + NORM_BLOCK_ROWS].double()
        far_dist[r0 : r0 + NORM_BLOCK_ROWS] = (xb - centers_old[labels[r0 : r0 + NORM_BLOCK_ROWS]]).square_().sum(1)
    far = far_dist.topk(len(empty)).indices
    for new, idx in zip(empty, far.tolist()):
        old, x = int(labels[idx]), X[idx].double()
        sums[old] -= x
        counts[old] -= 1.0
        sums[new] = x
        counts[new] = 1.0


def lloyd(X: torch.Tensor, centers: torch.Tensor, center: torch.Tensor, tol: float,
          max_iter: int = KMEANS_MAX_ITER, fused: bool | None = None, precision: str = "tf32x3"):
    """Lloyd's k-means from ``centers``: (labels (N,), centers (K, d) float64, iterations).

    ``tol`` is absolute; stops when no label changes or the squared center shift is <= tol. ``fused``: the
    kernels (None: where they run), else torch ops."""
    K = centers.shape[0]
    check_score_range(X, center)
    assign = kmeans_assign.Assigner(X, center, K, precision) if _fused(X, fused) else _Assignment(X, center, K)
    centers = centers.double()
    labels = torch.full((X.shape[0],), -1, dtype=torch.int64, device=X.device)
    strict = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        sums, counts, changed = assign(centers, labels)
        new = sums / counts.clamp_min(1.0)[:, None]
        shift = (new - centers).square().sum()
        n_changed, n_empty, shift = torch.stack([changed.double(), (counts == 0).sum().double(), shift]).tolist()
        if n_empty:
            relocate_empty_clusters(X, centers, labels, sums, counts)
            new = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1.0)[:, None], sums)
            shift = float((new - centers).square().sum())
        centers = new
        if n_changed == 0:
            strict = True
            break
        if shift <= tol:
            break
    if not strict:
        assign(centers, labels, update=False)  # labels of the returned centers
    return labels, centers, n_iter


def kmeans(X: torch.Tensor, n_clusters: int, random_state: np.random.RandomState, center: torch.Tensor,
           column_variance_mean: float, tol: float = KMEANS_TOL, max_iter: int = KMEANS_MAX_ITER,
           fused: bool | None = None):
    """``KMeans(n_clusters, n_init=1)`` with scikit-learn's defaults: (labels, centers, iterations);
    ``column_variance_mean`` scales tol."""
    seeds = kmeans_plusplus(X, n_clusters, random_state, center, fused=fused)
    return lloyd(X, X[seeds], center, tol * column_variance_mean, max_iter, fused=fused)
