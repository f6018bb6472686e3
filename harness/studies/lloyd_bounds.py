"""CPU study: how much of a Lloyd iteration distance bounds could skip, before building them into a kernel.

Hamerly's bounds (one upper bound on each row's distance to its center, one lower bound on its distance to any
other center; moved by the centers' shifts each iteration) decide most rows without scoring them once the
centers settle. This study runs Lloyd in float64 (NumPy) from scikit-learn's k-means++ seeds of
``RandomState(0)`` on :func:`turbo_gmm.datasets.make_dataset` data, keeps the bounds beside it, and reports per
iteration the fraction of rows whose upper bound must be tightened (one distance), of rows that must be scored
against every center, and of ``tile``-row tiles holding such a row (what a kernel that scores whole tiles would
still score). Every iteration's labels are those of a plain Lloyd (checked: ``exact``), so the bounds are only
what they skip. A row counts as decided only if its bounds hold with a margin for their rounding.

    python -m harness.studies.lloyd_bounds --out results/cpu/lloyd_bounds [--shape 200K_256_32] [--tile 64]
"""
from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from harness import env
from harness.studies.kmeans_lloyd import parse_shape
from turbo_gmm.datasets import make_dataset

COLUMNS = ("commit", "date", "device", "shape", "N", "d", "K", "iteration", "tighten_fraction", "score_fraction",
           "tile_fraction", "tile", "changed", "shift_sq", "exact")
MARGIN = 1e-9  # relative: a bound decides a row only past this margin over the distances' rounding


def _sq_dists(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Squared distances, ||x||^2 - 2 x.c + ||c||^2 in float64 (BLAS): their rounding, ~1e-13 of a distance
    here, is far inside MARGIN."""
    D = (X * X).sum(1)[:, None] - 2.0 * (X @ C.T) + (C * C).sum(1)[None, :]
    return np.maximum(D, 0.0, out=D)


def _nearest_two(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels (ties to the lower index), distance to the nearest, distance to the second nearest)."""
    D = _sq_dists(X, C)
    labels = D.argmin(1)
    best = D[np.arange(len(X)), labels]
    D[np.arange(len(X)), labels] = np.inf
    return labels, np.sqrt(best), np.sqrt(D.min(1)) if C.shape[0] > 1 else np.full(len(X), np.inf)


def _new_centers(X, labels, centers):
    K = centers.shape[0]
    counts = np.bincount(labels, minlength=K).astype(np.float64)
    sums = np.zeros_like(centers)
    np.add.at(sums, labels, X)
    return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1.0)[:, None], centers)


def bounded_lloyd(X: np.ndarray, centers: np.ndarray, max_iter: int, tol: float, tile: int = 64):
    """Lloyd with Hamerly's bounds beside a plain Lloyd; yields one dict per iteration (see the module)."""
    N = X.shape[0]
    labels, upper, lower = _nearest_two(X, centers)
    for it in range(1, max_iter + 1):
        new = _new_centers(X, labels, centers)
        shift = np.sqrt(((new - centers) ** 2).sum(1))
        centers = new
        upper = upper + shift[labels]
        lower = lower - shift.max()
        tighten = upper > lower * (1.0 - MARGIN)
        upper[tighten] = np.sqrt(((X[tighten] - centers[labels[tighten]]) ** 2).sum(1))
        score = upper > lower * (1.0 - MARGIN)
        plain, _, _ = _nearest_two(X, centers)  # the reference: every row scored
        got = labels.copy()
        got[score], upper[score], lower[score] = _nearest_two(X[score], centers)
        changed = int((got != labels).sum())
        labels = got
        tiles = np.pad(score, (0, -N % tile)).reshape(-1, tile).any(1)
        yield dict(iteration=it, tighten_fraction=float(tighten.mean()), score_fraction=float(score.mean()),
                   tile_fraction=float(tiles.mean()), tile=tile, changed=changed,
                   shift_sq=float((shift**2).sum()), exact=bool((labels == plain).all()))
        if changed == 0 or (shift**2).sum() <= tol:
            return


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m harness.studies.lloyd_bounds")
    p.add_argument("--out", type=Path, required=True, help="folder for lloyd_bounds_<date>_<commit>.csv")
    p.add_argument("--shape", default="200K_256_32", help="N_K_d, N with a K or M suffix")
    p.add_argument("--tile", type=int, default=64, help="rows a kernel scores together")
    p.add_argument("--max-iter", type=int, default=300)
    a = p.parse_args(argv)
    N, d, K = parse_shape(a.shape)
    from sklearn.cluster import kmeans_plusplus

    X = make_dataset(N, 32, d, seed=0, device="cpu").X.double().numpy()
    seeds, _ = kmeans_plusplus(X, K, random_state=np.random.RandomState(0))
    tol = 1e-4 * X.var(0).mean()  # scikit-learn's tol, scaled as its KMeans scales it
    commit = env.git_commit()
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"lloyd_bounds_{time.strftime('%Y-%m-%d')}_{commit[:7]}.csv"
    meta = dict(commit=commit, date=time.strftime("%Y-%m-%d"), device="cpu", shape=a.shape, N=N, d=d, K=K)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for row in bounded_lloyd(X, seeds, a.max_iter, tol, a.tile):
            w.writerow({**meta, **row})
            f.flush()
    print(path)


if __name__ == "__main__":
    main()
