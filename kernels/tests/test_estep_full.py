"""kernels/full/estep.py and kernels/tied/estep.py: the full and tied block statistics of both backends against mpmath and float64 NumPy,
summed over blocks, and the data moments of the tied M-step."""
import numpy as np
import pytest
import torch

from turbo_gmm.full import reference as rf
from turbo_gmm.full.estep import BlockStatistics, log_responsibilities
from turbo_gmm.tied.estep import BlockStatistics as TiedBlockStatistics, centered_moments
from turbo_gmm.tests.conftest import DEVICE
from turbo_gmm.tests.test_full import full_problem, mp_statistics

BACKENDS = ["torch", "triton"]
TOLERANCE = {"torch": 1e-12, "triton": 2e-5}  # float64 ops; float32 kernels (the interpreter's plain float32)


def _t(*arrays):
    return [torch.as_tensor(np.asarray(a, np.float64)) for a in arrays]


def _on(backend, a):
    """An array as a tensor where the backend reads it: the kernels' device for "triton" (CUDA on a GPU), the
    host for the float64 torch ops."""
    return torch.as_tensor(a, device=DEVICE if backend == "triton" else "cpu")


def _tb(backend, *arrays):
    return [_on(backend, t) for t in _t(*arrays)]


def _close(got, want, rel, name):
    got, want = (a.detach().cpu().double().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, np.float64)
                 for a in (got, want))
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-300)
    assert err <= rel, f"{name}: {err:.3g} > {rel:.3g}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_weighted_full_statistics_match_mpmath(backend):
    """11 weighted rows, 3 components in 3 dimensions far from zero (offset 5): n, s, M2 about the column mean and
    ell against 40 digits (mpmath about zero, shifted exactly in float64 afterwards)."""
    X, w, m, U = full_problem(11, 3, 3, seed=5)
    X = (X + 5.0).astype(np.float32)
    m = m + 5.0
    sw = np.random.default_rng(3).uniform(0.0, 3.0, 11).astype(np.float32)
    c = X.astype(np.float64).mean(0)
    rn, rs, rM2, rll = mp_statistics(X, w, m, U, sw)
    block = BlockStatistics(3, 3, _on(backend, c), backend)
    st = block(_on(backend, X), *_tb(backend, w, m, U), _on(backend, sw))
    want_s = rs - rn[:, None] * c
    want_M2 = rM2 - rs[:, :, None] * c - c[:, None] * rs[:, None, :] + rn[:, None, None] * np.outer(c, c)
    tol = TOLERANCE[backend]
    _close(st.n, rn, tol, "n")
    _close(st.s, want_s, tol * 10, "s")  # s about the mean cancels: measured against its own size
    _close(st.M2, want_M2, tol * 10, "M2")
    assert float(st.ll) == pytest.approx(rll, rel=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tied_statistics_are_full_ones_with_a_shared_factor(backend):
    """Tied's n, s and ell equal the full statistics' with U_k = U for every k (the float64 NumPy oracle)."""
    X, w, m, U = full_problem(301, 4, 5, seed=8)
    sw = np.random.default_rng(4).integers(0, 3, 301).astype(np.float32)
    c = X.astype(np.float64).mean(0)
    block = TiedBlockStatistics(4, 5, _on(backend, c), backend)
    st = block(_on(backend, X), *_tb(backend, w, m, U[0]), _on(backend, sw))
    rn, rs, rll = rf.estep_tied(X, w, m, U[0], sw)
    assert st.M2 is None
    _close(st.n, rn, TOLERANCE[backend], "n")
    _close(st.s + st.n[:, None] * _on(backend, c), rs, TOLERANCE[backend], "s")
    assert float(st.ll) == pytest.approx(rll, rel=TOLERANCE[backend])


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_sums_are_the_statistics_of_all_rows(backend):
    """Blocks of 100, 100 and 23 rows summed equal one call on the 223 rows (what streaming relies on)."""
    X, w, m, U = full_problem(223, 3, 4, seed=9)
    c = _on(backend, X.astype(np.float64).mean(0))
    params = _tb(backend, w, m, U)
    block = BlockStatistics(3, 4, c, backend)
    whole = block(_on(backend, X), *params)
    total = None
    for r0 in (0, 100, 200):
        part = block(_on(backend, np.ascontiguousarray(X[r0 : r0 + 100])), *params)
        total = part if total is None else total.__iadd__(part)
    for name in ("n", "s", "M2", "ll"):
        _close(getattr(total, name), getattr(whole, name), TOLERANCE[backend], name)


def test_centered_moments_are_the_weighted_scatter_and_sum():
    X, _, _, _ = full_problem(500, 2, 6, seed=10)
    sw = np.random.default_rng(5).uniform(0, 2, 500)
    c = np.random.default_rng(6).normal(size=6)
    scatter, first = centered_moments(torch.from_numpy(X), torch.from_numpy(sw), torch.as_tensor(c))
    xc = X.astype(np.float64) - c
    np.testing.assert_allclose(scatter.numpy(), (xc * sw[:, None]).T @ xc, rtol=1e-12)
    np.testing.assert_allclose(first.numpy(), sw @ xc, rtol=1e-12)


def test_log_responsibilities_are_the_float64_oracle():
    X, w, m, U = full_problem(97, 5, 4, seed=11)
    c = X.astype(np.float64).mean(0)
    lr, L = log_responsibilities(*_t(X - c, w, m - c, U))
    S = rf.log_prob_full(X, w, m, U)
    want_L = np.logaddexp.reduce(S, axis=1)
    np.testing.assert_allclose(L.numpy(), want_L, rtol=1e-12)
    np.testing.assert_allclose(lr.numpy(), S - want_L[:, None], rtol=1e-10, atol=1e-10)

