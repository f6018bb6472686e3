"""Sample weights act only through their ratios (issue 47, item 1): multiplying every weight by any c > 0 leaves
every fit unchanged, on every path -- the estimator's CPU fallback, its kernels in memory (fp64 and tf32x3) and
streamed, the low-level turbo_gmm.fit / em_step and kernels/full's and kernels/tied's, and data-parallel EM.

Before the fix the weights went to float32 as given (1e-100 underflowed to "no positive entry", 1e100 to
"non-finite entries") and scikit-learn's 10 eps guard was added to n_k in the weights' own unit (weights of 1e-18
gave weights_ [1, 0] and lower_bound_ -43 instead of -4.9). Now they are normalized to mean 1 in float64 first.
"""
import warnings

import numpy as np
import pytest
import torch

import turbo_gmm
from turbo_gmm import GaussianMixture

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SCALES = [1e-18, 1e-30, 1e-100, 1e100]
COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]


def _data(N=80, d=3, seed=0):
    rng = np.random.RandomState(seed)
    return np.r_[rng.randn(N // 2, d), rng.randn(N - N // 2, d) + 4]


def _fit(X, sample_weight, covariance_type, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and float32 warnings are not the subject here
        return GaussianMixture(2, covariance_type=covariance_type, random_state=0, **kw).fit(
            X, sample_weight=sample_weight)


def _assert_same_model(got, want, rtol):
    assert got.lower_bound_ == pytest.approx(want.lower_bound_, rel=rtol)
    for name in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("kw", [dict(device="cpu"), dict(device="auto"), dict(device="auto", precision="tf32x3"),
                                dict(device="auto", precision="tf32x3", max_device_bytes=800)],
                         ids=["cpu", "kernels-auto", "kernels-tf32x3", "kernels-streamed"])
def test_uniform_weights_of_any_scale_fit_the_unweighted_model(covariance_type, kw):
    """Uniform weights 1e-18 ... 1e100 give the unweighted fit (issue 47: 1e-18 gave lower_bound_ -43.4 and weights_
    [1, 0], 1e-100 lower_bound_ 0.0 or "no positive entry", 1e100 a Float32RangeError or "non-finite entries")."""
    X = _data()
    want = _fit(X, None, covariance_type, **kw)
    for c in SCALES:
        _assert_same_model(_fit(X, np.full(len(X), c), covariance_type, **kw), want, 1e-9)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_tiny_weights_fit_as_the_same_weights_divided_by_their_sum(covariance_type, device):
    """Weights around exp(-40) (issue 47: lower_bound_ -10.24 against -4.77 for the same weights over their sum)."""
    X = _data()
    w = np.exp(-40 + np.random.RandomState(1).rand(len(X)))
    _assert_same_model(_fit(X, w, covariance_type, device=device),
                       _fit(X, w / w.sum(), covariance_type, device=device), 1e-9)


@pytest.mark.parametrize("c", SCALES)
def test_low_level_fit_and_step_depend_on_the_weights_ratios_only(c):
    """turbo_gmm.fit / em_step: the same parameters for weights w and c w, ell = sum_i w_i log p(x_i) in the
    caller's units (so c times the other)."""
    X = torch.as_tensor(_data(), dtype=torch.float32, device=DEVICE)
    rng = np.random.RandomState(2)
    w = torch.as_tensor(rng.rand(X.shape[0]) + 0.1, dtype=torch.float64)
    init = (np.full(2, 0.5), _data()[[0, 79]], np.ones((2, 3)))
    want = turbo_gmm.fit(X, init, 4, sample_weight=w)
    got = turbo_gmm.fit(X, init, 4, sample_weight=w * c)
    for name in ("weights", "means", "variances"):
        np.testing.assert_allclose(getattr(got, name).cpu().numpy(), getattr(want, name).cpu().numpy(), rtol=1e-6,
                                   atol=1e-9, err_msg=name)
    np.testing.assert_allclose(got.log_likelihoods.cpu().numpy(), c * want.log_likelihoods.cpu().numpy(), rtol=1e-6)
    step, step_c = (turbo_gmm.em_step(X, *(torch.as_tensor(a, device=DEVICE) for a in init), sample_weight=sw)
                    for sw in (w, w * c))
    np.testing.assert_allclose(step_c.weights.cpu().numpy(), step.weights.cpu().numpy(), rtol=1e-6)
    assert float(step_c.log_likelihood) == pytest.approx(c * float(step.log_likelihood), rel=1e-6)


@pytest.mark.parametrize("module", ["full", "tied"])
def test_full_and_tied_low_level_fits_depend_on_the_weights_ratios_only(module):
    from turbo_gmm import full, tied

    X = torch.as_tensor(_data(), dtype=torch.float32, device=DEVICE)
    w = torch.as_tensor(np.random.RandomState(3).rand(X.shape[0]) + 0.1, dtype=torch.float64)
    U = np.eye(3) if module == "tied" else np.stack([np.eye(3)] * 2)
    init = (np.full(2, 0.5), _data()[[0, 79]], U)
    fit = (full if module == "full" else tied).fit
    want = fit(X, init, 3, sample_weight=w)
    for c in (1e-30, 1e30):
        got = fit(X, init, 3, sample_weight=w * c)
        for name in ("weights", "means", "covariances"):
            np.testing.assert_allclose(getattr(got, name).cpu().numpy(), getattr(want, name).cpu().numpy(),
                                       rtol=1e-6, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(got.log_likelihoods.cpu().numpy(), c * want.log_likelihoods.cpu().numpy(),
                                   rtol=1e-6)


def _sharded_rank(rank, world, store, X, weights, init, out):
    """One gloo rank of :func:`test_sharded_fit_depends_on_the_weights_ratios_only`."""
    import torch.distributed as dist

    from turbo_gmm.distributed import fit_sharded, shard_bounds

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        r0, r1 = shard_bounds(X.shape[0], rank, world)
        fits = [fit_sharded(X[r0:r1], init, 3, X.shape[0], sample_weight=w[r0:r1], backend="torch") for w in weights]
        if rank == 0:
            torch.save([(f.weights, f.means, f.variances, f.log_likelihoods) for f in fits], out)
    finally:
        dist.destroy_process_group()


def test_sharded_fit_depends_on_the_weights_ratios_only(tmp_path):
    """fit_sharded normalizes the weights over all ranks (an all-reduced maximum and sum): weights of 1e-300 and
    1e300 -- every weight of rank 1's shard 0 -- fit the model of the same weights at scale 1, the log-likelihoods
    in the caller's units."""
    import torch.multiprocessing as mp

    X = torch.as_tensor(_data(), dtype=torch.float64)
    w = torch.as_tensor(np.random.RandomState(4).rand(X.shape[0]) + 0.1, dtype=torch.float64)
    w[40:] = 0.0
    weights = [w, w * 1e-300, w * 1e300]
    init = (np.full(2, 0.5), X[[0, 20]].numpy(), np.ones((2, 3)))
    out = tmp_path / "rank0.pt"
    mp.spawn(_sharded_rank, args=(2, str(tmp_path / "store"), X, weights, init, str(out)), nprocs=2)
    (w1, m1, v1, ll1), *scaled = torch.load(out)
    for (w_c, m_c, v_c, ll_c), c in zip(scaled, (1e-300, 1e300)):
        for got, want in ((w_c, w1), (m_c, m1), (v_c, v1)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        np.testing.assert_allclose(ll_c, c * np.asarray(ll1), rtol=1e-12)
