"""Invariances of GaussianMixture as properties (hypothesis; issue 47), on every backend the CPU reaches and every
covariance type:

* scaling every sample weight by any c in [1e-30, 1e30] leaves the fit unchanged;
* integer weights give the fit of the rows repeated that many times, zero weights that of the rows dropped;
* permuting the rows (and the initial components) changes nothing but the components' order;
* an affine change of X (a scale a and a shift t; reg_covar times a^2) moves the means and covariances with it;
* a fit never returns a non-finite attribute without raising;

and scikit-learn's own sample-weight checks on our estimator (``check_sample_weight_equivalence_on_dense_data``,
which test_estimator.py also runs through check_estimator, here with two components and shuffled duplicated rows;
and a port of ``check_sample_weights_invariance``, scikit-learn's before 1.6: unit weights are no weights, zero
weights are rows dropped).

Backends: "cpu" (the torch float64 fallback), "kernels" (device="auto": the Triton kernels, in Triton's
interpreter under TRITON_INTERPRET=1 as ``make test`` runs, precision "auto": at these sizes float64 kernels for
diag and spherical, the float64 E-step for full and tied) and "tf32x3" (the float32 kernels of every type). The
data are tiny (N <= 60, d <= 3, K <= 3) and the examples few (derandomized, so every run draws the same ones):
the file runs in a few minutes on two CPU cores. Fits compared with each other start from the same given
parameters (no draws) and run a fixed number of iterations (tol=0), so the properties are EM's, not k-means'.
"""
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

from turbo_gmm import GaussianMixture

COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]
BACKENDS = {"cpu": dict(device="cpu"), "kernels": dict(device="auto"),
            "tf32x3": dict(device="auto", precision="tf32x3")}
RTOL = {"cpu": 1e-9, "kernels": 1e-9, "tf32x3": 2e-4}  # float64 arithmetic, the float32 kernels' statistics
ITERATIONS = 3
SETTINGS = settings(max_examples=5, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
COMBINATIONS = [pytest.param(b, ct, id=f"{b}-{ct}") for b in BACKENDS for ct in COVARIANCE_TYPES]


@st.composite
def problems(draw, max_rows=60):
    """(X (N, d), initial weights, means, precisions per covariance type): K well-separated clusters of at least 6
    rows each, the initial means near the clusters' centers."""
    seed = draw(st.integers(0, 2**31 - 1))
    K, d = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    per = draw(st.integers(6, max_rows // K))
    rng = np.random.RandomState(seed)
    centers = rng.randn(K, d) * 8
    X = np.concatenate([c + rng.randn(per, d) for c in centers])
    X = X[rng.permutation(len(X))]
    means = centers + 0.5 * rng.randn(K, d)
    return X, K, means


def _initial(K, d, means, covariance_type, scale=1.0):
    """Initial parameters (unit covariances times scale^2) as GaussianMixture arguments."""
    p = 1.0 / scale**2
    precisions = dict(full=np.stack([np.eye(d) * p] * K), tied=np.eye(d) * p, diag=np.full((K, d), p),
                      spherical=np.full(K, p))[covariance_type]
    return dict(weights_init=np.full(K, 1.0 / K), means_init=means, precisions_init=precisions)


def _fit(backend, covariance_type, X, K, means, sample_weight=None, scale=1.0, **kw):
    gm = GaussianMixture(K, covariance_type=covariance_type, tol=0.0, max_iter=ITERATIONS, reg_covar=1e-6 * scale**2,
                         **_initial(K, X.shape[1], means, covariance_type, scale), **BACKENDS[backend], **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0: every fit runs ITERATIONS iterations
        return gm.fit(X, sample_weight=sample_weight)


def _close(got, want, rtol, what, scale=None):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want).max(), 1.0) if scale is None else scale
    assert np.isfinite(got).all(), f"{what}: non-finite"
    err = np.abs(got - want).max() / scale
    assert err <= rtol, f"{what}: error {err:.3g} relative to {scale:.3g}, allowed {rtol:g}"


def _assert_same_model(got, want, rtol, order=None):
    """Same weights, means, covariances and lower bound; ``order``: got's components are want's in this order."""
    order = slice(None) if order is None else order
    _close(got.weights_, want.weights_[order], rtol, "weights_")
    _close(got.means_, want.means_[order], rtol, "means_")
    cov = want.covariances_ if want.covariance_type == "tied" else want.covariances_[order]
    _close(got.covariances_, cov, rtol, "covariances_")
    _close(got.lower_bound_, want.lower_bound_, rtol, "lower_bound_")


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
@SETTINGS
@given(problem=problems(), exponent=st.one_of(st.sampled_from([-30.0, 30.0]), st.floats(-30.0, 30.0)),
       seed=st.integers(0, 2**31 - 1))
def test_scaling_every_weight_leaves_the_fit_unchanged(backend, covariance_type, problem, exponent, seed):
    X, K, means = problem
    w = np.random.RandomState(seed).uniform(0.2, 5.0, len(X))
    want = _fit(backend, covariance_type, X, K, means, w)
    got = _fit(backend, covariance_type, X, K, means, w * 10.0**exponent)
    _assert_same_model(got, want, RTOL[backend] if backend == "tf32x3" else 1e-12)


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
@SETTINGS
@given(problem=problems(max_rows=45), seed=st.integers(0, 2**31 - 1))
def test_integer_weights_equal_repeated_rows_and_zero_weights_dropped_rows(backend, covariance_type, problem, seed):
    """Counts in {0, 1, 2, 3} (each cluster keeps rows): the fit of the rows repeated that many times, 0 dropping it;
    the same for a 0/1 mask against the rows kept."""
    X, K, means = problem
    rng = np.random.RandomState(seed)
    counts = rng.randint(0, 4, len(X))
    counts[rng.choice(len(X), min(len(X), 3 * K + 2), replace=False)] = 1  # enough rows left everywhere
    want = _fit(backend, covariance_type, np.repeat(X, counts, axis=0), K, means)
    _assert_same_model(_fit(backend, covariance_type, X, K, means, counts), want, RTOL[backend])
    keep = (counts > 0).astype(float)
    want = _fit(backend, covariance_type, X[keep > 0], K, means)
    _assert_same_model(_fit(backend, covariance_type, X, K, means, keep), want, RTOL[backend])


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
@SETTINGS
@given(problem=problems(), seed=st.integers(0, 2**31 - 1))
def test_permuting_rows_and_components_changes_only_the_labels(backend, covariance_type, problem, seed):
    X, K, means = problem
    rng = np.random.RandomState(seed)
    rows, comps = rng.permutation(len(X)), rng.permutation(K)
    want = _fit(backend, covariance_type, X, K, means)
    got = _fit(backend, covariance_type, X[rows], K, means[comps])
    _assert_same_model(got, want, RTOL[backend], order=comps)
    labels = np.argsort(comps)[want.predict(X)]  # want's component j is got's argsort(comps)[j]
    np.testing.assert_array_equal(got.predict(X), labels)


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
@SETTINGS
@given(problem=problems(), log_scale=st.floats(-3.0, 3.0), shift=st.floats(-20.0, 20.0))
def test_an_affine_change_of_x_moves_the_model_with_it(backend, covariance_type, problem, log_scale, shift):
    """X' = a X + t (t a * shift in every column), reg_covar' = a^2 reg_covar, the initial means and covariances
    moved likewise: means' = a means + t, covariances' = a^2 covariances, weights the same, lower bound - d log a."""
    X, K, means = problem
    a = 10.0**log_scale
    t = a * shift * np.linspace(1.0, -1.0, X.shape[1])
    want = _fit(backend, covariance_type, X, K, means)
    got = _fit(backend, covariance_type, a * X + t, K, a * means + t, scale=a)
    rtol = RTOL[backend]
    _close(got.weights_, want.weights_, rtol, "weights_")
    _close((got.means_ - t) / a, want.means_, rtol, "means_", scale=np.abs(X).max() + abs(shift) + 1)
    _close(got.covariances_ / a**2, want.covariances_, rtol, "covariances_")
    _close(got.lower_bound_ + X.shape[1] * np.log(a), want.lower_bound_, rtol, "lower_bound_",
           scale=abs(want.lower_bound_) + X.shape[1] * abs(np.log(a)) + 1)


@st.composite
def hostile_data(draw):
    """Tiny data built to break fits: duplicated rows, constant columns, huge or tiny scales and offsets, zero and
    tiny weights; K up to 3 with as few rows."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.RandomState(seed)
    N, d = draw(st.integers(2, 20)), draw(st.integers(1, 3))
    K = draw(st.integers(1, min(3, N)))
    X = rng.randn(N, d)
    if draw(st.booleans()):
        X = X[rng.randint(0, max(1, N // 3), N)]  # few distinct rows
    if draw(st.booleans()):
        X[:, rng.randint(d)] = draw(st.sampled_from([0.0, 1.0, 1e6]))  # a constant column
    X = X * 10.0 ** draw(st.integers(-12, 12)) + 10.0 ** draw(st.integers(-3, 8)) * draw(st.sampled_from([0, 1]))
    w = None
    if draw(st.booleans()):
        w = rng.rand(N) * 10.0 ** draw(st.integers(-200, 200))
        w[rng.rand(N) < 0.3] = 0.0
        w[rng.choice(N, K, replace=False)] = w.max() if w.max() > 0 else 1.0
    init = draw(st.sampled_from(["kmeans", "k-means++", "random", "random_from_data"]))
    return X, K, w, init


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
@settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=hostile_data())
def test_a_fit_is_finite_or_raises(backend, covariance_type, data):
    """No NaN or infinity in any fitted attribute, the lower bound or the predictions of a fit that returned;
    a fit that cannot define its model raises a ValueError (scikit-learn's ill-defined covariance, float32's
    range)."""
    X, K, w, init = data
    gm = GaussianMixture(K, covariance_type=covariance_type, init_params=init, max_iter=5, random_state=0,
                         **BACKENDS[backend])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gm.fit(X, sample_weight=w)
        except ValueError:
            assert not hasattr(gm, "means_")  # a failed fit leaves nothing fitted
            return
        for name in ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_"):
            assert np.isfinite(getattr(gm, name)).all(), name
        assert np.isfinite(gm.lower_bound_)
        assert np.isfinite(gm.score_samples(X)).all() and np.isfinite(gm.predict_proba(X)).all()


def _estimator(backend, covariance_type, K=1):
    return GaussianMixture(K, covariance_type=covariance_type, random_state=0, **BACKENDS[backend])


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
def test_scikit_learns_sample_weight_equivalence_check(backend, covariance_type):
    """scikit-learn's check_sample_weight_equivalence_on_dense_data (15 rows in [0, 1)^30, integer weights against
    the rows repeated, shuffled) with one component as check_estimator runs it, and with two from given initial
    parameters (k-means' draws differ between the shuffled weighted rows and the repeated ones)."""
    d = 30
    p = dict(full=np.stack([np.eye(d) * 10] * 2), tied=np.eye(d) * 10, diag=np.full((2, d), 10.0),
             spherical=np.full(2, 10.0))[covariance_type]
    two = _estimator(backend, covariance_type, 2).set_params(
        reg_covar=1e-2, weights_init=[0.5, 0.5], means_init=np.r_[np.full((1, d), 0.3), np.full((1, d), 0.7)],
        precisions_init=p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_sample_weight_equivalence_on_dense_data("GaussianMixture", _estimator(backend, covariance_type))
        if backend != "tf32x3":  # its float32 statistics are not equal to rtol 1e-7, the check's tolerance
            check_sample_weight_equivalence_on_dense_data("GaussianMixture", two)


@pytest.mark.parametrize("backend, covariance_type", COMBINATIONS)
def test_scikit_learns_sample_weights_invariance_check(backend, covariance_type):
    """scikit-learn's check_sample_weights_invariance (before 1.6) on our estimator: unit weights give the
    unweighted fit, and zero weights on a second copy of X shifted by one give the fit of X alone (k-means++ and
    random_from_data starts draw among rows of positive weight, so both fits draw the same rows). The zeros on the
    float64 backends: the float32 kernels' rounding depends on the data's center, which the shifted copy moves, and
    a component collapsed on one row (reg_covar) turns that into 1% of its density."""
    rng = np.random.RandomState(0)
    X = np.r_[rng.randn(12, 3), rng.randn(12, 3) + 5]
    for init in ("kmeans", "k-means++", "random_from_data"):
        est = _estimator(backend, covariance_type, 2).set_params(init_params=init, max_iter=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            a = clone(est).fit(X)
            b = clone(est).fit(X, sample_weight=np.ones(len(X)))
            zeros = init != "kmeans" and backend != "tf32x3"  # KMeans' tolerance scales with X's unweighted variance
            if zeros:
                c = clone(est).fit(np.r_[X, X + 1], sample_weight=np.r_[np.ones(len(X)), np.zeros(len(X))])
        for method in ("predict_proba", "score_samples"):
            np.testing.assert_allclose(getattr(b, method)(X), getattr(a, method)(X), rtol=1e-7, atol=1e-9)
            if zeros:
                np.testing.assert_allclose(getattr(c, method)(X), getattr(a, method)(X), rtol=1e-7, atol=1e-9)
