"""The public API: fit/em_step against the float64 oracle and scikit-learn, the
collapsed-component remedy, centering, and input validation."""
import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture

import turbo_gmm
from turbo_gmm.diag import reference as ref
from turbo_gmm.tests.conftest import ALGORITHMS, DEVICE, problem


def as_np(t):
    return t.detach().cpu().double().numpy()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fit_follows_float64_em(algorithm, precision):
    X, w, m, v = problem(1023, 7, 5, seed=1)
    r = turbo_gmm.fit(X, (w, m, v), 6, algorithm=algorithm, precision=precision)
    (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 6)
    assert r.algorithm == algorithm and r.n_floored == 0
    np.testing.assert_allclose(as_np(r.log_likelihoods), rlls, rtol=1e-6)
    np.testing.assert_allclose(as_np(r.weights), rw, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(as_np(r.means), rm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(as_np(r.variances), rv, rtol=1e-4)
    assert abs(as_np(r.weights).sum() - 1.0) < 1e-6


def test_fit_agrees_with_scikit_learn():
    """Several iterations from the same init as sklearn's GaussianMixture (diag)."""
    X, w, m, v = problem(1023, 4, 3, seed=5)
    gm = GaussianMixture(4, covariance_type="diag", max_iter=5, tol=0.0, reg_covar=1e-6, weights_init=w,
                         means_init=m, precisions_init=1.0 / v, init_params="random")
    with pytest.warns(Warning):  # sklearn's ConvergenceWarning: tol=0 never converges
        gm.fit(X.cpu().numpy().astype(np.float64))
    r = turbo_gmm.fit(X, (w, m, v), 5)
    np.testing.assert_allclose(as_np(r.weights), gm.weights_, rtol=1e-4)
    np.testing.assert_allclose(as_np(r.means), gm.means_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(as_np(r.variances), gm.covariances_, rtol=1e-4)


def test_em_step_returns_incoming_log_likelihood():
    X, w, m, v = problem(500, 3, 4, seed=2)
    t = [torch.as_tensor(a, device=DEVICE) for a in (w, m, v)]
    r = turbo_gmm.em_step(X, *t)
    assert float(r.log_likelihood) == pytest.approx(ref.estep(X.cpu().numpy(), w, m, v)[3], rel=1e-6)


def test_collapsed_component_is_floored_and_counted():
    """A component sitting on one isolated far point: u/n and mu*mu agree to float32
    rounding (~1e-7 |x|^2 >> reg_covar), so V cancels to about +-1e-3 and, unfloored,
    goes negative in some coordinates. The fit must stay valid and say so."""
    d = 16
    rng = np.random.default_rng(0)
    X = rng.normal(0.0, 1.0, (2000, d)).astype(np.float32)
    X[-1] = 150.0 + rng.normal(0.0, 1.0, d)  # one isolated point
    X = torch.as_tensor(X, device=DEVICE)
    w = np.array([0.5, 0.5], np.float32)
    m = np.stack([np.zeros(d), X[-1].cpu().numpy()]).astype(np.float32)
    v = np.stack([np.ones(d), np.full(d, 1e-2)]).astype(np.float32)
    r = turbo_gmm.fit(X, (w, m, v), 3, reg_covar=1e-6, center=torch.zeros(d, dtype=torch.float64, device=DEVICE))
    var = as_np(r.variances)
    assert np.isfinite(var).all() and (var >= 1e-6).all()
    assert r.n_floored > 0  # the planted cancellation really happened and was counted
    assert as_np(r.weights)[1] == pytest.approx(1 / 2000, rel=1e-5)


def test_healthy_fit_floors_nothing():
    X, w, m, v = problem(1023, 5, 6, seed=3)
    assert turbo_gmm.fit(X, (w, m, v), 4).n_floored == 0


@pytest.mark.parametrize("offset", [1e2, 1e4])
def test_offset_data_is_centered_in_kernel(offset):
    X, w, m, v = problem(1023, 3, 5, seed=6)
    Xo, mo = X + offset, m + np.float32(offset)
    r = turbo_gmm.fit(Xo, (w, mo, v), 3)
    (rw, rm, rv), rlls = ref.em(Xo.cpu().numpy(), w, mo, v, 3)
    np.testing.assert_allclose(as_np(r.log_likelihoods), rlls, rtol=1e-6)
    np.testing.assert_allclose(as_np(r.variances), rv, rtol=1e-3)


def test_uncentered_far_data_is_refused_with_the_reason():
    X, w, m, v = problem(300, 3, 5)
    with pytest.raises(ValueError, match="far from the origin"):
        turbo_gmm.fit(X + 1e4, (w, m + 1e4, v), 1, center=False)


def test_lift_conditioning_loss_grows_with_offset():
    """Paper Appendix C: the lifted float32 score loses accuracy as data moves away
    from the origin, roughly a decade per decade, while the centered form does not.
    This measurement is why the kernels center X."""
    rng = np.random.default_rng(0)
    d, K = 64, 8
    x = rng.normal(0, 1, (4000, d))
    mu, var = rng.normal(0, 1, (K, d)), rng.uniform(0.5, 2.0, (K, d))
    ratios = []
    for offset in (0.0, 1e2, 1e4):
        xo, mo = x + offset, mu + offset
        exact = -0.5 * (((xo[:, None] - mo[None]) ** 2) / var[None]).sum(-1)
        x32, m32, t32 = xo.astype(np.float32), mo.astype(np.float32), (1 / var).astype(np.float32)
        lifted = (x32 @ (m32 * t32).T - 0.5 * (x32 * x32) @ t32.T - 0.5 * (m32 * m32 * t32).sum(1)).astype(np.float64)
        centered = (-0.5 * (((x32[:, None] - m32[None]) ** 2) * t32[None]).sum(-1)).astype(np.float64)
        err = lambda s: np.abs(s - exact).max() / np.abs(exact).max()  # noqa: E731
        ratios.append(err(lifted) / err(centered))
    assert ratios[1] > 10 * ratios[0] and ratios[2] > 10 * ratios[1], ratios


def test_bad_inputs_are_named():
    X, w, m, v = problem(100, 3, 4)
    args = (w, m, v)
    with pytest.raises(TypeError, match="float32"):
        turbo_gmm.fit(X.double(), args, 1)
    with pytest.raises(ValueError, match="contiguous"):
        turbo_gmm.fit(torch.cat([X, X], 1)[:, ::2], args, 1)
    bad = X.clone()
    bad[[3, 7], 1] = float("nan")
    bad[11, 0] = float("inf")
    with pytest.raises(ValueError, match="3 of 100 rows"):
        turbo_gmm.fit(bad, args, 1)
    with pytest.raises(ValueError, match=r"means must have shape \(K, 4\)"):
        turbo_gmm.fit(X, (w, m[:, :3], v), 1)
    with pytest.raises(ValueError, match="> 0"):
        turbo_gmm.fit(X, (w, m, -v), 1)
    with pytest.raises(ValueError, match="means has non-finite"):
        turbo_gmm.fit(X, (w, m * float("nan"), v), 1)
    with pytest.raises(ValueError, match="variances has non-finite"):
        turbo_gmm.fit(X, (w, m, v * float("inf")), 1)
    with pytest.raises(ValueError, match="algorithm"):
        turbo_gmm.fit(X, args, 1, algorithm="three_pass")
    with pytest.raises(ValueError, match="precision"):
        turbo_gmm.fit(X, args, 1, precision="bf16")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU; on the CPU fit runs eagerly")
def test_graphed_fit_checks_the_parameters_inside_the_graph():
    """The graph checks the incoming values itself (no host sync before the replay): a bad fit is named after
    it, the next fit through the same cached graph is the eager fit, and a fit's results are its own."""
    X, w, m, v = problem(1023, 7, 5, seed=1)
    with pytest.raises(ValueError, match="variances has non-finite"):
        turbo_gmm.fit(X, (w, m, v * float("inf")), 4)
    with pytest.raises(ValueError, match="> 0"):
        turbo_gmm.fit(X, (w, m, -v), 4)
    graphed = turbo_gmm.fit(X, (w, m, v), 4)
    eager = turbo_gmm.fit(X, (w, m, v), 4, cuda_graph=False)
    for a, b in zip((graphed.weights, graphed.means, graphed.variances, graphed.log_likelihoods),
                    (eager.weights, eager.means, eager.variances, eager.log_likelihoods)):
        np.testing.assert_allclose(as_np(a), as_np(b), rtol=1e-6, atol=1e-9)
    assert graphed.n_floored == eager.n_floored
    assert graphed.log_likelihoods_host == graphed.log_likelihoods.tolist()  # read with the status, in one copy
    assert eager.log_likelihoods_host is None
    kept = as_np(graphed.means).copy()
    turbo_gmm.fit(X, (w, m + 1.0, v), 4)
    np.testing.assert_array_equal(as_np(graphed.means), kept)


@pytest.mark.parametrize("algorithm", ["one_pass", "two_pass"])
def test_integer_sample_weights_equal_duplicated_rows(algorithm):
    """fit(sample_weight=counts) on X is the fit of X with each row repeated counts times (0: dropped), by both
    algorithms: ell = sum_i w_i L_i and the weights normalized by sum_i w_i."""
    from turbo_gmm.datasets import make_dataset

    X = make_dataset(1023, 3, 5, seed=4, device=DEVICE).X
    counts = np.random.default_rng(0).integers(0, 4, X.shape[0])
    init = (torch.full((3,), 1 / 3), X[:3].double().cpu().clone(), torch.ones(3, 5))
    weighted = turbo_gmm.fit(X, init, 3, sample_weight=torch.as_tensor(counts.astype(np.float32), device=DEVICE),
                           algorithm=algorithm)
    repeated = turbo_gmm.fit(torch.as_tensor(np.repeat(X.cpu().numpy(), counts, axis=0), device=DEVICE), init, 3,
                           algorithm=algorithm)
    assert weighted.kernel == algorithm  # weighted E-steps run on the Triton kernels
    np.testing.assert_allclose(weighted.log_likelihoods.cpu().numpy(), repeated.log_likelihoods.cpu().numpy(), rtol=1e-6)
    np.testing.assert_allclose(weighted.weights.cpu().numpy(), repeated.weights.cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(weighted.means.cpu().numpy(), repeated.means.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(weighted.variances.cpu().numpy(), repeated.variances.cpu().numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match=">= 0"):
        turbo_gmm.fit(X, init, 1, sample_weight=-torch.ones(X.shape[0], device=DEVICE))


def near_constant_feature_problem():
    """Two clusters in two features and a third feature that is 0 but in five rows (40.0): the first component
    holds none of those rows, so its variance there floors at reg_covar = 1e-6 (tau = 1e6). About the column
    mean c = 0.2 the lifted score of its rows cancels terms of c^2 tau ~ 4e4 down to 0, beyond float32's digits."""
    rng = np.random.default_rng(0)
    N = 1000
    X = np.zeros((N, 3))
    X[: N // 2, :2] = rng.normal(-2.0, 1.0, (N // 2, 2))
    X[N // 2 :, :2] = rng.normal(2.0, 1.0, (N // 2, 2))
    X[rng.choice(np.arange(N // 2, N), 5, replace=False), 2] = 40.0
    params = (np.array([0.5, 0.5]), np.array([[-2.0, -2.0, 0.0], [2.0, 2.0, 0.4]]),
              np.array([[1.0, 1.0, 1e-6], [1.0, 1.0, 16.0]]))
    return torch.as_tensor(X.astype(np.float32), device=DEVICE), params


def step_errors(r, ll, want) -> float:
    """The largest error of one kernel step against float64 EM's: ell relative to |ell|, weights absolute,
    means in standard deviations, variances relative."""
    w, m, v = want
    return max(abs(float(r.log_likelihood) - ll) / abs(ll), float(np.abs(as_np(r.weights) - w).max()),
               float((np.abs(as_np(r.means) - m) / np.sqrt(v)).max()), float((np.abs(as_np(r.variances) - v) / v).max()))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fp64_follows_float64_em_where_the_float32_lift_cannot(algorithm):
    """Issue 20: on a variance floored at reg_covar the float32 lift (ieee) visibly leaves float64 EM, fp64
    follows it step by step (each step from its own previous one, against the float64 step from float64's)."""
    X, params = near_constant_feature_problem()
    Xn = X.cpu().numpy()
    state = {p: [torch.as_tensor(a, device=DEVICE) for a in params] for p in ("ieee", "fp64")}
    want, worst = params, {p: 0.0 for p in state}
    for _ in range(4):
        n, s, u, ll = ref.estep(Xn, *want)
        want = ref.mstep(n, s, u, X.shape[0], 1e-6)
        for p in state:
            r = turbo_gmm.em_step(X, *state[p], algorithm=algorithm, precision=p)
            state[p] = [r.weights, r.means, r.variances]
            worst[p] = max(worst[p], step_errors(r, ll, want))
    assert worst["ieee"] > 1e-3, worst
    assert worst["fp64"] <= 1e-10, worst


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fp64_takes_float64_x(algorithm):
    """float64 X under fp64 is read as it is: float32 X (converted in registers) and the same values in
    float64 give the same fit (to the bit in the interpreter; on a GPU the programs' float64 atomic commits land in
    any order, so to float64 rounding: the H200 at 621461b differed in the last bits); the other precisions refuse
    float64 X."""
    X, w, m, v = problem(1023, 7, 5, seed=1)
    a = turbo_gmm.fit(X, (w, m, v), 3, algorithm=algorithm, precision="fp64")
    b = turbo_gmm.fit(X.double(), (w, m, v), 3, algorithm=algorithm, precision="fp64")
    assert a.precision == b.precision == "fp64"
    for x, y in zip((a.weights, a.means, a.variances, a.log_likelihoods), (b.weights, b.means, b.variances,
                                                                            b.log_likelihoods)):
        if X.is_cuda:
            torch.testing.assert_close(x, y, rtol=1e-13, atol=0)
        else:
            assert torch.equal(x, y)
    with pytest.raises(TypeError, match="precision='fp64'"):
        turbo_gmm.fit(X.double(), (w, m, v), 1, precision="ieee")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the graphed fp64 fit and its compiled PTX")
def test_graphed_fp64_fit_follows_float64_em_on_dmma():
    """On the GPU: the graphed fp64 fit follows float64 EM to 1e-10 and the sweep that ran is float64
    tensor-core products (mma.sync with f64 operands in its PTX)."""
    import re

    from turbo_gmm.diag import one_pass, two_pass

    X, w, m, v = problem(100_003, 7, 5, seed=1)
    for algorithm, kernel in (("one_pass", one_pass._one_pass_kernel), ("two_pass", two_pass._statistics_kernel)):
        r = turbo_gmm.fit(X, (w, m, v), 4, algorithm=algorithm, precision="fp64")
        (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 4)
        np.testing.assert_allclose(as_np(r.log_likelihoods), rlls, rtol=1e-10)
        np.testing.assert_allclose(as_np(r.variances), rv, rtol=1e-10)
        compiled = kernel.device_caches[X.device.index or 0][0].values()
        assert any(re.search(r"mma\.sync\.aligned\.m\d+n\d+k\d+\S*\.f64", c.asm["ptx"]) for c in compiled)
