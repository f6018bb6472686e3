"""k-means where X lives (GPU or CPU torch tensors): scikit-learn's k-means++ seeding and Lloyd's algorithm.

The estimator's ``init_params="kmeans"`` and ``"k-means++"`` without sending X to the host (scikit-learn's
host k-means was most of a large fit's time). The random draws are scikit-learn's, from the caller's
``RandomState`` in its order, so on the same points the seeds are scikit-learn's (up to float64 near-ties):

* :func:`kmeans_plusplus`: greedy D^2 seeding, ``2 + int(log K)`` candidates a step;
* :func:`kmeans_parallel`: k-means|| (scalable k-means++), a few sampling rounds over X then k-means++ over
  their candidates: not scikit-learn's (it has none), so its draws are this module's own;
* :func:`lloyd`: Lloyd iterations, empty clusters relocated to the farthest points, one host read an
  iteration for the convergence test;
* :func:`kmeans`: ``sklearn.cluster.KMeans``'s fit (k-means++, k-means||, random or given starts, ``n_init``
  runs, the lowest :func:`inertia` kept), the core of :class:`turbo_gmm.KMeans` and of ``init_params="kmeans"``.

Every step takes scikit-learn's ``sample_weight``: weighted seeding draws, weighted sums and counts (a
cluster's count is its weight), the weighted relocation rule.

The passes over X are the fused kernels of :mod:`turbo_gmm.init.kmeans_assign` where they apply (float32 X
on CUDA), else torch ops in row blocks with distances about the data's mean c,
||x - y||^2 = ||x - c||^2 + ||y'||^2 - 2 (x.y' - c.y'), so offset data keeps its digits without a copy."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from sklearn.cluster import kmeans_plusplus as sk_kmeans_plusplus

from . import kmeans_assign
from .._graph_loop import GraphedLoop
from ..diag.em import Float32RangeError

SCORE_BLOCK_BYTES = 1 << 29  # the (rows, K) float32 score block of one assignment (torch ops)
NORM_BLOCK_ROWS = 1 << 20  # rows per block of ||x - c||^2 (a (rows, d) temporary)
KMEANS_TOL = 1e-4  # scikit-learn KMeans's default tol, relative to the mean column variance
KMEANS_MAX_ITER = 300  # scikit-learn KMeans's default max_iter
FLOAT64_EPS = 2.0**-53
RANGE_MARGIN = 2.0  # the score bound must fit finfo.max / RANGE_MARGIN: room for its accumulation's rounding
OVERSAMPLING_FACTOR = 2.0  # k-means|| candidates expected a round per seed (l = 2 K: cuML's and cuVS's default)
# k-means|| rounds: Bahmani et al. find 5 rounds at l = 2 K seed as well as k-means++. cuVS runs min(8, ceil(ln
# phi_0)), phi_0 the first seed's potential: that depends on X's units and the weights' scale, this does not
KMEANS_PARALLEL_ROUNDS = 5
# fused unweighted k-means++: SeedingSteps (one pass over X a step) where True, else the potentials pass and a fold;
# the two pick the same seeds (tested); the one pass is not yet timed on a GPU (harness.studies.kmeans_lloyd)
ONE_PASS_SEEDING = False


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
            "float64 (device='cpu' or precision='fp64').")


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


def _first_row(X: torch.Tensor, random_state: np.random.RandomState, sample_weight: torch.Tensor | None):
    """(scikit-learn's first k-means++ row, the float64 weights on X's device or None): without weights from one
    uniform draw (:func:`first_seed`), with them NumPy's own choice with p = w / sum w, as scikit-learn calls it."""
    if sample_weight is None:
        dtype = np.float32 if X.dtype == torch.float32 else np.float64
        return first_seed(X.shape[0], random_state.random_sample(), dtype), None
    host = sample_weight.detach().cpu().numpy()
    return int(random_state.choice(X.shape[0], p=host / host.sum())), sample_weight.to(X.device, torch.float64)


def kmeans_plusplus(X: torch.Tensor, n_clusters: int, random_state: np.random.RandomState, center: torch.Tensor,
                    x_sq: torch.Tensor | None = None, fused: bool | None = None,
                    sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Row indices (n_clusters,) of the k-means++ seeds, drawn from ``random_state`` as scikit-learn draws them.

    ``center``: the torch ops' expansion point; ``x_sq``: :func:`centered_sq_norms` if known; ``fused``: the
    kernels of :mod:`turbo_gmm.init.kmeans_assign` (None: where they run); ``sample_weight`` (N,): scikit-learn's
    weighted seeding (the first seed drawn with p = w / sum w, the candidates from the cumulative sum of
    w * closest, the potentials sum w * min(closest, d))."""
    N, dev = X.shape[0], X.device
    # the fused potentials are unweighted sums: weighted seeding takes the torch ops
    fused = False if sample_weight is not None else _fused(X, fused)
    if not fused:  # the fused kernels' distances are float64 (see turbo_gmm.init.kmeans_assign)
        check_score_range(X, center)
    trials = n_local_trials(n_clusters)
    first, w = _first_row(X, random_state, sample_weight)
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
    _greedy_steps(X, indices, 1, closest, draws, center, x_sq, fused, w)
    return indices


def _greedy_steps(X, indices, start, closest, draws, center, x_sq, fused, w) -> None:
    """scikit-learn's greedy D^2 steps filling ``indices[start:]`` in place from ``closest`` (the squared distances
    to the seeds ``indices[:start]``: float64 for the fused kernels, X's dtype for the torch ops), one row of
    ``draws`` (uniforms, one per candidate) a step; ``w``: float64 sample weights or None (torch ops only)."""
    N, dev = X.shape[0], X.device
    trials = draws.shape[1]
    potential = closest.sum(dtype=torch.float64) if w is None else w @ closest.double()
    if fused and w is None and ONE_PASS_SEEDING:
        _one_pass_steps(X, indices, start, closest, draws, potential)
        return
    # the candidates' distances kept to fold the chosen one, where writing them costs less than reading X again
    stored = (torch.empty((trials, N), dtype=torch.float64, device=dev)
              if fused and indices.shape[0] > start and kmeans_assign.stores_distances(X, trials) else None)
    for c in range(start, indices.shape[0]):
        mass = torch.cumsum(closest, 0, dtype=torch.float64) if w is None else torch.cumsum(w * closest, 0)
        candidates = torch.searchsorted(mass, draws[c - start] * potential)
        candidates.clamp_(max=N - 1)
        if fused:
            potentials = kmeans_assign.candidate_potentials(X, candidates, closest, stored)
        else:
            dist = sq_distances(X, x_sq, X[candidates], center)
            torch.minimum(dist, closest[:, None], out=dist)
            if w is None:
                potentials = dist.sum(0, dtype=torch.float64)
            else:  # a column at a time: no float64 copy of the (N, trials) block
                potentials = torch.stack([w @ dist[:, t].double() for t in range(dist.shape[1])])
        best = potentials.argmin().view(1)
        potential = potentials[best[0]]
        indices[c : c + 1] = candidates[best]
        if stored is not None:
            kmeans_assign.fold_stored(stored, best, closest)
        elif fused:
            kmeans_assign.fold_nearest(X, indices[c : c + 1], closest)
        else:
            closest = dist.index_select(1, best)[:, 0].contiguous()


def _one_pass_steps(X, indices, start, closest, draws, potential) -> None:
    """:func:`_greedy_steps` by :class:`turbo_gmm.init.kmeans_assign.SeedingSteps`: one pass over X a step. The
    last seed is not folded into ``closest``."""
    steps = kmeans_assign.SeedingSteps(X, draws.shape[1])
    masses, fold = steps.tile_masses(closest), None
    for c in range(start, indices.shape[0]):
        candidates = steps.draw(closest, fold, masses, draws[c - start] * potential)
        potentials = steps.potentials(candidates, closest, fold)
        best = potentials.argmin().view(1)
        potential = potentials[best[0]]
        indices[c : c + 1] = candidates[best]
        fold = indices[c : c + 1]
        masses = steps.tile_pots[:, best[0]]


def kmeans_parallel(X: torch.Tensor, n_clusters: int, random_state: np.random.RandomState, center: torch.Tensor,
                    *, oversampling_factor: float = OVERSAMPLING_FACTOR, n_rounds: int | None = None,
                    x_sq: torch.Tensor | None = None, fused: bool | None = None,
                    sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Row indices (n_clusters,) of k-means|| seeds (scalable k-means++, Bahmani et al. 2012), distinct.

    The first row is drawn as :func:`kmeans_plusplus` draws it. Each of ``n_rounds`` rounds then samples every
    row independently with probability min(1, l w_i D_i^2 / phi), l = ``oversampling_factor * n_clusters``, D_i
    the distance to the nearest candidate so far and phi = sum w_i D_i^2, and folds the new candidates into D
    (one pass over X a round). One assignment pass weighs each candidate by the (sample-weighted) count of rows
    nearest to it, and scikit-learn's weighted greedy k-means++ (``sklearn.cluster.kmeans_plusplus`` on the host:
    the candidates are about l * n_rounds rows) picks ``n_clusters`` of them. Where fewer than ``n_clusters``
    candidates have weight, the rest are greedy k-means++ steps over X; where every row of positive weight
    already sits on a seed (fewer distinct rows than seeds), unchosen rows, of positive weight first, in index
    order (duplicates of seeds: k-means then finds fewer distinct clusters, as after k-means++).

    Draws: the first row, the final choice and any k-means++ steps come from ``random_state``; the rounds'
    uniforms, one vector of N a round, from a ``torch.Generator`` on X's device seeded by one
    ``random_state.randint`` draw. scikit-learn has no k-means||, so these seeds are no reference's (and CPU and
    CUDA generators draw different uniforms). ``n_rounds`` None: KMEANS_PARALLEL_ROUNDS. ``center``, ``x_sq``,
    ``fused``, ``sample_weight``: as :func:`kmeans_plusplus`'s; the fused folds are float64 distances, the torch
    ops' X's dtype, and the assignment pass is Lloyd's (:class:`turbo_gmm.init.kmeans_assign.Assigner` or the
    torch ops)."""
    N, dev = X.shape[0], X.device
    if not 1 <= n_clusters <= N:
        raise ValueError(f"n_samples={N} should be >= n_clusters={n_clusters}.")
    if not oversampling_factor >= 0:
        raise ValueError(f"oversampling_factor must be >= 0, got {oversampling_factor}")
    rounds = KMEANS_PARALLEL_ROUNDS if n_rounds is None else int(n_rounds)
    if rounds < 0:
        raise ValueError(f"n_rounds must be >= 0, got {n_rounds}")
    fused = _fused(X, fused)
    check_score_range(X, center)  # the assignment pass scores in X's dtype on both paths
    first, w = _first_row(X, random_state, sample_weight)
    generator = torch.Generator(device=dev)
    generator.manual_seed(int(random_state.randint(np.iinfo(np.int32).max)))
    if not fused and x_sq is None:
        x_sq = centered_sq_norms(X, center)
    closest = torch.full((N,), math.inf, dtype=torch.float64, device=dev)
    found = [torch.full((1,), first, dtype=torch.int64, device=dev)]
    _fold_candidates(X, found[0], closest, center, x_sq, fused)
    pending = None  # the last round's candidates, folded only if the greedy steps need their distances
    scale = oversampling_factor * n_clusters
    for _ in range(rounds):
        if pending is not None:
            _fold_candidates(X, pending, closest, center, x_sq, fused)
            pending = None
        phi = float(closest.sum() if w is None else w @ closest)
        if phi == 0.0:  # every row of positive weight sits on a candidate
            break
        p = closest * (scale / phi)
        if w is not None:
            p.mul_(w)
        new = torch.nonzero(torch.rand(N, generator=generator, dtype=torch.float64, device=dev) < p)[:, 0]
        if new.numel():  # a candidate's D is 0: never sampled again
            found.append(new)
            pending = new
    candidates = torch.cat(found)
    labels = torch.full((N,), -1, dtype=torch.int64, device=dev)
    points = X[candidates].double()
    weights = {} if sample_weight is None else {"sample_weight": sample_weight}
    assign = (kmeans_assign.Assigner if fused else _Assignment)(X, center, points.shape[0], **weights)
    if w is None:  # integer counts: exact, and without the assignment's (candidates, d) sums
        assign(points, labels, update=False)
        counts = torch.bincount(labels, minlength=points.shape[0]).double()
    else:  # the assignment's float64 weighted counts: no float atomics, the same on every run
        _, counts, _ = assign(points, labels)
    kept = torch.nonzero(counts > 0)[:, 0]  # a candidate without weight is another's double
    if kept.numel() > n_clusters:
        _, chosen = sk_kmeans_plusplus((points[kept] - center).cpu().numpy(), n_clusters,
                                       sample_weight=counts[kept].cpu().numpy(), random_state=random_state)
        indices = candidates[kept[torch.as_tensor(chosen, device=dev)]]
    else:
        indices = torch.empty(n_clusters, dtype=torch.int64, device=dev)
        indices[: kept.numel()] = candidates[kept]
        if kept.numel() < n_clusters:  # greedy k-means++ steps over X for the rest
            if pending is not None:
                _fold_candidates(X, pending, closest, center, x_sq, fused)
            greedy = fused and w is None  # the fused potentials are unweighted
            if not greedy and x_sq is None:
                x_sq = centered_sq_norms(X, center)
            draws = torch.as_tensor(random_state.uniform(size=(n_clusters - kept.numel(), n_local_trials(n_clusters))),
                                    device=dev)
            _greedy_steps(X, indices, kept.numel(), closest if greedy else closest.to(X.dtype), draws, center, x_sq,
                          greedy, w)
    return _distinct_rows(indices, N, w)


def _fold_candidates(X, rows, closest, center, x_sq, fused) -> None:
    """closest <- min(closest, squared distances to X[rows]) in place (float64), and 0 on the rows themselves."""
    if fused:
        kmeans_assign.fold_nearest(X, rows, closest)
    else:
        Y = X[rows]
        block = max(1, SCORE_BLOCK_BYTES // (X.element_size() * rows.shape[0]))
        for r0 in range(0, X.shape[0], block):
            dist = sq_distances(X[r0 : r0 + block], x_sq[r0 : r0 + block], Y, center).amin(1)
            torch.minimum(closest[r0 : r0 + block], dist.double(), out=closest[r0 : r0 + block])
    closest[rows] = 0.0  # the torch ops' expanded distances leave rounding there


def _distinct_rows(indices: torch.Tensor, n_samples: int, w: torch.Tensor | None) -> torch.Tensor:
    """``indices`` with every repeated row, and every row of zero weight, replaced by unchosen rows: of positive
    weight first, then any, in index order (only where the seeding ran out of rows of positive weight)."""
    positive = [True] * indices.shape[0] if w is None else (w[indices] > 0).tolist()
    keep, seen = [], set()
    for i, pos in zip(indices.tolist(), positive):
        if pos and i not in seen:
            keep.append(i)
        seen.add(i)
    if len(keep) == indices.shape[0]:
        return indices
    free = torch.ones(n_samples, dtype=torch.bool, device=indices.device)
    free[torch.as_tensor(keep, dtype=torch.int64, device=indices.device)] = False
    spare = [torch.nonzero(free)[:, 0]] if w is None else [torch.nonzero(free & (w > 0))[:, 0],
                                                          torch.nonzero(free & (w <= 0))[:, 0]]
    fill = torch.cat(spare)[: indices.shape[0] - len(keep)]
    return torch.cat([torch.as_tensor(keep, dtype=torch.int64, device=indices.device), fill])


def random_rows(n_samples: int, n_clusters: int, random_state: np.random.RandomState,
                sample_weight: torch.Tensor | None = None, dtype=np.float64) -> np.ndarray:
    """scikit-learn's ``init="random"`` rows: ``random_state.choice(N, K, replace=False, p=w / sum w)``, w the
    sample weights or ones of X's ``dtype`` (scikit-learn draws with p even without weights)."""
    w = np.ones(n_samples, dtype) if sample_weight is None else sample_weight.detach().cpu().numpy()
    return random_state.choice(n_samples, size=n_clusters, replace=False, p=w / w.sum())


class _Assignment:
    """Nearest-center labels of X in row blocks, with the per-cluster (weighted) counts and sums they imply
    (torch ops)."""

    def __init__(self, X: torch.Tensor, center: torch.Tensor, n_clusters: int,
                 sample_weight: torch.Tensor | None = None):
        self.X, self.center = X, center
        self.rows = max(1, SCORE_BLOCK_BYTES // (X.element_size() * n_clusters))
        self.w = None if sample_weight is None else sample_weight.to(device=X.device, dtype=X.dtype)

    def __call__(self, centers: torch.Tensor, labels: torch.Tensor, update: bool = True):
        """Labels in place for ``centers``; (sums (K, d), counts (K,), labels changed), sums None without update.
        With sample weights, sums of w x and counts of w."""
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
                if self.w is not None:
                    onehot.mul_(self.w[r0 : r0 + self.rows, None])
                counts += onehot.sum(0, dtype=torch.float64)
                sums += (onehot.T @ xb).double()
        return sums, counts, changed


def relocate_empty_clusters(X, centers_old, labels, sums, counts, sample_weight=None) -> None:
    """scikit-learn's rule, in place: the empty clusters (zero weight) take the points farthest from their
    centers, farthest first, each with its weight; none where every point sits on its center (rare: a host
    loop; the farthest points are ``np.argpartition``'s, as scikit-learn's, unless one point is the farthest)."""
    empty = torch.nonzero(counts == 0)[:, 0].tolist()
    far_dist = torch.empty(X.shape[0], dtype=torch.float64, device=X.device)
    rows = max(1, SCORE_BLOCK_BYTES // (8 * X.shape[1]))
    for r0 in range(0, X.shape[0], rows):
        xb = X[r0 : r0 + rows].double()
        far_dist[r0 : r0 + rows] = (xb - centers_old[labels[r0 : r0 + rows]]).square_().sum(1)
    top = far_dist.max()
    top_value, n_top = torch.stack([top, (far_dist == top).sum().double()]).tolist()
    if top_value == 0:  # more clusters than distinct points: nothing to relocate
        return
    if len(empty) == 1 and n_top == 1:
        far = [int(far_dist.argmax())]
    else:  # ties, or several empty clusters: NumPy's selection order
        far = np.argpartition(far_dist.cpu().numpy(), -len(empty))[: -len(empty) - 1 : -1].tolist()
    for new, idx in zip(empty, far):
        old, x = int(labels[idx]), X[idx].double()
        w = 1.0 if sample_weight is None else float(sample_weight[idx])
        sums[old] -= x * w
        counts[old] -= w
        sums[new] = x * w
        counts[new] = w


def average_centers(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """sums / counts; a cluster of zero weight (after relocation) goes where scikit-learn's ``_average_centers``
    puts it: on the heaviest cluster, whose row it reads in index order (its sum before it is averaged, its
    mean after)."""
    filled = counts > 0
    new = sums / torch.where(filled, counts, 1.0)[:, None]
    if bool(filled.all()):
        return new
    big = counts.argmax()
    before = torch.arange(counts.shape[0], device=counts.device)[:, None] < big
    return torch.where(filled[:, None], new, torch.where(before, sums[big], new[big]))


def inertia(X: torch.Tensor, centers: torch.Tensor, labels: torch.Tensor,
            sample_weight: torch.Tensor | None = None) -> float:
    """sum_i w_i ||x_i - centers[labels_i]||^2 in float64 (direct differences, row blocks)."""
    centers = centers.to(device=X.device, dtype=torch.float64)
    w = None if sample_weight is None else sample_weight.to(device=X.device, dtype=torch.float64)
    total = torch.zeros((), dtype=torch.float64, device=X.device)
    rows = max(1, SCORE_BLOCK_BYTES // (8 * X.shape[1]))
    for r0 in range(0, X.shape[0], rows):
        dist = (X[r0 : r0 + rows].double() - centers[labels[r0 : r0 + rows]]).square_().sum(1)
        total += dist.sum() if w is None else w[r0 : r0 + rows] @ dist
    return float(total)


def same_clustering(a: torch.Tensor, b: torch.Tensor, n_clusters: int) -> bool:
    """scikit-learn's ``_is_same_clustering``: each label of ``a`` maps to one label of ``b``."""
    return torch.unique(a * n_clusters + b).numel() == torch.unique(a).numel()


def lloyd(X: torch.Tensor, centers: torch.Tensor, center: torch.Tensor, tol: float,
          max_iter: int = KMEANS_MAX_ITER, fused: bool | None = None, precision: str = "tf32x3",
          sample_weight: torch.Tensor | None = None, verbose: bool = False):
    """Lloyd's k-means from ``centers``: (labels (N,), centers (K, d) float64, iterations).

    ``tol`` is absolute; stops when no label changes or the squared center shift is <= tol. ``fused``: the
    kernels (None: where they run), else torch ops; ``sample_weight`` (N,): weighted sums and counts, and the
    weighted relocation of empty clusters; ``verbose``: scikit-learn's messages."""
    K = centers.shape[0]
    check_score_range(X, center)
    fused = _fused(X, fused)
    if fused:
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        assign = kmeans_assign.Assigner(X, center, K, precision, **weights)
    else:
        assign = _Assignment(X, center, K, sample_weight=sample_weight)
    centers = centers.double()
    labels = torch.full((X.shape[0],), -1, dtype=torch.int64, device=X.device)
    step = _LloydStep(assign, centers, labels, graphed=X.is_cuda and fused and max_iter > 1)
    strict = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        sums, counts, new, stats = step(centers)
        centers = step.centers  # the centers this iteration assigned to (``new`` may share their old buffer)
        n_changed, n_empty, shift = stats.tolist()  # the iteration's one host read
        if n_empty:
            relocate_empty_clusters(X, centers, labels, sums, counts, sample_weight)
            new = average_centers(sums, counts)
            shift = float((new - centers).square().sum())
        if verbose:
            print(f"Iteration {n_iter - 1}, inertia {inertia(X, centers, labels, sample_weight)}.")
        centers = new
        if n_changed == 0:
            strict = True
            if verbose:
                print(f"Converged at iteration {n_iter - 1}: strict convergence.")
            break
        if shift <= tol:
            if verbose:
                print(f"Converged at iteration {n_iter - 1}: center shift {shift} within tolerance {tol}.")
            break
    if not strict:
        assign(centers, labels, update=False)  # labels of the returned centers
    return labels, centers, n_iter


class _LloydStep:
    """One Lloyd iteration over static buffers: the assignment (labels in place), the sums and counts, the new
    centers and (labels changed, empty clusters, squared center shift) for the host's one read. ``graphed``
    (CUDA): the first call runs eagerly and is captured as a CUDA graph, later calls replay it (one launch an
    iteration instead of one per kernel and torch op)."""

    def __init__(self, assign, centers: torch.Tensor, labels: torch.Tensor, graphed: bool):
        K, d = centers.shape
        f64 = dict(dtype=torch.float64, device=centers.device)
        self.assign, self.labels, self.graphed, self.loop = assign, labels, graphed, None
        self.centers = torch.empty((K, d), **f64)
        self.sums, self.new = torch.empty((K, d), **f64), torch.empty((K, d), **f64)
        self.counts, self.stats = torch.empty(K, **f64), torch.empty(3, **f64)

    def _body(self) -> None:
        sums, counts, changed = self.assign(self.centers, self.labels)
        self.sums.copy_(sums)
        self.counts.copy_(counts)
        torch.div(sums, torch.where(counts > 0, counts, 1.0)[:, None], out=self.new)
        shift = (self.new - self.centers).square().sum()
        torch.stack([changed.double(), (counts == 0).sum().double(), shift], out=self.stats)

    def __call__(self, centers: torch.Tensor):
        """(sums, counts, new centers, stats) of one iteration from ``centers``: this step's buffers, valid until
        its next call."""
        self.centers.copy_(centers)
        if not self.graphed:
            self._body()
        elif self.loop is None:  # its first run, on a side stream before the capture, is this iteration
            self.loop = GraphedLoop(self._body, self.centers.device)
        else:
            self.loop.replay()
        return self.sums, self.counts, self.new, self.stats


class KMeansResult(NamedTuple):
    """The best run of :func:`kmeans`: labels (N,) int64 and centers (K, d) float64 on X's device, Lloyd
    iterations, float64 inertia."""
    labels: torch.Tensor
    centers: torch.Tensor
    n_iter: int
    inertia: float


def kmeans(X: torch.Tensor, n_clusters: int, random_state: np.random.RandomState, center: torch.Tensor,
           column_variance_mean: float, tol: float = KMEANS_TOL, max_iter: int = KMEANS_MAX_ITER,
           fused: bool | None = None, *, init="k-means++", n_init: int = 1, sample_weight: torch.Tensor | None = None,
           precision: str = "tf32x3", verbose: bool = False) -> KMeansResult:
    """scikit-learn's ``KMeans(n_clusters, init=init, n_init=n_init, tol=tol, max_iter=max_iter).fit(X,
    sample_weight=sample_weight)`` (defaults: k-means++, one run): its draws from ``random_state`` in its
    order, the run of lowest inertia kept (a later run only if it is another clustering).

    ``init``: "k-means++", "k-means||" (:func:`kmeans_parallel`: not scikit-learn's, which has none), "random",
    the initial centers (K, d), or a function of ``random_state`` giving them (in X's coordinates);
    ``column_variance_mean`` scales tol; ``fused``, ``precision``: :func:`lloyd`'s."""
    fused = _fused(X, fused)
    x_sq = None
    method = init if isinstance(init, str) else None
    if (method == "k-means++" and (not fused or sample_weight is not None)) or (method == "k-means||" and not fused):
        x_sq = centered_sq_norms(X, center)  # the torch seeding's, once for all runs
    best = None
    for _ in range(n_init):
        if method == "k-means++":
            centers = X[kmeans_plusplus(X, n_clusters, random_state, center, x_sq, fused, sample_weight)]
        elif method == "k-means||":
            centers = X[kmeans_parallel(X, n_clusters, random_state, center, x_sq=x_sq, fused=fused,
                                        sample_weight=sample_weight)]
        elif method == "random":
            np_dtype = np.float32 if X.dtype == torch.float32 else np.float64
            rows = random_rows(X.shape[0], n_clusters, random_state, sample_weight, np_dtype)
            centers = X[torch.as_tensor(rows, device=X.device)]
        elif method is not None:
            raise ValueError(f"init must be 'k-means++', 'k-means||', 'random', centers or a function, got {init!r}")
        else:
            centers = init(random_state) if callable(init) else init
        if verbose:
            print("Initialization complete")
        labels, centers, n_iter = lloyd(X, centers, center, tol * column_variance_mean, max_iter, fused=fused,
                                        precision=precision, sample_weight=sample_weight, verbose=verbose)
        run = KMeansResult(labels, centers, n_iter, inertia(X, centers, labels, sample_weight))
        if best is None or (run.inertia < best.inertia and not same_clustering(labels, best.labels, n_clusters)):
            best = run
    return best
