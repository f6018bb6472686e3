"""turbo_gmm.init.kmeans (k-means++ and k-means|| seeding, Lloyd) on CPU tensors, against scikit-learn.

Both implementations run here: the torch ops (``fused=False``, any dtype) and the fused
kernels of turbo_gmm.init.kmeans_assign (``fused=True``, float32, in Triton's interpreter under
TRITON_INTERPRET=1). Lloyd from the same initial centers must reproduce scikit-learn's
iterations (labels, centers, count); k-means++ draws from the same NumPy RandomState as
scikit-learn, so it must pick scikit-learn's seeds. k-means|| has no scikit-learn reference: its seeds
are checked for validity, coverage of separated clusters, inertia against k-means++'s, weights, and the
agreement of the two implementations."""
import os

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.cluster import kmeans_plusplus as sk_kmeans_plusplus
from sklearn.datasets import load_iris, load_wine

from turbo_gmm.datasets import make_dataset
from turbo_gmm.diag.em import Float32RangeError
from turbo_gmm.init.moments import initial_moments
from turbo_gmm.init.kmeans import (centered_sq_norms, check_score_range, first_seed, inertia, kmeans, kmeans_parallel,
                                   kmeans_plusplus, lloyd, n_local_trials, sq_distances)

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
needs_interpreter = pytest.mark.skipif(not INTERPRETED and not torch.cuda.is_available(),
                                       reason="the fused kernels need CUDA or TRITON_INTERPRET=1")
IMPLEMENTATIONS = [pytest.param(False, id="torch_ops"), pytest.param(True, id="fused", marks=needs_interpreter)]


def _device():
    return "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"


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


@pytest.mark.parametrize("fused", IMPLEMENTATIONS + [pytest.param("one_pass", id="fused_one_pass",
                                                                   marks=needs_interpreter)])
@pytest.mark.parametrize("seed, shape", [(0, (3001, 7, 5)), (1, (2000, 12, 3)), (2, (517, 30, 9)),
                                         (3, (4096, 3, 40))])
def test_kmeans_plusplus_picks_scikit_learns_seeds(seed, shape, fused, monkeypatch):
    """Same RandomState, same points: the indices of sklearn.cluster.kmeans_plusplus, in order.
    The fused kernels take float32 X; scikit-learn gets the same values as float64. "one_pass": the fused
    kernels' one pass over X a step (turbo_gmm.init.kmeans.ONE_PASS_SEEDING)."""
    if fused == "one_pass":
        from turbo_gmm.init import kmeans as kmeans_module

        monkeypatch.setattr(kmeans_module, "ONE_PASS_SEEDING", True)
        fused = True
    N, K, d = shape
    X, _ = separated(N=N, K=max(3, K // 3), d=d, seed=seed)
    X = X if fused else X.astype(np.float64)
    _, want = sk_kmeans_plusplus(X.astype(np.float64), K, random_state=seed)
    rows = kmeans_plusplus(torch.from_numpy(X).to(_device()), K, np.random.RandomState(seed),
                           _center(X).to(_device()), fused=fused)
    assert rows.dtype == torch.int64 and rows.shape == (K,)
    np.testing.assert_array_equal(rows.cpu().numpy(), want)


@needs_interpreter
def test_one_pass_draw_is_the_first_row_whose_cumulative_mass_reaches_the_value():
    """SeedingSteps.draw (tile masses, then one tile rescanned) against searchsorted over the cumulative sum of
    min(closest, distance to the folded row) over all rows: values inside tiles, on a row's cumulative mass
    (to 1e-9 of it on either side: the tile sums round otherwise than one cumulative sum), beside a run of
    zero-mass rows (never drawn), at 0 and past the total (the last row); the last tile is partial."""
    from turbo_gmm.init.kmeans_assign import SeedingSteps

    g = torch.Generator().manual_seed(5)
    X = (torch.randn(1000, 6, generator=g) * 3.0).to(_device())  # d_pad 16: tiles of 256 rows, the last of 232
    closest = (torch.rand(1000, generator=g, dtype=torch.float64) * 50.0).to(_device())
    closest[300:340] = 0.0
    steps = SeedingSteps(X, 4)
    for fold in (None, torch.tensor([17], device=_device())):
        mass = closest if fold is None else torch.minimum(closest, (X.double() - X[fold].double()).square().sum(1))
        cum = torch.cumsum(mass, 0)
        edges = cum[[5, 255, 256, 299, 700]]
        values = torch.cat([torch.rand(40, generator=g, dtype=torch.float64).to(_device()) * cum[-1],
                            edges * (1 - 1e-9), edges * (1 + 1e-9),
                            torch.tensor([0.0, float(cum[-1]) * 1.5], dtype=torch.float64, device=_device())])
        want = torch.searchsorted(cum, values).clamp_(max=999)
        got = steps.draw(closest, fold, steps.tile_masses(mass), values)
        np.testing.assert_array_equal(got.cpu().numpy(), want.cpu().numpy())


@needs_interpreter
def test_one_pass_and_two_pass_seeding_pick_the_same_rows(monkeypatch):
    from turbo_gmm.init import kmeans as kmeans_module

    X, _ = separated(N=2500, K=9, d=4, seed=3)
    Xt, c = torch.from_numpy(X).to(_device()), _center(X).to(_device())
    rows = {}
    for one_pass in (True, False):
        monkeypatch.setattr(kmeans_module, "ONE_PASS_SEEDING", one_pass)
        rows[one_pass] = kmeans_plusplus(Xt, 30, np.random.RandomState(4), c, fused=True).cpu().numpy()
    np.testing.assert_array_equal(rows[True], rows[False])


def test_first_seed_is_numpys_choice_with_uniform_weights():
    """floor(u N) away from the cumulative sum's rounding, NumPy's own cumsum at the boundaries."""
    for N, dtype in ((7, np.float64), (1000, np.float32), (3, np.float32)):
        for seed in range(50):
            u = np.random.RandomState(seed).random_sample()
            want = np.random.RandomState(seed).choice(N, p=np.ones(N, dtype) / np.ones(N, dtype).sum())
            assert first_seed(N, u, dtype) == want
        w = np.ones(N, dtype)
        cdf = np.cumsum((w / w.sum()).astype(np.float64))
        cdf /= cdf[-1]
        for u in np.nextafter(cdf[:-1], -1.0):  # just below each boundary, then on it
            assert first_seed(N, u, dtype) == cdf.searchsorted(u, side="right")
        for u in cdf[:-1]:
            assert first_seed(N, u, dtype) == cdf.searchsorted(u, side="right")


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_plusplus_seeds_one_row_per_separated_cluster(seed):
    X, y = separated(seed=seed)
    Xt = torch.from_numpy(X)
    rows = kmeans_plusplus(Xt, 7, np.random.RandomState(seed), _center(X), fused=False)
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
        rows = kmeans_plusplus(X, 2, np.random.RandomState(s), c, fused=False)
        picks.append(tuple(rows.tolist()))
    second_far = np.mean([p[1] == 2 for p in picks if p[0] == 0])
    assert 0.95 <= second_far <= 1.0
    assert {p[0] for p in picks} == {0, 1, 2}


@pytest.mark.parametrize("dtype, fused, precision", [
    (np.float64, False, "tf32x3"), (np.float32, False, "tf32x3"),
    pytest.param(np.float32, True, "tf32x3", marks=needs_interpreter, id="float32-fused-tf32x3"),
    pytest.param(np.float32, True, "ieee", marks=needs_interpreter, id="float32-fused-ieee")])
def test_lloyd_from_the_same_centers_is_scikit_learns(dtype, fused, precision):
    """10 centers on 3 overlapping clusters (many iterations): same labels, centers and iteration
    count as KMeans(init=centers, n_init=1), whose tol is relative to the mean column variance."""
    X = make_dataset(2000, 3, 4, seed=2).X.numpy().astype(dtype) + 7.0
    init = X[np.random.default_rng(0).choice(2000, 10, replace=False)]
    km = KMeans(10, init=init, n_init=1, tol=1e-4).fit(X)
    dev = _device() if fused else "cpu"
    tol = 1e-4 * float(X.astype(np.float64).var(0).mean())
    labels, centers, n_iter = lloyd(torch.from_numpy(X).to(dev), torch.from_numpy(init).to(dev), _center(X).to(dev),
                                    tol, fused=fused, precision=precision)
    labels, centers = labels.cpu(), centers.cpu()
    assert km.n_iter_ > 5 and n_iter == km.n_iter_
    assert (labels.numpy() == km.labels_).mean() > 0.999
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, atol=1e-4 if dtype == np.float32 else 1e-9)


@needs_interpreter
def test_fused_lloyd_sums_are_the_float64_sums_of_its_labels():
    """One fused assignment at K = 70 (two center tiles, padded), N not a multiple of the row tile:
    the labels are the float64 argmin wherever the two nearest centers are not float32-close, and
    the sums and counts are those of the labels it wrote, to float32 rounding of each row."""
    from turbo_gmm.init.kmeans_assign import Assigner
    X, _ = separated(N=1999, K=9, d=11, seed=4)
    Xt, c = torch.from_numpy(X).to(_device()), _center(X).to(_device())
    centers = Xt[torch.from_numpy(np.random.default_rng(1).choice(1999, 70, replace=False)).to(_device())].double()
    labels = torch.full((1999,), -1, dtype=torch.int64, device=_device())
    sums, counts, changed = Assigner(Xt, c, 70)(centers, labels)
    lab = labels.cpu().numpy()
    d2 = ((X.astype(np.float64)[:, None] - centers.cpu().numpy()[None]) ** 2).sum(-1)
    two = np.sort(d2, 1)[:, :2]
    clear = two[:, 1] - two[:, 0] > 1e-5 * two[:, 1]
    assert clear.mean() > 0.99 and (lab[clear] == d2.argmin(1)[clear]).all()
    assert int(changed) == 1999
    np.testing.assert_array_equal(counts.cpu().numpy(), np.bincount(lab, minlength=70))
    want = np.zeros((70, 11))
    np.add.at(want, lab, X.astype(np.float64))
    np.testing.assert_allclose(sums.cpu().numpy(), want, rtol=0, atol=1e-6 * np.abs(X).max() * np.bincount(lab).max())
    _, _, again = Assigner(Xt, c, 70)(centers, labels, update=False)
    assert int(again) == 0


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_lloyd_relocates_an_empty_cluster_as_scikit_learn_does(fused):
    """One initial center far from all data gets no point: it takes the point farthest from its center."""
    X, _ = separated(N=1023, K=4, d=3, offset=0.0, seed=5)
    X = X if fused else X.astype(np.float64)
    init = np.vstack([X[[0, 300, 600]], np.full((1, 3), 1e4, X.dtype)])
    km = KMeans(4, init=init.astype(np.float64), n_init=1).fit(X.astype(np.float64))
    dev = _device() if fused else "cpu"
    labels, centers, n_iter = lloyd(torch.from_numpy(X).to(dev), torch.from_numpy(init).to(dev), _center(X).to(dev),
                                    1e-4 * float(X.astype(np.float64).var(0).mean()), fused=fused)
    labels, centers = labels.cpu(), centers.cpu()
    assert (labels.numpy() == km.labels_).all() and n_iter == km.n_iter_
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, atol=1e-9)
    assert (np.bincount(labels.numpy(), minlength=4) > 0).all()


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
@pytest.mark.parametrize("seed", range(3))
def test_kmeans_is_scikit_learns_kmeans_with_the_same_random_state(seed, fused):
    """KMeans(K, n_init=1, random_state=seed): the same seeds, then the same Lloyd iterations,
    so the same labels (not up to permutation), iteration count and centers."""
    X, _ = separated(N=2500, K=5, d=4, seed=seed)
    X = X if fused else X.astype(np.float64)
    dev = _device() if fused else "cpu"
    labels, centers, n_iter, _ = kmeans(torch.from_numpy(X).to(dev), 9, np.random.RandomState(seed), _center(X).to(dev),
                                        float(X.astype(np.float64).var(0).mean()), fused=fused)
    labels, centers = labels.cpu(), centers.cpu()
    km = KMeans(9, n_init=1, random_state=seed).fit(X.astype(np.float64))
    assert n_iter == km.n_iter_ and km.n_iter_ > 1
    assert (labels.numpy() == km.labels_).mean() > 0.999
    np.testing.assert_allclose(centers.numpy(), km.cluster_centers_, atol=1e-4 if fused else 1e-9)
    assert centers.shape == (9, 4) and centers.dtype == torch.float64


def _iris_times(scale):
    """(iris * scale as a float32 CPU tensor, its float64 column mean, its mean column variance)."""
    X = torch.as_tensor(load_iris().data * scale, dtype=torch.float32)
    return X, X.double().mean(0), float(X.double().var(0).mean())


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_beyond_float32_range_is_a_float32_range_error(fused):
    """iris * 1e20 in float32: its squared distances (~1e42) overflow float32, so every score is inf or
    NaN; before the range check the k-means returned one cluster of 150 points on CPU, and on CUDA
    (init_backend "torch") labels outside [0, K) whose gather asserted on the device (2026-12-01). Now
    a Float32RangeError (a ValueError) before any pass, from k-means and the initialization alike."""
    X, center, variance = _iris_times(1e20)
    dev = _device() if fused else "cpu"
    X, center = X.to(dev), center.to(dev)
    with pytest.raises(Float32RangeError, match="k-means"):
        kmeans(X, 3, np.random.RandomState(0), center, variance, fused=fused)
    with pytest.raises(Float32RangeError, match="k-means"):
        lloyd(X, X[[0, 50, 100]].double(), center, 0.0, fused=fused)
    if not fused:  # the torch ops' k-means++ distances are float32 too (the fused ones are float64)
        with pytest.raises(Float32RangeError, match="k-means"):
            kmeans_plusplus(X, 3, np.random.RandomState(0), center, fused=False)
    assert isinstance(Float32RangeError(), ValueError)


@needs_interpreter
def test_torch_initialization_beyond_float32_range_is_a_float32_range_error():
    """The estimator's init_backend="torch" path (the GPU's) on iris * 1e20: its k-means raises, not a
    model of empty components."""
    X, center, variance = _iris_times(1e20)
    with pytest.raises(Float32RangeError, match="k-means"):
        initial_moments(X.to(_device()), 3, "kmeans", np.random.RandomState(0), center.to(_device()), variance)


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_range_check_passes_only_where_kmeans_is_exact_scaling(fused):
    """At the largest power-of-two scale of iris that the range check lets through, float32 k-means is the
    unscaled one times the scale to the bit (no score left float32's range: same labels, iterations,
    centers); twice that scale is refused, and so is 1e20. The bound is a guarantee, ~4x conservative here
    (the unchecked k-means first goes wrong at 2^62, measured)."""
    def run(scale):
        X, center, variance = _iris_times(scale)
        dev = _device() if fused else "cpu"
        return kmeans(X.to(dev), 3, np.random.RandomState(0), center.to(dev), variance, fused=fused)

    exponent = 0
    while True:  # the first power of two the check refuses
        X, center, _ = _iris_times(2.0 ** (exponent + 1))
        try:
            check_score_range(X, center)
        except Float32RangeError:
            break
        exponent += 1
    assert 32 < exponent < 64  # float32's range: the squared spread of iris fits below 2^128
    labels, centers, n_iter, _ = run(1.0)
    big_labels, big_centers, big_n_iter, _ = run(2.0**exponent)
    assert (big_labels.cpu() == labels.cpu()).all() and big_n_iter == n_iter
    np.testing.assert_array_equal(big_centers.cpu().numpy(), centers.cpu().numpy() * 2.0**exponent)
    with pytest.raises(Float32RangeError):
        run(2.0 ** (exponent + 1))


# ------------------------------------------------------------------------------------------------ k-means||
def _parallel(X, K, seed, fused, device=None, **kw):
    """kmeans_parallel's rows of the NumPy array X (float32 for the fused kernels) from RandomState(seed), on
    ``device`` (None: the fused kernels' device, the CPU for the torch ops)."""
    dev = device or (_device() if fused else "cpu")
    Xt = torch.from_numpy(X).to(dev)
    if "sample_weight" in kw:
        kw["sample_weight"] = torch.as_tensor(kw["sample_weight"], device=dev)
    return kmeans_parallel(Xt, K, np.random.RandomState(seed), _center(X).to(dev), fused=fused, **kw).cpu()


def _assert_valid_rows(rows, N, K):
    assert rows.dtype == torch.int64 and rows.shape == (K,)
    assert int(rows.min()) >= 0 and int(rows.max()) < N and torch.unique(rows).numel() == K


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_parallel_returns_distinct_rows_deterministically(fused):
    """n_clusters distinct row indices; the same for the same random_state, others for another."""
    X, _ = separated(N=600, K=5, d=4, seed=1)
    X = X if fused else X.astype(np.float64)
    rows = _parallel(X, 12, 0, fused)
    _assert_valid_rows(rows, 600, 12)
    assert torch.equal(rows, _parallel(X, 12, 0, fused))
    assert not torch.equal(rows, _parallel(X, 12, 1, fused))


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_parallel_seeds_one_row_per_separated_cluster(seed):
    X, y = separated(seed=seed)
    rows = _parallel(X.astype(np.float64), 7, seed, False)
    assert sorted(y[rows.numpy()]) == list(range(7))


def _seed_inertia(X, rows, sample_weight=None):
    """The seeds' inertia with labels of an exact float64 assignment (direct differences)."""
    Xt = torch.from_numpy(X).double()
    seeds = Xt[rows]
    labels = ((Xt[:, None, :] - seeds[None]) ** 2).sum(-1).argmin(1)
    return inertia(Xt, seeds, labels, sample_weight)


def _standardized(X):
    return (X - X.mean(0)) / X.std(0)


SEEDING_DATA = {"blobs": lambda: (separated(seed=0)[0].astype(np.float64), 7),
                "wine": lambda: (_standardized(load_wine().data), 3), "iris": lambda: (_standardized(load_iris().data), 3)}
SEEDING_RATIO = 1.10


@pytest.mark.parametrize("data", list(SEEDING_DATA))
def test_kmeans_parallel_seeds_are_as_good_as_kmeans_plusplus(data):
    """Mean seed inertia over 20 random states, k-means|| / k-means++: measured 0.954 (blobs), 0.945 (wine),
    0.963 (iris); the bound 1.10 fails where k-means|| is broken: the final choice unweighted by the candidates'
    counts measured 1.32, 1.11, 1.24; one round 3.30, 0.96, 1.13; l = 0.2 K 1.81, 1.06, 1.11."""
    X, K = SEEDING_DATA[data]()
    ours = np.mean([_seed_inertia(X, _parallel(X, K, s, False)) for s in range(20)])
    theirs = np.mean([_seed_inertia(X, kmeans_plusplus(torch.from_numpy(X), K, np.random.RandomState(s),
                                                       _center(X), fused=False)) for s in range(20)])
    assert ours <= SEEDING_RATIO * theirs
    if data == "blobs":  # the bound can fail: one round seeds separated blobs poorly
        one_round = np.mean([_seed_inertia(X, _parallel(X, K, s, False, n_rounds=1)) for s in range(20)])
        assert one_round > 2 * SEEDING_RATIO * theirs


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_parallel_never_seeds_rows_of_zero_weight(fused):
    """Half the rows, and a far outlier that unweighted seeding would always take, weigh 0."""
    X, _ = separated(N=1000, K=5, d=4, seed=2)
    X = np.vstack([X, np.full((1, 4), 1e3, np.float32)])
    X = X if fused else X.astype(np.float64)
    w = np.random.default_rng(0).integers(0, 2, len(X)).astype(X.dtype)
    w[-1] = 0.0
    for seed in range(2 if fused else 10):
        rows = _parallel(X, 8, seed, fused, sample_weight=w)
        _assert_valid_rows(rows, len(X), 8)
        assert (w[rows.numpy()] > 0).all()


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_parallel_seeds_depend_on_the_weights_ratios_only(fused):
    X, _ = separated(N=600, K=5, d=4, seed=3)
    X = X if fused else X.astype(np.float64)
    w = np.random.default_rng(1).uniform(0.1, 3.0, len(X))
    rows = _parallel(X, 9, 0, fused, sample_weight=w)
    for scale in (1e-20, 1e20):
        assert torch.equal(_parallel(X, 9, 0, fused, sample_weight=w * scale), rows)


def test_kmeans_parallel_integer_weights_draw_as_repeated_rows():
    """Points 0, 1, 3 weighing 1, 2, 3 against those rows repeated 1, 2, 3 times, over 300 random states: the
    same frequencies of each seed set (0.06: 2.5 standard deviations of a frequency of 0.5 over 300 draws);
    one seed is drawn with probability w / sum w."""
    pts = np.array([[0.0], [1.0], [3.0]])
    w = np.array([1.0, 2.0, 3.0])
    repeated = np.repeat(pts, w.astype(int), axis=0)
    for K in (1, 2):
        freq_w, freq_r = {}, {}
        for s in range(300):
            for freq, rows in ((freq_w, _parallel(pts, K, s, False, sample_weight=w)),
                               (freq_r, _parallel(repeated, K, s, False))):
                key = tuple(sorted((pts if freq is freq_w else repeated)[rows.numpy(), 0]))
                freq[key] = freq.get(key, 0) + 1 / 300
        for key in set(freq_w) | set(freq_r):
            assert abs(freq_w.get(key, 0.0) - freq_r.get(key, 0.0)) < 0.06, (K, key)
        if K == 1:
            for x, p in zip(pts[:, 0], w / w.sum()):
                assert abs(freq_w.get((x,), 0.0) - p) < 0.06


@needs_interpreter
@pytest.mark.parametrize("weighted", [False, True])
def test_kmeans_parallel_fused_and_torch_ops_pick_the_same_seeds(weighted):
    """Float32 X on one device (its generator draws the rounds' uniforms: CPU and CUDA draw different ones): the
    fused folds (float64 distances) and the torch ops' (float32) sample the same candidates, the two assignment
    passes weigh them alike."""
    X, _ = separated(N=1000, K=6, d=5, seed=4)
    kw = dict(sample_weight=np.random.default_rng(2).uniform(0.5, 2.0, 1000).astype(np.float32)) if weighted else {}
    dev = _device()
    for seed in range(2):
        fused, torch_ops = (_parallel(X, 10, seed, f, dev, **dict(kw)) for f in (True, False))
        assert torch.equal(fused, torch_ops)


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_parallel_tops_up_few_candidates_with_kmeans_plusplus_steps(fused):
    """One round at l = 0.1 K samples fewer candidates than seeds: greedy k-means++ steps over X add the rest,
    distinct, and on 20 separated clusters of 4 rows each, one seed each."""
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(20), 4)
    X = (rng.normal(0.0, 100.0, (20, 3))[y] + rng.normal(0.0, 0.1, (80, 3))).astype(np.float32)
    X = X if fused else X.astype(np.float64)
    rows = _parallel(X, 20, 0, fused, oversampling_factor=0.1, n_rounds=1)
    _assert_valid_rows(rows, 80, 20)
    assert sorted(y[rows.numpy()]) == list(range(20))


@pytest.mark.parametrize("fused", IMPLEMENTATIONS)
def test_kmeans_parallel_with_fewer_distinct_rows_than_seeds(fused):
    """3 distinct points repeated 10 times, 5 seeds: every point seeded, the other seeds distinct rows (their
    duplicates; k-means++ repeats a row there, scikit-learn's too); with weights positive on 4 rows only, those 4
    first, then a row of zero weight. Fewer rows than seeds is a ValueError."""
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.float32), 10, axis=0)
    X = X if fused else X.astype(np.float64)
    rows = _parallel(X, 5, 0, fused)
    _assert_valid_rows(rows, 30, 5)
    assert len({tuple(p) for p in X[rows.numpy()]}) == 3
    w = np.zeros(30, X.dtype)
    w[[0, 1, 10, 20]] = 1.0
    rows = _parallel(X, 5, 0, fused, sample_weight=w)
    _assert_valid_rows(rows, 30, 5)
    assert sorted(rows[:4].tolist()) == [0, 1, 10, 20] and w[int(rows[4])] == 0
    with pytest.raises(ValueError, match="n_samples=30 should be >= n_clusters=31"):
        _parallel(X, 31, 0, fused)
