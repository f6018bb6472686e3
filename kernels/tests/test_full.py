"""Full-covariance kernels (kernels/full) against float64 NumPy EM, scikit-learn and mpmath.

Irregular sizes (N = 1023, d = 5 and 7, K = 3 and 7); both dataflows (per-component products, the
quadratic lift), both algorithms, both precisions. On a CPU the kernels run in the Triton
interpreter (plain float32 products); the GPU tests at the end check tf32x3 on the device.
"""
import mpmath
import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture
from sklearn.mixture._gaussian_mixture import (_compute_precision_cholesky, _estimate_gaussian_parameters,
                                               _estimate_log_gaussian_prob)

import turbo_gmm.full as kf
from turbo_gmm.full import reference as rf
from turbo_gmm.dispatch import full_algorithm as choose_algorithm, full_launch_config as default_config, parse_full_config
from turbo_gmm.launch import FullConfig
from turbo_gmm.tests.conftest import DEVICE, assert_close_rel

DATAFLOWS = ["products", "lift"]
ALGORITHMS = ["one_pass", "two_pass"]
SMALL_TILES = FullConfig(block_n=32, block_k=16)  # several row tiles and programs at N ~ 1000


def full_problem(N, K, d, seed=0):
    """Correlated clusters, means at K distinct rows, covariances sum of a random SPD and the identity."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(K, d, d)) / np.sqrt(d)
    centers = rng.normal(0.0, 3.0, (K, d))
    labels = rng.integers(0, K, N)
    X = centers[labels] + np.einsum("nd,nde->ne", rng.normal(size=(N, d)), A[labels])
    X = X.astype(np.float32)
    means = X[rng.choice(N, K, replace=False)].astype(np.float64)
    B = rng.normal(size=(K, d, d)) / np.sqrt(d)
    cov = B @ np.swapaxes(B, 1, 2) + np.eye(d)
    w = rng.uniform(0.5, 1.5, K)
    return X, w / w.sum(), means, rf.precisions_cholesky(cov)


def tensors(*arrays):
    return [torch.as_tensor(np.ascontiguousarray(a), device=DEVICE) for a in arrays]


def as_np(t):
    return t.detach().cpu().double().numpy()


def assert_full_statistics_close(got, want, X, rtol):
    """n, s, M2 each relative to the size of its terms: N, N max|x|, N max|x|^2 (of the centered data)."""
    N, xmax = X.shape[0], float(np.abs(X).max())
    for g, w, scale, what in zip(got, want, (N, N * xmax, N * xmax**2), ("n", "s", "M2")):
        assert_close_rel(as_np(g), w, rtol, what, scale)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N,K,d", [(1023, 7, 5), (1023, 3, 7)])
def test_statistics_match_float64_reference(N, K, d, algorithm, dataflow, precision):
    X, w, m, U = full_problem(N, K, d, seed=K + d)
    n, s, M2, ll, c = kf.estep_statistics(tensors(X)[0], *tensors(w, m, U), algorithm=algorithm, dataflow=dataflow,
                                          precision=precision, config=SMALL_TILES)
    rn, rs, rM2, rll = rf.estep_full(X, w, m, U, center=as_np(c))
    assert_full_statistics_close((n, s, M2), (rn, rs, rM2), X - as_np(c), 2e-6)
    assert abs(float(ll) - rll) <= 2e-6 * abs(rll), (float(ll), rll)


@pytest.mark.parametrize("K,d,want", [(32, 32, "one_pass"), (16, 64, "one_pass"), (32, 16, "one_pass"),
                                      (64, 16, "one_pass"), (128, 16, "two_pass"), (256, 16, "two_pass"),
                                      (128, 32, "two_pass"), (8, 128, "two_pass")])
def test_the_rule_takes_algorithm_3_past_the_slab_limit_and_where_the_one_pass_tiles_are_shorter(K, d, want):
    """One pass iff K_pad d_pad^2 <= 65536 and its row tiles are as tall as Algorithm 3's: at 1M_256_16 the one
    pass's 32-row tiles ran 33.6 ms/iter against Algorithm 3's 64-row 12.2 on the H200 (530add0)."""
    assert choose_algorithm(K, d) == want
    if want == "two_pass" and K * d * d <= 65536:
        assert default_config("one_pass", K, d).block_n < default_config("two_pass", K, d).block_n


@pytest.mark.parametrize("algorithm,K,d,dataflow,want", [
    ("one_pass", 32, 16, "products", 1), ("two_pass", 256, 16, "products", 1), ("one_pass", 16, 13, "products", 1),
    ("one_pass", 64, 16, "products", 0), ("one_pass", 32, 32, "products", 0), ("two_pass", 128, 32, "products", 0),
    ("one_pass", 128, 16, "products", 0), ("one_pass", 32, 16, "lift", 0)])
def test_weights_stay_resident_by_default_where_one_tile_s_fit_in_64_kb(algorithm, K, d, dataflow, want):
    """Resident weights by default where one component tile's take <= 64 KB of shared memory (d_pad 16 at
    block_k <= 32: the H200's 20M_32_16 and 1M_256_16 ran faster with them, d_pad 32 needed 311 KB); the one pass
    with several component tiles (K_pad 128) and the lift have none; an override of block_k moves the default."""
    assert default_config(algorithm, K, d, dataflow).resident_weights == want
    assert parse_full_config("block_n=32", algorithm, K, d, dataflow).resident_weights == want
    assert parse_full_config("block_k=16", "one_pass", 32, 16).resident_weights == 0  # two component tiles
    assert parse_full_config("resident_weights=0", "one_pass", 32, 16).resident_weights == 0


def test_padded_components_and_features_carry_no_mass():
    """K = 3 pads 13 components (sentinel score) and d = 5 pads 11 features: n sums to N, no NaN."""
    X, w, m, U = full_problem(300, 3, 5, seed=3)
    for dataflow in DATAFLOWS:
        n, s, M2, ll, _ = kf.estep_statistics(tensors(X)[0], *tensors(w, m, U), dataflow=dataflow)
        assert torch.isfinite(M2).all() and np.isfinite(float(ll))
        assert abs(float(n.sum()) - 300) <= 1e-4


def test_one_pass_with_several_component_tiles_matches_one_tile():
    """K = 37 in tiles of 16 (score tiles through the scratch, merged online) against one 64-wide tile."""
    X, w, m, U = full_problem(777, 37, 5, seed=9)
    args = tensors(X, w, m, U)
    for dataflow in DATAFLOWS:
        a = kf.estep_statistics(*args, algorithm="one_pass", dataflow=dataflow, precision="ieee",
                                config=FullConfig(block_n=32, block_k=16))
        b = kf.estep_statistics(*args, algorithm="one_pass", dataflow=dataflow, precision="ieee",
                                config=FullConfig(block_n=16, block_k=64, cols=32))
        assert_full_statistics_close(a[:3], [as_np(t) for t in b[:3]], X - as_np(a[4]), 1e-6)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("cols", [16, 64])
def test_resident_weights_give_the_statistics_of_reloaded_ones(algorithm, cols, precision):
    """FullConfig.resident_weights (the products' weights loaded once a program, over all its row tiles) against
    float64 EM and against weights reloaded every row tile, at one component per product (cols 16) and four
    (cols 64)."""
    X, w, m, U = full_problem(515, 7, 13, seed=21)
    args = tensors(X, w, m, U)
    got = [kf.estep_statistics(*args, algorithm=algorithm, dataflow="products", precision=precision,
                               config=FullConfig(block_n=32, block_k=16, cols=cols, resident_weights=r))
           for r in (0, 1)]
    c = as_np(got[1][4])
    rn, rs, rM2, rll = rf.estep_full(X, w, m, U, center=c)
    assert_full_statistics_close(got[1][:3], (rn, rs, rM2), X - c, 2e-6)
    assert abs(float(got[1][3]) - rll) <= 2e-6 * abs(rll)
    assert_full_statistics_close(got[1][:3], [as_np(t) for t in got[0][:3]], X - c, 1e-6)


def test_resident_weights_refuse_what_they_cannot_hold():
    """The one pass keeps resident weights for one component tile only, and the lift has none: a clear error."""
    X, w, m, U = full_problem(300, 37, 5, seed=4)
    args = tensors(X, w, m, U)
    with pytest.raises(ValueError, match="one component tile"):
        kf.estep_statistics(*args, algorithm="one_pass", config=FullConfig(block_k=16, resident_weights=1))
    with pytest.raises(ValueError, match="products dataflow"):
        kf.estep_statistics(*args, algorithm="two_pass", dataflow="lift", config=FullConfig(resident_weights=1))


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_log_likelihood_and_m_step_match_scikit_learn_helpers(dataflow):
    """ell from sklearn's _estimate_log_gaussian_prob and the M-step from its _estimate_gaussian_parameters
    and precisions Cholesky, all in float64 from the same parameters."""
    X, w, m, U = full_problem(1023, 7, 5, seed=11)
    r = kf.em_step(tensors(X)[0], *tensors(w, m, U), dataflow=dataflow)
    X64 = X.astype(np.float64)
    S = _estimate_log_gaussian_prob(X64, m, U, "full") + np.log(w)
    L = np.logaddexp.reduce(S, axis=1)
    assert float(r.log_likelihood) == pytest.approx(L.sum(), rel=1e-6)
    nk, means, cov = _estimate_gaussian_parameters(X64, np.exp(S - L[:, None]), 1e-6, "full")
    np.testing.assert_allclose(as_np(r.weights), nk / nk.sum(), rtol=1e-5)
    np.testing.assert_allclose(as_np(r.means), means, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as_np(r.covariances), cov, rtol=1e-4, atol=1e-5)
    # U = chol(Sigma)^-T amplifies the statistics' rounding by Sigma's conditioning (against U of scikit-learn's
    # covariances: 2.03e-4 relative on the H200 with 64-row tiles, 530add0), so U is held to scikit-learn's factor
    # of the kernel's own covariances, both float64: the M-step's Cholesky and inverse, exactly
    own = _compute_precision_cholesky(as_np(r.covariances), "full")
    assert_close_rel(as_np(r.precisions_cholesky), own, 1e-10, "precisions_cholesky")


def test_fit_agrees_with_scikit_learn_gaussian_mixture():
    """Four iterations from the same init as GaussianMixture(covariance_type="full"), by the products
    dataflow (the default): its whitened score y = (x - c) U - mu' U has no |x|^2-sized terms to cancel.
    The lift's (z^T Lambda z / 2 - z^T Lambda mu' + ...) cancel to eps32 |z|^2 lambda_max(Lambda) per score,
    which failed this check at tf32x3 on the H200 (2026-12-01); the lift is held to float64 EM below."""
    X, w, m, U = full_problem(1023, 3, 7, seed=5)
    precisions = U @ np.swapaxes(U, 1, 2)
    gm = GaussianMixture(3, covariance_type="full", max_iter=4, tol=0.0, reg_covar=1e-6, weights_init=w,
                         means_init=m, precisions_init=precisions)
    with pytest.warns(Warning):  # ConvergenceWarning: tol = 0 never converges
        gm.fit(X.astype(np.float64))
    r = kf.fit(tensors(X)[0], (w, m, U), 4, dataflow="products")
    assert r.dataflow == "products"
    np.testing.assert_allclose(as_np(r.weights), gm.weights_, rtol=1e-4)
    np.testing.assert_allclose(as_np(r.means), gm.means_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(as_np(r.covariances), gm.covariances_, rtol=1e-4, atol=1e-5)
    # the precision factor's last columns carry the conditional variances (~1e-4 here): float32 statistics' rounding
    # of M2 is amplified there (the H200 at 1c3b02c: 4.9e-4 relative in column 6), so the factor is checked as
    # scikit-learn's own Cholesky of our covariances, which were checked above against scikit-learn's
    np.testing.assert_allclose(as_np(r.precisions_cholesky),
                               _compute_precision_cholesky(as_np(r.covariances), "full"), rtol=1e-9, atol=1e-9)


U32 = 2.0**-24


def lift_error_constant(d: int) -> float:
    """The allowance on the quadratic lift's error in units of u32 times the terms it cancels: 2 sqrt(n) for its
    inner size n = d(d+1)/2 + d + 1 (a dot product's rounding grows with its length; Appendix C's diagonal lift,
    n = 2 d_pad, stays within 10). Measured under tf32x3 on the H200: 2.2 at d = 5 (n = 21), 11.4 at d = 24
    (n = 325), i.e. 0.48 and 0.63 sqrt(n)."""
    return 2.0 * (d * (d + 1) / 2 + d + 1) ** 0.5


def lift_cancellation(X, means, U, center):
    """Per row, max over components of the terms the quadratic lift cancels in the score:
    1/2 (sum_ij |z_i z_j Lambda_ij| + 2 sum_i |z_i (Lambda mu)_i| + |mu| Lambda |mu|), z = x - c, mu = m - c,
    Lambda = U U^T. The products dataflow forms L^T (x - mu) first and cancels nothing of the kind."""
    z, mu = np.abs(X - center), means - center
    lam = np.einsum("kij,klj->kil", U, U)
    terms = (np.einsum("ni,nj,kij->nk", z, z, np.abs(lam)) + 2 * z @ np.abs(np.einsum("kij,kj->ki", lam, mu)).T
             + np.einsum("ki,kij,kj->k", np.abs(mu), np.abs(lam), np.abs(mu))[None])
    return 0.5 * terms.max(1)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_fit_follows_float64_em(dataflow):
    X, w, m, U = full_problem(1023, 3, 5, seed=2)
    r = kf.fit(tensors(X)[0], (w, m, U), 5, dataflow=dataflow, algorithm="two_pass", config=SMALL_TILES)
    (rw, rm, rc, rU), rlls = rf.em_full(X, w, m, U, 5)
    assert r.dataflow == dataflow and r.algorithm == "two_pass"
    # the first ell to float32 rounding under products; the lift's score cancels terms of size |z|^2 Lambda, so its
    # first ell is held to the cancellation bound (tf32x3 on the H200 at 2dce113: 3.9e-3 off, 2.2 u32 times the
    # terms, 4.1e-7 relative); later ones drift as EM amplifies the statistics' rounding (~3e-6 at the 4th here)
    # (the H200 at 1c3b02c: the lift's 4th and 5th ell 2.4e-5 off, so the lift's later values get ten times the room)
    lift = dataflow == "lift"
    first_tol = (lift_error_constant(X.shape[1]) * U32 * lift_cancellation(X, m, U, X.astype(np.float64).mean(0)).sum()
                 if lift else 1e-7 * abs(rlls[0]))
    assert abs(float(r.log_likelihoods[0]) - rlls[0]) <= first_tol
    room = 10.0 if lift else 1.0
    np.testing.assert_allclose(as_np(r.log_likelihoods), rlls, rtol=1e-5 * room)
    np.testing.assert_allclose(as_np(r.weights), rw, rtol=1e-4 * room)
    np.testing.assert_allclose(as_np(r.covariances), rc, rtol=1e-4 * room, atol=1e-5 * room)
    assert abs(as_np(r.weights).sum() - 1.0) < 1e-12


def mp_statistics(X, w, m, U, sample_weight, digits=40):
    """n, s, M2, ell of (1)-(4) for a full-covariance mixture at ``digits`` digits."""
    with mpmath.workdps(digits):
        N, d = X.shape
        K = len(w)
        n = [mpmath.mpf(0)] * K
        s = [[mpmath.mpf(0)] * d for _ in range(K)]
        M2 = [[[mpmath.mpf(0)] * d for _ in range(d)] for _ in range(K)]
        ell = mpmath.mpf(0)
        for i in range(N):
            x = [mpmath.mpf(float(v)) for v in X[i]]
            S = []
            for k in range(K):
                y = [mpmath.fsum((x[a] - mpmath.mpf(m[k][a])) * mpmath.mpf(U[k][a][b]) for a in range(d))
                     for b in range(d)]
                logdet = mpmath.fsum(mpmath.log(mpmath.mpf(U[k][a][a])) for a in range(d))
                S.append(mpmath.log(mpmath.mpf(w[k])) + logdet - d * mpmath.log(2 * mpmath.pi) / 2
                         - mpmath.fsum(v * v for v in y) / 2)
            L = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in S))
            wi = mpmath.mpf(float(sample_weight[i]))
            ell += wi * L
            for k in range(K):
                g = wi * mpmath.exp(S[k] - L)
                n[k] += g
                for a in range(d):
                    s[k][a] += g * x[a]
                    for b in range(d):
                        M2[k][a][b] += g * x[a] * x[b]
        f = lambda v: np.array(v, dtype=np.float64)  # noqa: E731
        return f([float(v) for v in n]), f([[float(v) for v in r] for r in s]), \
            f([[[float(v) for v in r] for r in q] for q in M2]), float(ell)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_statistics_match_mpmath_on_a_tiny_case(dataflow, precision):
    """13 rows, 3 components in 3 dimensions, weighted rows: every sum at 40 digits (center 0, uncentered)."""
    X, w, m, U = full_problem(13, 3, 3, seed=7)
    sw = np.random.default_rng(1).uniform(0.0, 2.0, 13).astype(np.float32)
    n, s, M2, ll, _ = kf.estep_statistics(*tensors(X, w, m, U), sample_weight=tensors(sw)[0], dataflow=dataflow,
                                          precision=precision, center=torch.zeros(3, dtype=torch.float64))
    rn, rs, rM2, rll = mp_statistics(X, w, m, U, sw)
    assert_full_statistics_close((n, s, M2), (rn, rs, rM2), X, 2e-6)
    assert float(ll) == pytest.approx(rll, rel=1e-6)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_integer_sample_weights_equal_duplicated_rows(dataflow):
    X, w, m, U = full_problem(1023, 3, 5, seed=4)
    counts = np.random.default_rng(0).integers(0, 4, X.shape[0])
    weighted = kf.em_step(tensors(X)[0], *tensors(w, m, U), sample_weight=counts.astype(np.float32), dataflow=dataflow)
    repeated = kf.em_step(tensors(np.repeat(X, counts, axis=0))[0], *tensors(w, m, U), dataflow=dataflow)
    assert float(weighted.log_likelihood) == pytest.approx(float(repeated.log_likelihood), rel=1e-6)
    # relative to each array's scale (U is left out: it amplifies the float32 rounding of the statistics by the
    # covariances' conditioning, 2e-3 at a component with a 0.04 standard deviation here)
    for name in ("weights", "means", "covariances"):
        assert_close_rel(as_np(getattr(weighted, name)), as_np(getattr(repeated, name)), 1e-5, name)


def test_zero_sample_weights_equal_dropped_rows():
    X, w, m, U = full_problem(1023, 7, 5, seed=6)
    keep = np.random.default_rng(2).uniform(size=X.shape[0]) < 0.6
    weighted = kf.fit(tensors(X)[0], (w, m, U), 2, sample_weight=keep.astype(np.float32), algorithm="two_pass")
    dropped = kf.fit(tensors(X[keep])[0], (w, m, U), 2, algorithm="two_pass")
    np.testing.assert_allclose(as_np(weighted.log_likelihoods), as_np(dropped.log_likelihoods), rtol=1e-6)
    assert_close_rel(as_np(weighted.covariances), as_np(dropped.covariances), 5e-5, "covariances")
    assert_close_rel(as_np(weighted.means), as_np(dropped.means), 1e-5, "means")


def test_singular_covariance_raises_scikit_learns_error():
    """A component far from every row gets no responsibility (exp underflows to 0 in float32 and float64):
    its covariance is 0, singular at reg_covar = 0, and both fits raise scikit-learn's error."""
    X, w, m, U = full_problem(400, 3, 3, seed=8)
    m[2] = 1000.0
    for dataflow in DATAFLOWS:
        with pytest.raises(ValueError, match="ill-defined empirical covariance"):
            kf.em_step(tensors(X)[0], *tensors(w, m, U), reg_covar=0.0, dataflow=dataflow)
    with pytest.raises(ValueError, match="ill-defined empirical covariance"):
        kf.fit(tensors(X)[0], (w, m, U), 3, reg_covar=0.0, algorithm="two_pass")
    gm = GaussianMixture(3, covariance_type="full", reg_covar=0.0, max_iter=1, weights_init=w, means_init=m,
                         precisions_init=U @ np.swapaxes(U, 1, 2))
    with pytest.raises(ValueError, match="ill-defined empirical covariance"):  # scikit-learn agrees
        gm.fit(X.astype(np.float64))
    r = kf.em_step(tensors(X)[0], *tensors(w, m, U), reg_covar=1e-3)  # regularized: fits
    assert torch.isfinite(r.precisions_cholesky).all()


def test_bad_input_is_named():
    X, w, m, U = full_problem(100, 3, 4)
    Xt, wt, mt, Ut = tensors(X, w, m, U)
    with pytest.raises(ValueError, match="upper triangular"):
        kf.em_step(Xt, wt, mt, Ut.transpose(1, 2).contiguous() + torch.triu(torch.ones_like(Ut), 1))
    with pytest.raises(ValueError, match="precisions_cholesky"):
        kf.em_step(Xt, wt, mt, Ut[:, :3, :3])
    with pytest.raises(ValueError, match=">= 0"):
        kf.em_step(Xt, wt, mt, Ut, sample_weight=-np.ones(100, np.float32))
    with pytest.raises(ValueError, match="shape"):
        kf.em_step(Xt, wt, mt, Ut, sample_weight=np.ones(99, np.float32))
    with pytest.raises(ValueError, match="dataflow"):
        kf.em_step(Xt, wt, mt, Ut, dataflow="dense")
    with pytest.raises(ValueError, match="positive entry"):
        kf.em_step(Xt, wt, mt, Ut, sample_weight=np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="for full and tied covariances, got 'fp64'"):  # diag/spherical only
        kf.em_step(Xt, wt, mt, Ut, precision="fp64")


def test_precisions_cholesky_round_trip():
    _, _, _, U = full_problem(10, 4, 6)
    cov = kf.covariances_from_precisions_cholesky(torch.as_tensor(U))
    np.testing.assert_allclose(as_np(kf.precisions_cholesky(cov)), U, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="ill-defined"):
        kf.precisions_cholesky(-cov)


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("slab_dtype", [torch.float32, torch.float64])
def test_tf32x3_statistics_on_the_gpu(algorithm, dataflow, slab_dtype):
    """200 003 rows, K = 20, d = 24 compiled on the GPU: tf32x3 products are float32-accurate against float64;
    the lift is within its cancellation bound (a responsibility's relative error is its score's absolute error)."""
    X, w, m, U = full_problem(200_003, 20, 24, seed=12)
    cfg = FullConfig(slab_dtype=slab_dtype, block_k=32 if algorithm == "one_pass" else 16,
                     programs_per_sm=2 if algorithm == "one_pass" else 8)
    n, s, M2, ll, c = kf.estep_statistics(*tensors(X, w, m, U), algorithm=algorithm, dataflow=dataflow, config=cfg)
    rn, rs, rM2, rll = rf.estep_full(X, w, m, U, center=as_np(c), chunk=8192)
    rtol, ll_tol = 1e-5, 1e-6 * abs(rll)
    if dataflow == "lift":
        bound = lift_error_constant(X.shape[1]) * U32 * lift_cancellation(X, m, U, as_np(c))
        rtol, ll_tol = max(rtol, float(bound.mean())), max(ll_tol, float(bound.sum()))
    assert_full_statistics_close((n, s, M2), (rn, rs, rM2), X - as_np(c), rtol)
    assert abs(float(ll) - rll) <= ll_tol


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_resident_weights_on_the_gpu(algorithm):
    """resident_weights compiled on the GPU at d_pad = 16 (64 KB of weights in shared memory a program): tf32x3
    statistics float32-accurate against float64 and equal to the default's."""
    X, w, m, U = full_problem(200_003, 20, 13, seed=13)
    args = tensors(X, w, m, U)
    base = dict(block_k=32 if algorithm == "one_pass" else 16, programs_per_sm=2 if algorithm == "one_pass" else 8)
    got = [kf.estep_statistics(*args, algorithm=algorithm, config=FullConfig(**base, **kw))
           for kw in ({}, dict(resident_weights=1))]
    c = as_np(got[1][4])
    rn, rs, rM2, rll = rf.estep_full(X, w, m, U, center=c, chunk=8192)
    assert_full_statistics_close(got[1][:3], (rn, rs, rM2), X - c, 1e-5)
    assert abs(float(got[1][3]) - rll) <= 1e-6 * abs(rll)
    assert_full_statistics_close(got[1][:3], [as_np(t) for t in got[0][:3]], X - c, 1e-6)


@pytest.mark.gpu
@gpu
def test_graphed_fit_equals_eager_fit():
    """The replayed graph gives the eager loop's numbers at 1M rows, K = 16, d = 32 (its speed against
    materializing PyTorch is the full experiment's to measure, not a test's)."""
    X, w, m, U = full_problem(1_000_000, 16, 32, seed=13)
    Xt, wt, mt, Ut = tensors(X, w, m, U)
    graphed = kf.fit(Xt, (wt, mt, Ut), 3)
    eager = kf.fit(Xt, (wt, mt, Ut), 3, cuda_graph=False)
    assert graphed.graphed and not eager.graphed
    torch.testing.assert_close(graphed.covariances, eager.covariances, rtol=1e-6, atol=1e-9)
