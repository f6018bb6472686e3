"""The M-step kernel against the torch M-step (kernels/diag/mstep.py): same float64 arithmetic."""
import pytest
import torch

from turbo_gmm.diag.mstep import mstep
from turbo_gmm.diag.mstep_kernel import MSTEP_ILL_DEFINED, ESTEP_NOT_FINITE, NO_FAILURE, decode_failure, mstep_into
from turbo_gmm.tests.conftest import DEVICE


@pytest.mark.parametrize("K,d", [(1, 3), (7, 5), (40, 16), (3, 33)])
def test_mstep_kernel_matches_the_torch_mstep(K, d):
    g = torch.Generator().manual_seed(K + d)
    f64 = dict(dtype=torch.float64)
    k_pad, d_pad = max(16, K), 16 if d <= 16 else 64
    n = torch.rand(k_pad, generator=g, **f64) * 50
    n[K:] = 0.0
    n[0] = 0.0  # an empty component: the n_k + 10 eps guard
    su = torch.randn(k_pad, 2 * d_pad, generator=g, **f64)
    su[:, d_pad:] = su[:, d_pad:].abs() * 5
    su[min(1, K - 1), d_pad] = -3.0  # a negative spread: floored and counted
    center = torch.randn(d, generator=g, **f64)
    want = mstep(n, su, 1000, K, d, center, 1e-6)
    on = lambda t: t.to(DEVICE)  # noqa: E731
    w, m, v = (on(torch.full(s, 7.0, **f64)) for s in ((K,), (K, d), (K, d)))
    ll_out, floored = on(torch.zeros(1, **f64)), on(torch.full((1,), 5, dtype=torch.int64))
    failure = on(torch.full((1,), NO_FAILURE, dtype=torch.int64))
    mstep_into(on(n), on(su), on(torch.tensor([-12.5], **f64)), 1000, on(center), 1e-6, w, m, v, ll_out, floored,
               failure, 3)
    for got, exp in zip((w, m, v), want[:3]):
        assert torch.equal(got.cpu(), exp)
    assert int(floored) == 5 + int(want[3]) and int(want[3]) > 0
    assert float(ll_out) == -12.5
    assert int(failure) == NO_FAILURE


def test_mstep_kernel_records_the_first_failure():
    """reg_covar = 0 and an empty component (zero spread) is scikit-learn's ill-defined covariance; a
    non-finite ell is the E-step's failure; the smallest (earliest) code is kept."""
    f64 = dict(dtype=torch.float64, device=DEVICE)
    K, d, k_pad, d_pad = 3, 2, 16, 16
    n = torch.zeros(k_pad, **f64)
    n[:K] = torch.tensor([4.0, 0.0, 5.0], **f64)
    su = torch.zeros(k_pad, 2 * d_pad, **f64)
    su[:K, :d] = 1.0
    su[:K, d_pad : d_pad + d] = 3.0
    su[1] = 0.0  # no points: mean 0, spread 0
    params = [torch.empty(s, **f64) for s in ((K,), (K, d), (K, d))]
    floored, failure = (torch.zeros(1, dtype=torch.int64, device=DEVICE) for _ in range(2))
    failure.fill_(NO_FAILURE)
    center = torch.zeros(d, **f64)
    mstep_into(n, su, torch.tensor([1.0], **f64), 10, center, 1e-6, *params, torch.empty(1, **f64), floored, failure, 0)
    assert int(failure) == NO_FAILURE  # reg_covar > 0 keeps the empty component's variance positive
    mstep_into(n, su, torch.tensor([1.0], **f64), 10, center, 0.0, *params, torch.empty(1, **f64), floored, failure, 4)
    assert decode_failure(int(failure)) == (4, MSTEP_ILL_DEFINED)
    mstep_into(n, su, torch.tensor([float("nan")], **f64), 10, center, 1e-6, *params, torch.empty(1, **f64), floored,
               failure, 2)
    assert decode_failure(int(failure)) == (2, ESTEP_NOT_FINITE)
    mstep_into(n, su * float("nan"), torch.tensor([1.0], **f64), 10, center, 1e-6, *params, torch.empty(1, **f64),
               floored, failure, 7)
    assert decode_failure(int(failure)) == (2, ESTEP_NOT_FINITE)  # a later failure does not replace the first
