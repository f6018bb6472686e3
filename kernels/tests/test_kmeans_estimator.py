"""turbo_gmm.KMeans against sklearn.cluster.KMeans: its estimator checks, and the same fits from the same
random_state (seeds, Lloyd iterations, n_init, sample weights, empty-cluster relocation), and its errors.

Two paths: "cpu" (device="cpu": float64 torch ops, equal to scikit-learn's float64 fit to rounding) and
"fused" (device="auto", precision "tf32x3" or "ieee": the fused float32 kernels, on CUDA or in Triton's
interpreter under TRITON_INTERPRET=1; float32 X, compared with scikit-learn's float64 fit of the same values to
float32 rounding). Weighted Lloyd on the fused kernels runs where ``kmeans_assign.Assigner`` takes
``sample_weight``; weighted seeding is always the torch ops'.

Expected failure among scikit-learn's checks: ``check_sample_weight_equivalence_on_dense_data``. Its weighted and
repeated fits draw different seeds (the rows are shuffled), and the seeds are scikit-learn's, so scikit-learn's
own KMeans fails it too (its own expected failure; :func:`test_the_expected_failure_is_scikit_learns_too`); so
does ``init="k-means||"`` (checked on the CPU), whose weighted and repeated fits draw different seeds too.
Integer weights from one given start are the repeated rows' fit (:func:`test_integer_weights_are_repeated_rows`).
Excluded: ``check_array_api_input`` (no array-API claim; skipped unless SCIPY_ARRAY_API=1)."""
import inspect
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import load_iris, load_wine, make_blobs
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data, estimator_checks_generator

from turbo_gmm import KMeans, dispatch
from turbo_gmm.init.kmeans_assign import Assigner

KERNELS = os.environ.get("TRITON_INTERPRET", "0") == "1" or torch.cuda.is_available()
needs_kernels = pytest.mark.skipif(not KERNELS, reason="the fused kernels need CUDA or TRITON_INTERPRET=1")
FUSED_WEIGHTS = "sample_weight" in inspect.signature(Assigner).parameters
needs_fused_weights = pytest.mark.skipif(not FUSED_WEIGHTS, reason="kmeans_assign.Assigner takes no sample_weight")
CPU = dict(device="cpu")
EXCLUDED_CHECKS = {"check_array_api_input"}
EXPECTED_FAILURES = {"check_sample_weight_equivalence_on_dense_data": (
    "weighted and repeated rows draw different seeds; scikit-learn's KMeans fails this check too")}


def _check_name(check):
    return getattr(check, "func", check).__name__


def _checks():
    for est in (KMeans(n_clusters=2, n_init=2, max_iter=5, device="cpu"),
                KMeans(n_clusters=2, n_init=2, max_iter=5, device="auto", precision="tf32x3"),
                KMeans(n_clusters=2, init="k-means||", n_init=2, max_iter=5, device="cpu")):
        for est_, check in estimator_checks_generator(est):
            name = _check_name(check)
            if name in EXCLUDED_CHECKS:
                continue
            marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=EXPECTED_FAILURES[name])] if (
                name in EXPECTED_FAILURES) else []
            init = {"k-means++": "", "k-means||": "kmeans_parallel-"}[est.init]
            yield pytest.param(est_, check, id=f"{init}{est.device}-{est.precision}-{name}", marks=marks)


@pytest.mark.parametrize("estimator, check", list(_checks()))
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_the_expected_failure_is_scikit_learns_too():
    names = {_check_name(c) for _, c in estimator_checks_generator(KMeans())}
    assert EXCLUDED_CHECKS | set(EXPECTED_FAILURES) <= names
    with pytest.raises(AssertionError, match="sample_weight"):
        check_sample_weight_equivalence_on_dense_data("KMeans", SkKMeans(n_clusters=2, n_init=2, max_iter=5))


# ------------------------------------------------------------------------------------------ the same fits
def _blobs(N=1500, d=4, K=6, seed=0, dtype=np.float64):
    return make_blobs(N, d, centers=K, random_state=seed)[0].astype(dtype)


DATA = {"blobs": (_blobs(), 6), "iris": (load_iris().data, 3), "wine": (load_wine().data, 4)}


def _given_centers(X, K, seed):
    """K distinct rows moved by 1% of the spread: off the data's grid (no exact ties between two centers)."""
    rng = np.random.RandomState(seed)
    return X[rng.choice(len(X), K, replace=False)] + rng.normal(0.0, 0.01, (K, X.shape[1])) * X.std(0)


def _assert_same_fit(ours, theirs, centers_atol=1e-6, inertia_rtol=1e-6):
    """The same labels (not up to permutation), centers, inertia and iteration count."""
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    scale = max(1.0, float(np.abs(theirs.cluster_centers_).max()))
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=0, atol=centers_atol * scale)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=inertia_rtol)
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.labels_.dtype == np.int32 and ours.cluster_centers_.dtype == theirs.cluster_centers_.dtype


@pytest.mark.parametrize("init, seed", [("k-means++", 0), ("k-means++", 1), ("random", 0), ("random-3", 1),
                                        ("array", 0), ("array", 1)])
@pytest.mark.parametrize("data", list(DATA))
def test_the_fit_is_scikit_learns(data, init, seed):
    """From the same random_state: k-means++ (one run), "random" (n_init="auto": 10 runs; and 3), given centers."""
    X, K = DATA[data]
    kw = {"k-means++": {}, "random": dict(init="random"), "random-3": dict(init="random", n_init=3),
          "array": dict(init=_given_centers(X, K, seed))}[init]
    ours = KMeans(K, random_state=seed, **kw, **CPU).fit(X)
    _assert_same_fit(ours, SkKMeans(K, random_state=seed, **kw).fit(X))
    assert ours.backend_ == "torch-cpu" and ours.precision_ == "fp64"


@needs_kernels
@pytest.mark.parametrize("init, precision, offset", [("k-means++", "tf32x3", 0.0), ("random-3", "ieee", 0.0),
                                                     ("k-means++", "tf32x3", 1e4)])
def test_the_fused_fit_is_scikit_learns(init, precision, offset):
    """The fused kernels on float32 X (and float64 X far from zero, rounded to float32 about its mean): the same
    labels and iterations as scikit-learn's float64 fit of the same values, centers to float32 rounding."""
    X = _blobs(N=600, K=5, seed=3, dtype=np.float32)
    if offset:
        X = X.astype(np.float64) + offset
    kw = dict(init="random", n_init=3) if init == "random-3" else {}
    ours = KMeans(5, random_state=0, device="auto", precision=precision, **kw).fit(X)
    assert ours.backend_ in ("triton", "triton-interpreter") and ours.precision_ == precision
    theirs = SkKMeans(5, random_state=0, **kw).fit(X.astype(np.float64))
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.cluster_centers_ - offset, theirs.cluster_centers_ - offset, rtol=0, atol=1e-4)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-5)


def test_a_callable_init_is_called_as_scikit_learn_calls_it():
    """init(X - X.mean(0), n_clusters, random_state), 10 times under n_init="auto"."""
    X, K = DATA["iris"]
    means = []

    def init(Xc, k, random_state):
        means.append(np.abs(Xc.mean(0)).max())
        return Xc[random_state.permutation(len(Xc))[:k]]

    ours = KMeans(K, init=init, random_state=0, **CPU).fit(X)
    assert len(means) == 10 and max(means) < 1e-12
    _assert_same_fit(ours, SkKMeans(K, init=init, random_state=0).fit(X))


def test_given_centers_run_once_with_scikit_learns_warning():
    X, K = DATA["blobs"]
    init = _given_centers(X, K, 0)
    with pytest.warns(RuntimeWarning, match="performing only one init in KMeans instead of n_init=3"):
        ours = KMeans(K, init=init, n_init=3, **CPU).fit(X)
    _assert_same_fit(ours, SkKMeans(K, init=init, n_init=1).fit(X))


# ------------------------------------------------------------------------------------------------ k-means||
@pytest.mark.parametrize("device", [pytest.param("cpu", id="cpu"), pytest.param("auto", id="fused", marks=needs_kernels)])
def test_kmeans_parallel_init_reaches_kmeans_plusplus_inertia(device):
    """init="k-means||" (cuML's name; scikit-learn has none) on well-separated blobs: one run (n_init="auto"),
    the inertia of the k-means++ fit to 1e-4 relative (the same optimum)."""
    X, K = DATA["blobs"]
    kw = dict(device="cpu") if device == "cpu" else dict(device="auto", precision="tf32x3")
    X = X if device == "cpu" else X.astype(np.float32)
    ours = KMeans(K, init="k-means||", random_state=0, **kw)
    assert ours._n_init() == 1
    ours.fit(X)
    assert ours.backend_ in (("torch-cpu",) if device == "cpu" else ("triton", "triton-interpreter"))
    assert len(np.unique(ours.labels_)) == K
    theirs = KMeans(K, random_state=0, **kw).fit(X)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-4)


# ------------------------------------------------------------------------------------------ sample weights
@pytest.mark.parametrize("init", ["k-means++", "random-3"])
@pytest.mark.parametrize("data", ["blobs", "iris"])
def test_weighted_fits_are_scikit_learns(data, init):
    """Weighted k-means++ (first seed p = w / sum w, candidates by cumulative w * D^2) and "random" (rows drawn with
    p = w / sum w), weighted Lloyd: scikit-learn's fit."""
    X, K = DATA[data]
    w = np.random.RandomState(1).uniform(0.0, 3.0, len(X))
    kw = dict(init="random", n_init=3) if init == "random-3" else {}
    _assert_same_fit(KMeans(K, random_state=2, **kw, **CPU).fit(X, sample_weight=w),
                     SkKMeans(K, random_state=2, **kw).fit(X, sample_weight=w))


@needs_kernels
@needs_fused_weights
def test_weighted_fused_fit_is_scikit_learns():
    X = _blobs(N=600, K=5, seed=4, dtype=np.float32)
    w = np.random.RandomState(1).randint(0, 4, len(X)).astype(np.float32)
    ours = KMeans(5, random_state=0, device="auto", precision="tf32x3").fit(X, sample_weight=w)
    theirs = SkKMeans(5, random_state=0).fit(X.astype(np.float64), sample_weight=w.astype(np.float64))
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=0, atol=1e-4)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-5)


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**31 - 1), N=st.integers(12, 60))
def test_integer_weights_are_repeated_rows(seed, N):
    """From one given start, weights 0..4 are the fit of each row repeated that many times: the same centers,
    inertia, iterations, and labels (the weighted fit's of every row, the repeated fit's prediction)."""
    rng = np.random.RandomState(seed)
    X = np.r_[rng.randn(N, 2), rng.randn(N, 2) + 5, rng.randn(N, 2) + [0, 10]]
    w = rng.randint(0, 5, len(X))
    w[[0, N, 2 * N]] = 1  # one start per group, of positive weight
    init = X[[0, N, 2 * N]]
    weighted = KMeans(3, init=init, **CPU).fit(X, sample_weight=w)
    repeated = KMeans(3, init=init, **CPU).fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=0, atol=1e-12)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-12)
    assert weighted.n_iter_ == repeated.n_iter_
    np.testing.assert_array_equal(weighted.labels_, repeated.predict(X))


@pytest.mark.parametrize("init", ["k-means++", "random-3", "k-means||"])
def test_weights_times_seven_are_the_same_model(init):
    X, K = DATA["blobs"]
    w = np.random.RandomState(5).uniform(0.1, 2.0, len(X))
    kw = {"k-means++": {}, "random-3": dict(init="random", n_init=3), "k-means||": dict(init="k-means||")}[init]
    one = KMeans(K, random_state=3, **kw, **CPU).fit(X, sample_weight=w)
    seven = KMeans(K, random_state=3, **kw, **CPU).fit(X, sample_weight=7 * w)
    np.testing.assert_array_equal(one.labels_, seven.labels_)
    np.testing.assert_allclose(one.cluster_centers_, seven.cluster_centers_, rtol=1e-12, atol=0)
    assert seven.inertia_ == pytest.approx(7 * one.inertia_, rel=1e-12) and seven.n_iter_ == one.n_iter_


def test_equal_weights_are_no_weights():
    X, K = DATA["iris"]
    none = KMeans(K, random_state=0, **CPU).fit(X)
    threes = KMeans(K, random_state=0, **CPU).fit(X, sample_weight=np.full(len(X), 3.0))
    np.testing.assert_array_equal(none.labels_, threes.labels_)
    np.testing.assert_array_equal(none.cluster_centers_, threes.cluster_centers_)
    assert threes.inertia_ == pytest.approx(3 * none.inertia_, rel=1e-15)


# ------------------------------------------------------------------------------- empty-cluster relocation
def _two_groups():
    rng = np.random.RandomState(0)
    return np.r_[rng.randn(200, 3), rng.randn(200, 3) + 6]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("far", [1, 3])
def test_empty_clusters_are_relocated_as_scikit_learn_does(far, weighted):
    """Centers far from all data get no point in the first iteration: each takes the point farthest from its
    center (with its weight), farthest first as np.argpartition orders them (three at once: far=3)."""
    X = _two_groups()
    init = np.r_[X[[0, 250]], 1e3 * np.arange(1, far + 1)[:, None] * np.ones((far, 3))]
    w = np.random.RandomState(1).uniform(0.5, 2.0, len(X)) if weighted else None
    ours = KMeans(len(init), init=init, **CPU).fit(X, sample_weight=w)
    theirs = SkKMeans(len(init), init=init).fit(X, sample_weight=w)
    _assert_same_fit(ours, theirs)
    assert np.abs(ours.cluster_centers_).max() < 100 and len(np.unique(ours.labels_)) == len(init)


@needs_kernels
def test_fused_empty_cluster_relocation_is_scikit_learns():
    X = _two_groups().astype(np.float32)
    init = np.r_[X[[0, 250]], np.full((2, 3), 1e3, np.float32)]
    ours = KMeans(4, init=init, device="auto", precision="ieee").fit(X)
    theirs = SkKMeans(4, init=init.astype(np.float64)).fit(X.astype(np.float64))
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=0, atol=1e-4)


@pytest.mark.parametrize("init", ["k-means++", "k-means||"])
def test_fewer_distinct_points_than_clusters_warn_as_scikit_learn(init):
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 10, axis=0)
    with pytest.warns(ConvergenceWarning, match=r"Number of distinct clusters \(3\) found smaller than n_clusters"):
        km = KMeans(5, init=init, random_state=0, **CPU).fit(X)
    assert km.inertia_ == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad, match", [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity")])
@pytest.mark.parametrize("tensor", [False, True])
def test_non_finite_x_is_a_value_error(bad, match, tensor):
    X = DATA["iris"][0].copy()
    X[7, 2] = bad
    with pytest.raises(ValueError, match=match):
        KMeans(3, **CPU).fit(torch.from_numpy(X) if tensor else X)


@pytest.mark.parametrize("kw, sample_weight, error, match", [
    (dict(n_clusters=6), None, ValueError, "n_samples=5 should be >= n_clusters=6"),
    (dict(n_clusters=2, init=np.zeros((3, 2))), None, ValueError,
     r"initial centers \(3, 2\) does not match the number of clusters 2"),
    (dict(n_clusters=2, init=np.zeros((2, 3))), None, ValueError,
     r"initial centers \(2, 3\) does not match the number of features of the data 2"),
    (dict(n_clusters=2), [1, 1, -1, 1, 1], ValueError, "Negative values in data passed to `sample_weight`"),
    (dict(n_clusters=2), [0, 0, 0, 0, 0], ValueError, "Sample weights must contain at least one non-zero"),
    (dict(n_clusters=2), [1, 1], ValueError, r"sample_weight.shape == \(2,\), expected \(5,\)"),
    (dict(n_clusters=3, init="random"), [1, 1, 0, 0, 0], ValueError, "init='random' draws n_clusters=3"),
    (dict(n_clusters=2, algorithm="elkan"), None, InvalidParameterError, "'algorithm' parameter .* among {'lloyd'}"),
    (dict(n_clusters=2, init="k-means|"), None, InvalidParameterError, "'init' parameter of KMeans must be a str among"),
    (dict(n_clusters=2, device="gpu"), None, InvalidParameterError, "'device' parameter"),
])
def test_bad_input_raises_a_clear_error(kw, sample_weight, error, match):
    X = np.arange(10, dtype=np.float64).reshape(5, 2)
    km = KMeans(**kw, **({} if "device" in kw else CPU))
    with pytest.raises(error, match=match):
        km.fit(X, sample_weight=sample_weight)
    assert not hasattr(km, "cluster_centers_")


def test_methods_before_fit_are_not_fitted_errors():
    X = DATA["iris"][0]
    for method in ("predict", "transform", "score"):
        with pytest.raises(NotFittedError):
            getattr(KMeans(3), method)(X)


def test_predict_checks_the_features():
    km = KMeans(3, random_state=0, **CPU).fit(DATA["iris"][0])
    with pytest.raises(ValueError, match="X has 3 features, but KMeans is expecting 4 features"):
        km.predict(DATA["iris"][0][:, :3])


# ------------------------------------------------------------------------------- outputs, dtypes, tensors
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_methods_are_scikit_learns(dtype):
    """predict, transform, score, fit_predict, fit_transform: scikit-learn's values and dtypes (float32 stays
    float32); a torch tensor in gives a torch tensor out."""
    X = DATA["wine"][0].astype(dtype)
    ours, theirs = KMeans(4, random_state=0, **CPU).fit(X), SkKMeans(4, random_state=0).fit(X)
    Y = X[::3] * 1.01
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_array_equal(ours.predict(Y), theirs.predict(Y))
    assert ours.predict(Y).dtype == np.int32
    got, want = ours.transform(Y), theirs.transform(Y)
    assert got.dtype == want.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol)
    assert ours.score(Y) == pytest.approx(theirs.score(Y), rel=rtol)
    w = np.linspace(0.5, 2.0, len(Y))
    assert ours.score(Y, sample_weight=w) == pytest.approx(theirs.score(Y, sample_weight=w), rel=rtol)
    np.testing.assert_array_equal(KMeans(4, random_state=0, **CPU).fit_predict(X), theirs.labels_)
    np.testing.assert_allclose(KMeans(4, random_state=0, **CPU).fit_transform(X), theirs.transform(X), rtol=rtol)
    T = torch.from_numpy(Y)
    assert torch.equal(ours.predict(T), torch.from_numpy(ours.predict(Y)))
    assert ours.transform(T).dtype == T.dtype
    labels = KMeans(4, random_state=0, **CPU).fit_predict(torch.from_numpy(X))
    assert labels.dtype == torch.int32 and (labels.numpy() == theirs.labels_).all()


def test_verbose_prints_scikit_learns_messages(capsys):
    X, K = DATA["iris"]
    KMeans(K, random_state=0, verbose=1, **CPU).fit(X)
    ours = capsys.readouterr().out.splitlines()
    SkKMeans(K, random_state=0, verbose=1).fit(X)
    theirs = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0].split(":")[0] for line in ours if line] == [
        line.split(",")[0].split(":")[0] for line in theirs if line]


@needs_kernels
def test_precision_auto_takes_fp64_for_small_work_and_the_kernels_beyond(monkeypatch):
    X = _blobs(N=300, K=3, seed=6, dtype=np.float32)
    small = KMeans(3, random_state=0, device="auto").fit(X)
    assert small.precision_ == "fp64" and small.backend_ == f"torch-{'cuda' if torch.cuda.is_available() else 'cpu'}"
    monkeypatch.setattr(dispatch, "FP64_FLOOR_WORK", 0)
    large = KMeans(3, random_state=0, device="auto").fit(X)
    assert large.precision_ == "tf32x3" and large.backend_ in ("triton", "triton-interpreter")
    np.testing.assert_array_equal(small.labels_, large.labels_)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_tensors_are_fitted_in_place_and_answered_there():
    X = torch.as_tensor(_blobs(N=2000, K=5, seed=7, dtype=np.float32), device="cuda")
    km = KMeans(5, random_state=0, precision="tf32x3")
    labels = km.fit_predict(X)
    assert labels.device == X.device and labels.dtype == torch.int32
    assert (labels.cpu().numpy() == km.labels_).all() and isinstance(km.cluster_centers_, np.ndarray)
    theirs = SkKMeans(5, random_state=0).fit(X.cpu().double().numpy())
    np.testing.assert_array_equal(km.labels_, theirs.labels_)
    assert km.transform(X).device == X.device and km.predict(X).device == X.device
    bad = X.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        KMeans(5).fit(bad)
