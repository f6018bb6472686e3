"""Every arm that declares full covariances fits them like a float64 EM from the same start.

Same X (the seeded data turned by a fixed linear map, so the covariances are far from diagonal), the
full shared init (turbo_gmm.datasets.shared_init), ten iterations: weights, means, covariances and the
per-point log-likelihood against turbo_gmm.full.reference.em_full to float32 tolerances, tight enough
to see one missing iteration (a guard test). Skipped only where the arm cannot run here (a library
missing, no GPU and no interpreter).
"""
import importlib

import numpy as np
import pytest
import torch

from turbo_gmm.full import reference as reference_full
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.records import to_numpy
from arms.tests.test_library_arms import LL_RTOL, param_mismatches  # the same float32 tolerances as diag

FULL_ARMS = ["turbo_gmm", "pytorch", "sklearn", "gmmx", "torchgmm", "pomegranate"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N, K_GEN, K, D, N_ITER, REG_COVAR = 1023, 3, 4, 5, 10, 1e-6
ARM_OPTIONS = {"turbo_gmm": {"algorithm": "auto", "precision": "tf32x3"}}


@pytest.fixture(scope="module")
def problem():
    X = make_dataset(N, K_GEN, D, seed=0).X
    turn = torch.tensor(np.eye(D) + 0.6 * np.random.default_rng(7).normal(size=(D, D)))
    X = (X.double() @ turn).float().contiguous().to(DEVICE)  # where harness.worker puts X
    return X, shared_init(X, K, seed=0, covariance_type="full")


def reference(X, init, n_iter, reg_covar):
    (w, m, c, _), _ = reference_full.em_full(X.double().cpu().numpy(), init.weights, init.means,
                                             reference_full.precisions_cholesky(init.covariances), n_iter, reg_covar)
    return w, m, c


def mean_ll(X, w, m, c) -> float:
    S = reference_full.log_prob_full(X.double().cpu().numpy(), w, m, reference_full.precisions_cholesky(c))
    top = S.max(1, keepdims=True)
    return float((top[:, 0] + np.log(np.exp(S - top).sum(1))).mean())


def covariance_error(c, c_ref) -> float:
    """The largest Frobenius error of a component's covariance, relative to its norm."""
    return float((np.linalg.norm(c - c_ref, axis=(1, 2)) / np.linalg.norm(c_ref, axis=(1, 2))).max())


def mismatches(got, want) -> list[str]:
    return param_mismatches(got, want, covariance_error, "covariances")


def test_the_shared_full_init_is_the_datas_covariance_with_the_diagonal_inits_variances(problem):
    X, init = problem
    np.testing.assert_allclose(init.covariances[0], np.cov(X.double().cpu().numpy().T, bias=True), rtol=1e-6, atol=1e-7)
    assert (init.covariances == init.covariances[0]).all() and init.covariances.shape == (K, D, D)
    np.testing.assert_array_equal(np.diagonal(init.covariances, axis1=1, axis2=2), init.variances)
    diag = shared_init(X, K, seed=0)
    np.testing.assert_array_equal(diag.means, init.means)
    assert diag.covariances is None


def test_tolerances_detect_one_missing_iteration(problem):
    X, init = problem
    assert mismatches(reference(X, init, N_ITER - 1, REG_COVAR), reference(X, init, N_ITER, REG_COVAR))


@pytest.mark.parametrize("name", FULL_ARMS)
def test_full_fit_matches_the_float64_reference(problem, name):
    arm = importlib.import_module(f"arms.{name}")
    assert "full" in arm.COVARIANCE_TYPES
    if reason := arm.available():
        pytest.skip(f"arms.{name} unavailable: {reason}")
    X, init = problem
    opts = dict(ARM_OPTIONS.get(name, {}), reg_covar=REG_COVAR, numerics="fp32", covariance_type="full")
    run = arm.prepare(X, init, N_ITER, opts)
    first, second = run(), run()
    assert first.n_iter in (None, N_ITER) and first.variances is None
    got = tuple(to_numpy(a) for a in (first.weights, first.means, first.covariances))
    assert got[2].shape == (K, D, D)
    want = reference(X, init, N_ITER, first.info.get("reg_covar", REG_COVAR))  # pomegranate: no floor, 0
    assert abs(mean_ll(X, *got) - mean_ll(X, *want)) <= LL_RTOL * abs(mean_ll(X, *want))
    assert not mismatches(got, want)
    np.testing.assert_allclose(to_numpy(second.covariances), got[2], rtol=1e-5, atol=1e-6)  # each call from the init
