"""Tied-covariance kernels (kernels/tied) against float64 NumPy EM and scikit-learn."""
import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture
from sklearn.mixture._gaussian_mixture import _estimate_gaussian_parameters, _estimate_log_gaussian_prob

import turbo_gmm.tied as kt
from turbo_gmm.full import reference as rf
from turbo_gmm.launch import LaunchConfig
from turbo_gmm.tests.conftest import assert_close_rel
from turbo_gmm.tests.test_full import as_np, full_problem, tensors

ALGORITHMS = ["one_pass", "two_pass"]
SMALL_TILES = LaunchConfig(block_n=32, block_k=16, programs_per_sm=1)


def tied_problem(N, K, d, seed=0):
    X, w, m, U = full_problem(N, K, d, seed)
    return X, w, m, U[0]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(1023, 7, 5), (1023, 3, 7), (500, 37, 5)])
def test_statistics_match_float64_reference(N, K, d, algorithm, precision):
    X, w, m, U = tied_problem(N, K, d, seed=K)
    n, s, ll, c = kt.estep_statistics(tensors(X)[0], *tensors(w, m, U), algorithm=algorithm, precision=precision,
                                      config=SMALL_TILES)
    rn, rs, rll = rf.estep_tied(X, w, m, U)
    rs = rs - rn[:, None] * as_np(c)[None]  # about the kernels' center
    xmax = float(np.abs(X - as_np(c)).max())
    assert_close_rel(as_np(n), rn, 2e-6, "n", N)
    assert_close_rel(as_np(s), rs, 2e-6, "s", N * xmax)
    assert abs(float(ll) - rll) <= 2e-6 * abs(rll)


def test_log_likelihood_and_m_step_match_scikit_learn_helpers():
    X, w, m, U = tied_problem(1023, 7, 5, seed=3)
    r = kt.em_step(tensors(X)[0], *tensors(w, m, U))
    X64 = X.astype(np.float64)
    S = _estimate_log_gaussian_prob(X64, m, U, "tied") + np.log(w)
    L = np.logaddexp.reduce(S, axis=1)
    assert float(r.log_likelihood) == pytest.approx(L.sum(), rel=1e-6)
    nk, means, cov = _estimate_gaussian_parameters(X64, np.exp(S - L[:, None]), 1e-6, "tied")
    np.testing.assert_allclose(as_np(r.weights), nk / nk.sum(), rtol=1e-5)
    np.testing.assert_allclose(as_np(r.means), means, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as_np(r.covariances), cov, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fit_agrees_with_scikit_learn_and_float64_em(algorithm):
    X, w, m, U = tied_problem(1023, 3, 7, seed=5)
    gm = GaussianMixture(3, covariance_type="tied", max_iter=4, tol=0.0, reg_covar=1e-6, weights_init=w,
                         means_init=m, precisions_init=U @ U.T)
    with pytest.warns(Warning):  # ConvergenceWarning: tol = 0 never converges
        gm.fit(X.astype(np.float64))
    r = kt.fit(tensors(X)[0], (w, m, U), 4, algorithm=algorithm, config=SMALL_TILES)
    np.testing.assert_allclose(as_np(r.weights), gm.weights_, rtol=1e-4)
    np.testing.assert_allclose(as_np(r.means), gm.means_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(as_np(r.covariances), gm.covariances_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(as_np(r.precisions_cholesky), gm.precisions_cholesky_, rtol=1e-4, atol=1e-4)
    (_, _, rc, _), rlls = rf.em_tied(X, w, m, U, 4)
    np.testing.assert_allclose(as_np(r.log_likelihoods), rlls, rtol=1e-6)


def test_integer_and_zero_sample_weights_equal_duplicated_and_dropped_rows():
    X, w, m, U = tied_problem(1023, 3, 5, seed=4)
    counts = np.random.default_rng(0).integers(0, 4, X.shape[0])
    weighted = kt.fit(tensors(X)[0], (w, m, U), 2, sample_weight=counts.astype(np.float32))
    repeated = kt.fit(tensors(np.repeat(X, counts, axis=0))[0], (w, m, U), 2)
    np.testing.assert_allclose(as_np(weighted.log_likelihoods), as_np(repeated.log_likelihoods), rtol=1e-6)
    for name in ("weights", "means", "covariances"):
        np.testing.assert_allclose(as_np(getattr(weighted, name)), as_np(getattr(repeated, name)), rtol=2e-5,
                                   atol=2e-6, err_msg=name)


def test_singular_covariance_raises_scikit_learns_error():
    X, w, m, U = tied_problem(400, 2, 3, seed=8)
    X[:, 2] = 1.5
    m[:, 2] = 1.5
    with pytest.raises(ValueError, match="ill-defined empirical covariance"):
        kt.em_step(tensors(X)[0], *tensors(w, m, U), reg_covar=0.0)


def test_bad_input_is_named():
    X, w, m, U = tied_problem(100, 3, 4)
    with pytest.raises(ValueError, match=r"precisions_cholesky \(4, 4\)"):
        kt.em_step(*tensors(X, w, m), torch.as_tensor(np.stack([U] * 3)))
    with pytest.raises(ValueError, match="for full and tied covariances, got 'fp64'"):  # diag/spherical only
        kt.em_step(*tensors(X, w, m, U), precision="fp64")


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_tf32x3_statistics_on_the_gpu(algorithm):
    X, w, m, U = tied_problem(200_003, 40, 24, seed=12)
    n, s, ll, c = kt.estep_statistics(*tensors(X, w, m, U), algorithm=algorithm)
    rn, rs, rll = rf.estep_tied(X, w, m, U, chunk=8192)
    rs = rs - rn[:, None] * as_np(c)[None]
    assert_close_rel(as_np(n), rn, 1e-5, "n", X.shape[0])
    assert_close_rel(as_np(s), rs, 1e-5, "s", X.shape[0] * float(np.abs(X - as_np(c)).max()))
    assert abs(float(ll) - rll) <= 1e-6 * abs(rll)
