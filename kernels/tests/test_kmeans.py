"""kernels.kmeans (k-means++ seeding, Lloyd) in torch ops on CPU tensors, against scikit-learn.

The device code path runs here on CPU tensors: the same torch ops the GPU runs. Lloyd from
the same initial centers must reproduce scikit-learn's iterations (labels, centers, count);
the seeded k-means draws from torch's generator, so against scikit-learn's own draws the
labels agree up to permutation on well-separated data."""
import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from kernels.datasets import make_dataset
from kernels.kmeans import centered_sq_norms, kmeans, kmeans_plusplus, lloyd, n_local_trials, sq_distances


def separated(N=3001, K=7, d=5, offset=50.0, seed=0):
    """(X float32, true labels): K clusters 10+ standard deviations apart, far from the origin."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 10.0, (K, d)) + offset
    y = rng.integers(0, K, N)
    X = means[y] + rng.normal(0.0, 1.0, (N, d)) * rng.uniform(0.5, 1.5, (K, d))[y]
    return X.astype(np.float32), y


def _center(X):
    return torch.as_tensor(X).double().mean(0)


def test_local_trials_are_scikit_learns():
    assert [n_local_trials(k) for k in (1, 2, 7, 32, 256)] == [2, 2, 3, 5, 7]


def test_distances_about_the_center_keep_the_spread_of_offset_data():
    X, _ = separated(N=1023, d=33, offset=1e3)
    Xt = torch.from_numpy(X)
    c = _center(X)
    Y = Xt[[3, 500, 1000]]
    got = sq_distances(Xt, centered_sq_norms(Xt, c), Y, c).double().numpy()
    want = ((X[:, None, :].astype(np.float64) - Y.double().numpy()[None]) ** 2).sum(-1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * want.mean())
    assert got[3, 0] == 0.0 and (got >= 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_plusplus_seeds_one_row_per_separated_cluster(seed):
    X, y = separated(seed=seed)
    Xt = torch.from_numpy(X)
    rows = kmeans_plusplus(Xt, 7, torch.Generator().manual_seed(seed), _center(X))
    assert rows.dtype == torch.int64 and rows.shape == (7,)
    assert sorted(y[rows.numpy()]) == list(range(7))  # D^2 sampling on separated data: every cluster once


def test_kmeans_plusplus_draws_proportional_to_squared_distance():
    """Two seeds from 3 points at 0, 1 and 3 on a line, over 400 generators. When the first seed
    is the point at 0, each candidate is the point at 1 or 3 with probability d^2 / sum d^2 = 1/10
    and 9/10, and the better of 2 candidates (n_local_trials(2)) is the point at 3 unless both
    draws missed it: P = 1 - (1/10)^2 = 0.99 (a uniform second draw would give 1/2 or 3/4)."""
    X = torch.tensor([[0.0], [1.0], [3.0]])
    c = X.double().mean(0)
    picks = []
    for s in range(400):
        g = torch.Generator().manual_seed(s)
        rows = kmeans_plusplus(X, 2, g, c)
        picks.append(tuple(rows.tolist()))
    second_far = np.mean([p[1] == 2 for p in picks if p[0] == 0])
    assert 0.95 <= second_far <= 1.0
    assert {p[0] for p in picks} == {0, 1, 2}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lloyd_from_the_same_centers_is_scikit_learns(dtype):
    """10 centers on 3 overlapping clusters (many iterations): same labels, centers and iteration
    count as KMeans(init=centers, n_init=1), whose tol is relative to the mean column variance."""
    X = make_dataset(2000, 3, 4, seed=2).X.numpy().astype(dtype) + 7.0
    init = X[np.random.default_rng(0).choice(2000, 10, replace=False)]
    km = KMeans(10, init=init, n_init=1, tol=1e-4).fit(X)
    Xt = torch.from_numpy(X)
    tol = 1e-4 * float(X.astype(np.float64).var(0).mean())
    labels, centers, n_iter = lloyd(Xt, torch.from_numpy(init), _center(X), tol)
    assert km.n_iter_ > 5 and n_iter == km.n_iter_
    assert (labels.numpy() == km.labels_).mean() > 0.999
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, atol=1e-4 if dtype == np.float32 else 1e-9)


def test_lloyd_relocates_an_empty_cluster_as_scikit_learn_does():
    """One initial center far from all data gets no point: it takes the point farthest from its center."""
    X, _ = separated(N=1023, K=4, d=3, offset=0.0, seed=5)
    X = X.astype(np.float64)
    init = np.vstack([X[[0, 300, 600]], np.full((1, 3), 1e4)])
    km = KMeans(4, init=init, n_init=1).fit(X)
    labels, centers, n_iter = lloyd(torch.from_numpy(X), torch.from_numpy(init), _center(X),
                                    1e-4 * float(X.var(0).mean()))
    assert (labels.numpy() == km.labels_).all() and n_iter == km.n_iter_
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, atol=1e-9)
    assert (np.bincount(labels.numpy(), minlength=4) > 0).all()


@pytest.mark.parametrize("seed", range(3))
def test_kmeans_labels_agree_with_scikit_learns_up_to_permutation(seed):
    X, y = separated(seed=seed)
    Xt = torch.from_numpy(X)
    labels, centers, _ = kmeans(Xt, 7, torch.Generator().manual_seed(seed), _center(X),
                                float(X.astype(np.float64).var(0).mean()))
    km = KMeans(7, n_init=1, random_state=seed).fit(X)
    assert adjusted_rand_score(km.labels_, labels.numpy()) >= 0.99
    assert adjusted_rand_score(y, labels.numpy()) >= 0.99
    assert centers.shape == (7, 5) and centers.dtype == torch.float64
