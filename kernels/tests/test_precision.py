"""The float32 lift's error bound (kernels/diag/precision.py) against measurements: Appendix C's case study, the
kernels' form with tf32x3's split, planted near-constant features (issue 20) where tf32x3 leaves float64 EM
and fp64 follows it step by step, the warning of turbo_gmm.fit, and GaussianMixture(precision="auto")."""
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.preprocessing import StandardScaler

import turbo_gmm
from turbo_gmm import dispatch
from turbo_gmm.diag import reference as ref
from turbo_gmm.datasets import generating_mixture, make_dataset
from turbo_gmm.mixture import GaussianMixture
from turbo_gmm.diag.precision import (SCORE_TOLERANCE, Float32LiftWarning, column_extremes, data_radius,
                                      lift_error_bound)
from turbo_gmm.dispatch import fp64_costs_nothing
from turbo_gmm.tests.conftest import DEVICE


def _bound(X, means, variances):
    X = torch.as_tensor(np.asarray(X, np.float64))
    c = X.mean(0)
    return float(lift_error_bound(data_radius(X, c), torch.as_tensor(means), torch.as_tensor(variances), c))


def _planted(N=1200, K=3, d=5, seed=3, big=40.0, scale=1.0, offset=0.0):
    """The generator's data with two near-constant columns: 0 in all rows but a few, which hold ``big``
    (columns that are 0 in most rows and a few large values, the mechanism of issue 20)."""
    X = make_dataset(N, K, d, seed).X.double().numpy()
    extra = np.zeros((N, 2))
    extra[:4, 0] = big
    extra[-3:, 1] = -big
    return (np.hstack([X, extra]) * scale + offset).astype(np.float32)


def _start(X, K, seed=0):
    """scikit-learn's k-means initialization of X (float64), as (weights, means, variances)."""
    sk = SkGaussianMixture(K, covariance_type="diag", max_iter=0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk.fit(np.asarray(X, np.float64))
    return sk.weights_, sk.means_, sk.covariances_


def test_bound_flags_planted_near_constant_features_not_generator_data():
    """Every float64 EM iterate of the generator's data is within the tolerance (and so are its true
    parameters); on planted near-constant columns the floored variances put the bound decades above it."""
    for N, K, d in ((2000, 4, 8), (3000, 16, 128)):
        X = make_dataset(N, K, d, 0).X.double().numpy()
        _, mu, var = (a.numpy() for a in generating_mixture(K, d, 0))
        assert _bound(X, mu, var) < SCORE_TOLERANCE
    X = make_dataset(2000, 4, 8, 0).X.double().numpy()
    w, m, v = _start(X, 4)
    for _ in range(8):
        assert _bound(X, m, v) < SCORE_TOLERANCE
        (w, m, v), _ = ref.em(X, w, m, v, 1)
    P = _planted().astype(np.float64)
    (w, m, v), _ = ref.em(P, *_start(P, 3), 3)
    assert _bound(P, m, v) > 100 * SCORE_TOLERANCE


def test_radius_is_the_data_range_about_the_center_and_follows_in_place_writes():
    X = torch.tensor([[1.0, -2.0], [3.0, 5.0], [2.0, 0.0]])
    c = torch.tensor([2.0, 1.0], dtype=torch.float64)
    np.testing.assert_array_equal(data_radius(X, c).numpy(), [1.0, 4.0])
    X[0, 0] = -7.0  # the cached extremes follow torch's version counter
    np.testing.assert_array_equal(column_extremes(X)[0].numpy(), [-7.0, -2.0])
    np.testing.assert_array_equal(data_radius(X, c).numpy(), [9.0, 4.0])


@pytest.mark.parametrize("scale, offset", [(1.0, 0.0), (1.0, 1e3), (1.0, -1e4)])
def test_fit_warns_where_tf32x3_leaves_float64_em_and_fp64_follows_it(scale, offset):
    """Planted near-constant features (scaled, offset): turbo_gmm.fit under tf32x3 warns and its log-likelihoods
    leave float64 EM's by over 1e-5 relative; fp64 neither warns nor leaves them (1e-9 relative at every iteration).
    The fp64 lift cancels the same terms at u = 2^-53: at scale 10 (B ~ 1e11) it is off by 8e-5 in ell, at
    scale 1e3 (B ~ 1e15) by 0.16, so the planted data are not scaled up here."""
    P = _planted(scale=scale, offset=offset)
    X64 = P.astype(np.float64)
    c = X64.mean(0)  # float64 EM about the mean: the reference's u/n - mu^2 would cancel the offset's digits
    (w, m, v), _ = ref.em(X64 - c, *(a - c if i == 1 else a for i, a in enumerate(_start(X64, 3))), 2)
    (_, _, rv), want = ref.em(X64 - c, w, m, v, 6)  # past the first M-step: the columns are floored
    m = m + c
    X = torch.as_tensor(P, device=DEVICE)
    with pytest.warns(Float32LiftWarning, match="initial"):
        fast = turbo_gmm.fit(X, (w, m, v), 6, precision="tf32x3")
    got = fast.log_likelihoods.cpu().numpy()
    assert np.abs(got - want).max() > 1e-5 * np.abs(want).max()  # 100x test_em's float32 tolerance (1e-7 measured)
    with warnings.catch_warnings():
        warnings.simplefilter("error", Float32LiftWarning)
        exact = turbo_gmm.fit(X, (w, m, v), 6, precision="fp64")
    np.testing.assert_allclose(exact.log_likelihoods.cpu().numpy(), want, rtol=1e-9)
    np.testing.assert_allclose(exact.variances.cpu().numpy(), rv, rtol=1e-6)


def test_fit_does_not_warn_on_generator_data_and_can_be_told_not_to_check():
    X = make_dataset(1023, 4, 6, 1).X
    w, m, v = (torch.as_tensor(a) for a in _start(X.double().numpy(), 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", Float32LiftWarning)
        turbo_gmm.fit(X.to(DEVICE), (w, m, v), 3, precision="tf32x3")
        P = torch.as_tensor(_planted(), device=DEVICE)
        (w, m, v), _ = ref.em(P.double().cpu().numpy(), *_start(P.double().cpu().numpy(), 3), 2)
        turbo_gmm.fit(P, (w, m, v), 1, precision="ieee", lift_check=False)
    with pytest.warns(Float32LiftWarning):
        turbo_gmm.fit(P, (w, m, v), 1, precision="ieee")


def _matches_scikit_learn(X32, K, covariance_type, precision="auto"):
    """Our estimator on float32 X against scikit-learn's on the same values in float64, from the same initial
    parameters (scikit-learn's k-means start, given to both): (ours, theirs)."""
    X64 = X32.astype(np.float64)
    sk0 = SkGaussianMixture(K, covariance_type=covariance_type, max_iter=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk0.fit(X64)
    start = dict(weights_init=sk0.weights_, means_init=sk0.means_, precisions_init=sk0.precisions_)
    theirs = SkGaussianMixture(K, covariance_type=covariance_type, random_state=0, **start).fit(X64)
    ours = GaussianMixture(K, covariance_type=covariance_type, random_state=0, precision=precision, **start).fit(X32)
    return ours, theirs


@pytest.fixture
def bound_rule(monkeypatch):
    """precision="auto" by the lift's bound alone at any size: these tests' data sit below FP64_FLOOR_WORK,
    where auto takes fp64 for the whole fit without consulting the bound."""
    monkeypatch.setattr(dispatch, "FP64_FLOOR_WORK", 0)


@pytest.mark.parametrize("covariance_type, precision, rel", [("diag", "fp64", 1e-9), ("spherical", "tf32x3", 1e-6)])
def test_auto_follows_the_bound_on_planted_features_and_equals_scikit_learn(covariance_type, precision, rel,
                                                                            bound_rule):
    """diag: the near-constant columns' variances reach the floor, auto runs fp64 and equals scikit-learn's
    float64 fit (lower bound to 1e-9, n_iter_, labels); spherical: a component's one variance averages the
    columns, the bound stays within the tolerance and auto keeps tf32x3 (float32's agreement, 1e-6)."""
    ours, theirs = _matches_scikit_learn(_planted(), 3, covariance_type)
    if ours.backend_ == "torch-cpu":
        pytest.skip("the float64 CPU fallback has no float32 lift")
    assert ours.precision_ == precision and ours.precision_switches_[-1][1] == precision
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=rel)
    X = _planted()
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X.astype(np.float64)))


def test_auto_takes_tf32x3_on_generator_data(bound_rule):
    X = make_dataset(1500, 3, 5, 2).X.numpy()
    ours, theirs = _matches_scikit_learn(X, 3, "diag")
    assert ours.precision_switches_ == [(1, "tf32x3")] or ours.backend_ == "torch-cpu"
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-6)


def test_auto_takes_fp64_below_the_launch_floor_and_full_its_float64_e_step():
    """Table 1's 20K shapes up to K = 32 are within FP64_FLOOR_WORK, 20K_64_32 and 1M_32_32 beyond it; below it
    auto runs the whole fit in fp64 (the generator's data, where the bound alone would keep tf32x3) and equals
    scikit-learn's float64 fit. Full and tied also count N K d^2 against MATRIX_FP64_FLOOR_WORK (digits at K = 10
    within it, the full experiment's 1M_32_32 beyond) and take their float64 torch E-step below both."""
    assert fp64_costs_nothing(20_000, 16, 32) and fp64_costs_nothing(20_000, 32, 32)
    assert not fp64_costs_nothing(20_000, 64, 32) and not fp64_costs_nothing(1_000_000, 32, 32)
    assert fp64_costs_nothing(1797, 10, 64, "full") and fp64_costs_nothing(1797, 10, 64, "tied")
    assert not fp64_costs_nothing(1_000_000, 32, 32, "full") and not fp64_costs_nothing(20_000, 16, 32, "tied")
    assert not fp64_costs_nothing(1_000_000, 128, 1, "full")  # N K d^2 within, but (N, K, d) temporaries of 1 GiB
    X = make_dataset(1500, 3, 5, 2).X.numpy()
    ours, theirs = _matches_scikit_learn(X, 3, "diag")
    if ours.backend_ == "torch-cpu":
        pytest.skip("the float64 CPU fallback has no float32 lift")
    assert ours.precision_switches_ == [(1, "fp64")]
    assert ours.n_iter_ == theirs.n_iter_
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-9)
    full = GaussianMixture(3, covariance_type="full", random_state=0, max_iter=2).fit(X)
    assert full.precision_ == "fp64" and full.algorithm_ == "torch_float64"
    explicit = GaussianMixture(3, covariance_type="full", random_state=0, max_iter=2, precision="tf32x3").fit(X)
    assert explicit.precision_ == "tf32x3" and explicit.algorithm_ in ("one_pass", "two_pass")


SCIKIT_LEARN_DATASETS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer,
                         "digits": load_digits}


@pytest.mark.parametrize("covariance_types", [("diag", "spherical"), ("full", "tied")], ids=["diagonal", "matrix"])
@pytest.mark.parametrize("standardized", [False, True], ids=["raw", "standardized"])
@pytest.mark.parametrize("dataset", sorted(SCIKIT_LEARN_DATASETS))
def test_auto_equals_scikit_learn_on_the_datasets_it_ships(dataset, standardized, covariance_types):
    """Issue 20's target, and issue 22's for full and tied: with precision="auto" (fp64 at these sizes: the fp64
    kernels for diag and spherical, the float64 E-step for full and tied; X kept in float64) and scikit-learn's
    own initialization (same random_state), the lower bound within 1e-9 relative, identical n_iter_ and labels,
    for every covariance type and K = 2..10 (full on the float32 kernels was 5e-4 off at iris K = 8, 1.8e-3 at
    wine K = 8). The exception is measured, not assumed: where scikit-learn's fit keeps a
    component of one row (breast_cancer raw, K >= 8: its variances at the reg_covar floor 1e-6 with features up
    to 4254), float64 moments themselves round at u * x^2 / reg_covar ~ 1e-2 on those variances (exactly reg_covar
    for one row; at K = 8's initialization scikit-learn's E[x^2] - mu^2 about zero is up to 3.7% off it, ours about
    the column mean up to 2.2%) -- and both fits still take the same iterations to the same labels. Their lower
    bounds are held to d * eps * max x^2 / (2 N reg_covar) absolute there, that component's log-determinant
    rounding spread over the N rows: 1.06e-4 at breast_cancer raw, where they measured 1.8e-5 (diag), 2.0e-5
    (spherical) and 2.6e-5 (full) apart at K = 8..10, center from the validation kernel of 7023f5c (1.2e-6
    relative; 2e-7 to 9e-7 with the center summed in another order before it). The same rounding, smaller, where a
    component's full covariance sits at the reg_covar floor along some direction (digits: pixels constant within
    a component): held to eps * max x^2 / reg_covar there (5.7e-8 for digits raw, features up to 16); measured
    2.9e-10 to 2.1e-9 at digits raw K = 8..10 on an AMD EPYC CPU (BLAS summation orders differ between CPUs),
    6e-11 or less on every other dataset."""
    X = SCIKIT_LEARN_DATASETS[dataset]().data
    if standardized:
        X = StandardScaler().fit_transform(X)
    for covariance_type in covariance_types:
        for K in range(2, 11):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                theirs = SkGaussianMixture(K, covariance_type=covariance_type, random_state=0).fit(X)
                ours = GaussianMixture(K, covariance_type=covariance_type, random_state=0, init_backend="sklearn").fit(X)
            where = (covariance_type, K)
            assert ours.precision_ == "fp64", where
            assert ours.n_iter_ == theirs.n_iter_, where
            np.testing.assert_array_equal(ours.predict(X), theirs.predict(X), err_msg=str(where))
            one_row = (theirs.weights_ * X.shape[0]).min() < 2
            floored = covariance_type == "full" and np.linalg.eigvalsh(theirs.covariances_)[:, 0].min() <= 2e-6
            eps = np.finfo(np.float64).eps
            if one_row:
                tolerance = dict(rel=0.0, abs=X.shape[1] * eps * (X * X).max() / (2 * X.shape[0] * 1e-6))
            else:
                tolerance = dict(rel=max(1e-9, eps * (X * X).max() / 1e-6 if floored else 0.0))
            assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, **tolerance), where
