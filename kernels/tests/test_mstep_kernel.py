"""The M-step kernel against the torch M-step (kernels/mstep.py): same float64 arithmetic."""
import pytest
import torch

from kernels.mstep import mstep
from kernels.mstep_kernel import mstep_into
from kernels.tests.conftest import DEVICE


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
    mstep_into(on(n), on(su), on(torch.tensor([-12.5], **f64)), 1000, on(center), 1e-6, w, m, v, ll_out, floored)
    for got, exp in zip((w, m, v), want[:3]):
        assert torch.equal(got.cpu(), exp)
    assert int(floored) == 5 + int(want[3]) and int(want[3]) > 0
    assert float(ll_out) == -12.5
