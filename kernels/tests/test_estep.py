"""E-step statistics of a row block (Triton kernels and the torch fallback) against
the float64 oracle, their sums, and the spherical M-step."""
import numpy as np
import pytest
import torch

from turbo_gmm.diag import reference as ref
from turbo_gmm.diag.estep import BlockStatistics, Statistics, mstep_diag, mstep_spherical
from turbo_gmm.tests.conftest import ALGORITHMS, DEVICE, assert_statistics_close, problem


def _about(center, n, s, u):
    """Oracle statistics (about 0) moved to ``center``: s - n c, u - 2 c s + n c^2."""
    return s - n[:, None] * center, u - 2 * center * s + n[:, None] * center**2


def _params(w, m, v, device):
    return [torch.as_tensor(a, device=device).double() for a in (w, m, v)]


@pytest.mark.parametrize("backend, algorithm", [("triton", a) for a in ALGORITHMS] + [("torch", "auto")])
def test_block_statistics_follow_the_oracle(backend, algorithm, precision):
    X, w, m, v = problem(1023, 7, 5, seed=2)
    Xh = X.cpu().numpy().astype(np.float64)
    center = np.array([0.5, -1.0, 2.0, 0.0, 3.0])
    device = X.device if backend == "triton" else torch.device("cpu")
    block = BlockStatistics(7, 5, torch.as_tensor(center, device=device), backend, algorithm, precision)
    st = block(X.to(device), *_params(w, m, v, device))
    n, s, u, ll = ref.estep(Xh, w, m, v)
    s, u = _about(center, n, s, u)
    rtol = 1e-12 if backend == "torch" else 1e-5
    assert_statistics_close([t.cpu().numpy() for t in (st.n, st.s, st.u)], (n, s, u), Xh - center, rtol)
    assert float(st.ll) == pytest.approx(ll, rel=rtol) and st.rows == 1023


def test_statistics_of_blocks_sum_to_the_whole():
    X, w, m, v = problem(1023, 3, 33, seed=3)
    c = X.double().mean(0)
    block = BlockStatistics(3, 33, c.cpu(), "torch")
    p = _params(w, m, v, "cpu")
    whole = block(X.cpu(), *p)
    parts = block(X[:400].cpu(), *p)
    parts += block(X[400:].cpu(), *p)
    assert parts.rows == 1023
    back = Statistics.from_flat(parts.flat(), 3, 33)
    for a, b in ((back.n, whole.n), (back.s, whole.s), (back.u, whole.u), (back.ll, whole.ll)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-9)


def test_spherical_variance_is_the_mean_squared_deviation_over_features():
    """sigma_k^2 = sum_i g_ik |x_i - mu_k|^2 / (n_k d) + reg, computed directly from
    the responsibilities (not from n, s, u)."""
    X, w, m, v = problem(1023, 7, 5, seed=4)
    Xh = X.cpu().numpy().astype(np.float64)
    c = torch.as_tensor(Xh.mean(0))
    st = BlockStatistics(7, 5, c, "torch")(torch.as_tensor(Xh), *_params(w, m, v, "cpu"))
    weights, means, var, floored = mstep_spherical(st, 1023, c, 1e-3)
    S = ref.log_prob(Xh, w, m, v)
    G = np.exp(S - ref.logsumexp_rows(S)[:, None])
    mu = G.T @ Xh / G.sum(0)[:, None]
    direct = (G * ((Xh[:, None, :] - mu[None]) ** 2).sum(-1)).sum(0) / (G.sum(0) * 5) + 1e-3
    np.testing.assert_allclose(var.numpy(), direct, rtol=1e-10)
    np.testing.assert_allclose(means.numpy(), mu, rtol=1e-10, atol=1e-12)
    assert var.shape == (7,) and int(floored) == 0
    w_d, mu_d, var_d, _ = mstep_diag(st, 1023, c, 1e-3)
    np.testing.assert_allclose(var.numpy(), var_d.numpy().mean(1), rtol=1e-14)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend must be one of"):
        BlockStatistics(3, 5, torch.zeros(5, device=DEVICE), "numpy")
