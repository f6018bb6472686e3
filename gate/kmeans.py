"""The k-means gate: float64 inertia of returned centers, and the float64 Lloyd that is its reference.

One evaluation for every arm (:func:`inertia`): each row of X goes to its nearest center in float64 (the
expanded form ||x||^2 - 2 x.c + ||c||^2 picks the center, the direct form (x - c)^2 gives its distance, so
near-ties change nothing above float64 rounding), in row blocks, where X lives. :func:`lloyd_reference` is
Lloyd's algorithm in float64 from given centers, scikit-learn's rules throughout (``KMeans(algorithm="lloyd",
tol=0)``): labels of the current centers, new centers the means of their rows, an empty cluster takes the
farthest row from its center (largest first; scikit-learn takes the n_empty farthest in argpartition's order,
which only differs when two or more clusters empty in one iteration), stop when no label changed (a fixed
point) or the center shift is exactly 0, else after ``n_iter`` iterations.

A k-means fit is valid (:func:`rescore_kmeans`) iff its centers are finite, K x d, and, where a reference
inertia is given, its inertia exceeds the reference's by at most INERTIA_TOL relative (lower is fine: another
trajectory from the same start may end lower); an arm reporting more iterations than asked is rejected too.
Like gate/rescore.py, this module judges plain arrays (NumPy, or torch on any device) and imports nothing of
the project.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

INERTIA_TOL = 1e-4  # relative: inertia above the reference's by more than this is rejected


@dataclass
class KMeansScore:
    inertia: float  # float64 sum over rows of the squared distance to the nearest center (nan: not scorable)
    reasons: list[str] = field(default_factory=list)  # empty iff valid
    labels: np.ndarray | None = None  # nearest center of the subsample rows

    @property
    def gate(self) -> str:
        return "valid" if not self.reasons else f"rejected ({'; '.join(self.reasons)})"


@dataclass
class LloydReference:
    centers: torch.Tensor  # (K, d) float64, on X's device
    inertia: float
    n_iter: int  # iterations run (fewer than asked where a fixed point came first)
    labels: torch.Tensor  # (N,) nearest center of every row, for the returned centers


def _block_rows(X: torch.Tensor, K: int, chunk_elems: int | None) -> int:
    if chunk_elems is None:
        chunk_elems = 1 << (26 if X.device.type == "cuda" else 22)
    return max(1, chunk_elems // max(K, X.shape[1]))


def nearest(X: torch.Tensor, centers: torch.Tensor, chunk_elems: int | None = None):
    """(labels (N,) int64, squared distances (N,) float64) of every row of X to its nearest center, float64."""
    C = torch.as_tensor(centers, device=X.device).to(torch.float64)
    K = C.shape[0]
    c_sq = (C * C).sum(1)
    B = _block_rows(X, K, chunk_elems)
    labels = torch.empty(X.shape[0], dtype=torch.int64, device=X.device)
    dist = torch.empty(X.shape[0], dtype=torch.float64, device=X.device)
    for r0 in range(0, X.shape[0], B):
        xb = X[r0:r0 + B].to(torch.float64)
        lab = torch.addmm(c_sq, xb, C.T, alpha=-2.0).argmin(1)  # + ||x||^2, the same for every center
        labels[r0:r0 + B] = lab
        dist[r0:r0 + B] = (xb - C[lab]).square_().sum(1)
    return labels, dist


def inertia(X: torch.Tensor, centers, chunk_elems: int | None = None) -> float:
    """Sum over the rows of X of the squared distance to the nearest of ``centers`` (K, d), in float64."""
    return float(nearest(X, centers, chunk_elems)[1].sum())


def lloyd_reference(X: torch.Tensor, seeds, n_iter: int, chunk_elems: int | None = None) -> LloydReference:
    """Lloyd's k-means in float64 from ``seeds`` (K, d), at most ``n_iter`` iterations, scikit-learn's rules
    (module docstring): the reference every arm's Lloyd from the same seeds is gated against."""
    centers = torch.as_tensor(seeds, device=X.device).to(torch.float64).clone()
    K, d = centers.shape
    B = _block_rows(X, K, chunk_elems)
    labels_old = None
    it = 0
    for it in range(1, n_iter + 1):
        labels, dist = nearest(X, centers, chunk_elems)
        counts = torch.bincount(labels, minlength=K).to(torch.float64)
        sums = torch.zeros((K, d), dtype=torch.float64, device=X.device)
        for r0 in range(0, X.shape[0], B):
            sums.index_add_(0, labels[r0:r0 + B], X[r0:r0 + B].to(torch.float64))
        empty = torch.nonzero(counts == 0)[:, 0].tolist()
        if empty:  # scikit-learn's _relocate_empty_clusters: the farthest rows from their centers
            far = dist.topk(len(empty)).indices.tolist()
            for new, idx in zip(empty, far):
                old, x = int(labels[idx]), X[idx].to(torch.float64)
                sums[old] -= x
                counts[old] -= 1.0
                sums[new] = x
                counts[new] = 1.0
        new_centers = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1.0)[:, None], sums)
        shift = float((new_centers - centers).square().sum())
        centers = new_centers
        if labels_old is not None and torch.equal(labels, labels_old):
            break  # a fixed point: scikit-learn's strict convergence
        if shift <= 0.0:
            break
        labels_old = labels
    labels, dist = nearest(X, centers, chunk_elems)
    return LloydReference(centers, float(dist.sum()), it, labels)


def rescore_kmeans(X: torch.Tensor, centers, reference_inertia: float | None = None, rows: np.ndarray | None = None,
                   n_iter: int | None = None, n_iter_reported: int | None = None,
                   chunk_elems: int | None = None) -> KMeansScore:
    """The gate's verdict on ``centers`` (K, d) returned for X, with their float64 inertia and the nearest
    center of ``rows`` (the subsample the ARI compares). ``reference_inertia``: the float64 Lloyd reference's,
    from the same seeds and iterations (None: no comparison, an arm's own fit); ``n_iter``/``n_iter_reported``:
    the iterations asked and the ones the library reports."""
    C = torch.as_tensor(np.asarray(centers) if not isinstance(centers, torch.Tensor) else centers).detach()
    C = C.to("cpu", torch.float64)
    if C.ndim != 2 or C.shape[1] != X.shape[1] or C.shape[0] == 0:
        return KMeansScore(math.nan, [f"centers of shape {tuple(C.shape)}, not (K, {X.shape[1]})"],
                           None if rows is None else np.full(len(rows), -1, np.int32))
    if not torch.isfinite(C).all():
        return KMeansScore(math.nan, ["non-finite centers"], None if rows is None else np.full(len(rows), -1, np.int32))
    reasons = []
    value = inertia(X, C, chunk_elems)
    if reference_inertia is not None and not value <= reference_inertia * (1.0 + INERTIA_TOL):
        reasons.append(f"inertia {value / reference_inertia - 1.0:+.2e} relative to the float64 Lloyd reference "
                       f"(tolerance {INERTIA_TOL:g})")
    if n_iter is not None and n_iter_reported is not None and n_iter_reported > n_iter:
        reasons.append(f"ran {n_iter_reported} of {n_iter} iterations")
    labels = None
    if rows is not None:
        idx = torch.as_tensor(rows, device=X.device)
        labels = nearest(X[idx], C, chunk_elems)[0].cpu().numpy().astype(np.int32)
    return KMeansScore(value, reasons, labels)
