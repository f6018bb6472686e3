"""The k-means protocol's shared start: scikit-learn's k-means++ seeds on the cell's data.

Every arm of a ``protocol=kmeans`` cell starts its Lloyd iterations from the same K rows of X, the k-means++
seeds that ``np.random.RandomState(seed)`` draws (harness/PROTOCOL.md, "The k-means protocol"):

* up to SKLEARN_SEEDING_MAX_N rows, scikit-learn's own ``sklearn.cluster.kmeans_plusplus`` on the host array:
  its seeds, exactly;
* above it (where scikit-learn's seeding takes minutes at large K), :func:`turbo_gmm.init.kmeans.kmeans_plusplus`
  on the device: scikit-learn's algorithm and its draws in its order, so the same rows but where a draw falls
  within rounding of a boundary of the cumulative potential, which picks the neighbouring row (seen at
  N = 20 000, K = 16: the 15th seed, then every later one, differs). Every cell of a shape computes them the same
  way from the same X, and the row records a digest of the seed rows (``info.seeds_sha``), which the CSV's
  collection checks before comparing arms.

The data of a k-means cell is the shape's generator with ceil(K / ``kmeans.clusters_per_component``) components
(conf/config.yaml; the spec's ``data_components``), not K: on K well-separated components Lloyd from k-means++
seeds reaches a fixed point in about 2 iterations (results/h200/use_it/kmeans_init_*.csv:
1M rows, 32 components, K = 32), and there would be no 10 iterations to time.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

SKLEARN_SEEDING_MAX_N = 200_000


def seeds_digest(rows: np.ndarray) -> str:
    """A short digest of the seed row indices: equal digests, equal starts."""
    return hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest()[:12]


def shared_seeds(X: torch.Tensor, X_host: np.ndarray, K: int, seed: int) -> tuple[torch.Tensor, np.ndarray, dict]:
    """(seeds (K, d) float32 on X's device: rows of X, their row indices, info) of the cell (module docstring)."""
    if X.shape[0] <= SKLEARN_SEEDING_MAX_N:
        from sklearn.cluster import kmeans_plusplus

        _, rows = kmeans_plusplus(X_host, K, random_state=np.random.RandomState(seed))
        source = "sklearn.cluster.kmeans_plusplus"
    else:
        from turbo_gmm.init.kmeans import kmeans_plusplus

        center = X.mean(0, dtype=torch.float64)
        rows = kmeans_plusplus(X, K, np.random.RandomState(seed), center, fused=None if X.is_cuda else False)
        rows = rows.cpu().numpy()
        source = "turbo_gmm.init.kmeans.kmeans_plusplus (scikit-learn's draws)"
    rows = np.asarray(rows, dtype=np.int64)
    seeds = X[torch.as_tensor(rows, device=X.device)].contiguous()
    return seeds, rows, {"seeding": source, "seeds_sha": seeds_digest(rows), "seed_random_state": seed}
