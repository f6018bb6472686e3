"""Components that take no rows, handled as scikit-learn handles them on every path (issue 47, item 5).

scikit-learn's M-step adds 10 eps to every n_k, so an emptied component keeps a weight of ~10 eps / N, a mean
where its (zero) responsibilities put it and a covariance of reg_covar; the next E-step takes the log of that
weight (very negative, finite). The kernels' diag M-step gave it the weight n_k / N = 0 exactly, and the fit
then refused its own output ("weights and variances must be > 0"): 3 distinct points with K = 5, a 4-colour
image with K = 5, 6, 8, ``weights_init=[1, 0]``. Now the weights are (n_k + guard) / (N + K guard) on every
path, and a weight of 0 (given by the user) scores as a padded component does (the finite sentinel, not log 0).
"""
import warnings

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture as SkGaussianMixture

import turbo_gmm
from turbo_gmm import GaussianMixture

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]
THREE_POINTS = np.repeat(np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), 10, axis=0)
FOUR_COLOURS = np.repeat(np.eye(4, 3) * 200 + 20, 25, axis=0)  # a 4-colour "image" of 100 pixels


def _pair(X, K, covariance_type, device, **kw):
    """(ours, scikit-learn's) fits, warnings silenced (k-means finds fewer clusters than K; float32 lift)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = SkGaussianMixture(K, covariance_type=covariance_type, random_state=0, **kw).fit(X)
        ours = GaussianMixture(K, covariance_type=covariance_type, device=device, random_state=0, **kw).fit(X)
    return ours, theirs


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_three_points_with_five_components_fit_scikit_learns_model(device, covariance_type):
    """Issue 47: diag and spherical on the kernels raised "weights and variances must be > 0"; scikit-learn's lower
    bound is 16.868. The empty components' weights are scikit-learn's ~10 eps / N, not 0."""
    ours, theirs = _pair(THREE_POINTS, 5, covariance_type, device)
    assert theirs.lower_bound_ == pytest.approx(16.8678, abs=1e-4)
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-9)
    np.testing.assert_allclose(np.sort(ours.weights_), np.sort(theirs.weights_), rtol=1e-6, atol=1e-15)
    assert (ours.weights_ > 0).all() and ours.weights_.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("K", [5, 6, 8])
@pytest.mark.parametrize("covariance_type", ["diag", "spherical"])
def test_four_colour_image_fits_more_components_than_colours_on_the_kernels(covariance_type, K):
    """The colours' clusters collapse to the reg_covar floor: the fp64 kernels' lift cancels terms of
    |x - c|^2 / reg_covar ~ 1e10 at 2^-53, hence 1e-6 absolute in the lower bound."""
    ours, theirs = _pair(FOUR_COLOURS, K, covariance_type, "auto")
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, abs=1e-5)
    assert np.isfinite(ours.score_samples(FOUR_COLOURS)).all()


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_a_zero_initial_weight_is_accepted_as_scikit_learn_accepts_it(device, covariance_type):
    """weights_init=[1, 0]: the component starts with no rows (scikit-learn's log 0 = -inf, the kernels' finite
    sentinel) and keeps ~10 eps / N; diag on the kernels refused it."""
    rng = np.random.RandomState(0)
    X = np.r_[rng.randn(20, 2), rng.randn(20, 2) + 5]
    ours, theirs = _pair(X, 2, covariance_type, device, weights_init=[1.0, 0.0])
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-9)
    np.testing.assert_allclose(ours.weights_, theirs.weights_, rtol=1e-6, atol=1e-15)


@pytest.mark.parametrize("precision", ["tf32x3", "fp64"])
def test_low_level_fit_keeps_an_emptied_component(precision):
    """turbo_gmm.fit: a component far from every row empties in its first M-step; its weight is
    guard / (N + K guard) > 0 (scikit-learn's), its variance reg_covar, and the fit goes on (it raised)."""
    X = torch.as_tensor(THREE_POINTS, dtype=torch.float32, device=DEVICE)
    means = np.r_[THREE_POINTS[[0, 10, 20]], [[50.0, 50.0, 50.0]]]
    init = (np.full(4, 0.25), means, np.full((4, 3), 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the collapsed components exceed the float32 lift's tolerance
        r = turbo_gmm.fit(X, init, 3, precision=precision)
    w = r.weights.cpu().numpy()
    eps = np.finfo(np.float64).eps
    assert w[3] == pytest.approx(10 * eps / (30 + 4 * 10 * eps), rel=1e-6, abs=0.0)
    np.testing.assert_allclose(r.variances.cpu().numpy()[3], 1e-6, rtol=1e-9)
    assert np.isfinite(r.log_likelihoods.cpu().numpy()).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = turbo_gmm.fit(X, (r.weights, r.means, r.variances), 1, precision=precision)  # its own output
    assert np.isfinite(again.log_likelihoods.cpu().numpy()).all()


def test_low_level_fit_takes_a_zero_weight_and_refuses_all_zero():
    X = torch.as_tensor(THREE_POINTS, dtype=torch.float32, device=DEVICE)
    means, v = THREE_POINTS[[0, 10]], np.ones((2, 3))
    r = turbo_gmm.fit(X, (np.array([1.0, 0.0]), means, v), 2, precision="fp64")
    assert (r.weights.cpu().numpy() > 0).all() and np.isfinite(r.log_likelihoods.cpu().numpy()).all()
    with pytest.raises(ValueError, match="one > 0"):
        turbo_gmm.fit(X, (np.zeros(2), means, v), 2)
