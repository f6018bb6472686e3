"""The lift kernel against the torch lift (float64 then float32, or float64 kept under fp64) and its clearing
of the statistics."""
import numpy as np
import pytest
import torch

from turbo_gmm.diag.lift import SENTINEL, lift, pow2_at_least_16
from turbo_gmm.diag.lift_kernel import lift_into
from turbo_gmm.tests.conftest import DEVICE


@pytest.mark.parametrize("precision", ["tf32x3", "fp64"])
@pytest.mark.parametrize("K,d", [(1, 3), (7, 5), (40, 16), (3, 33), (130, 2)])
def test_lift_kernel_matches_the_torch_lift_and_clears_the_statistics(K, d, precision):
    g = torch.Generator().manual_seed(K * 100 + d)
    f64 = dict(dtype=torch.float64)
    w = torch.rand(K, generator=g, **f64) + 0.05
    w /= w.sum()
    means = (torch.randn(K, d, generator=g, **f64) * 4).float()  # float32 in: the kernel casts on load
    var = torch.rand(K, d, generator=g, **f64) * 3 + 1e-3
    center = torch.randn(d, generator=g, **f64)
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    W0, b0 = lift(w, means.double() - center, var, k_pad, d_pad, precision)
    assert W0.dtype == b0.dtype == (torch.float64 if precision == "fp64" else torch.float32)
    on = lambda t: t.to(DEVICE)  # noqa: E731
    W, b = on(torch.full_like(W0, 7.0)), on(torch.full_like(b0, 7.0))
    n, su, ll = (on(torch.ones(s, **f64)) for s in ((k_pad,), (k_pad, 2 * d_pad), (1,)))
    lift_into(on(w), on(means), on(var), on(center), W, b, n, su, ll)
    W, b = W.cpu(), b.cpu()
    assert torch.equal(W, W0)  # float64 products rounded once to W's dtype, as in lift()
    ulp = np.spacing(np.abs(b0[:K].numpy()))
    assert np.all(np.abs((b[:K] - b0[:K]).numpy()) <= 2 * ulp)  # float64 sums in another order
    assert torch.all(b[K:] == SENTINEL)
    assert not n.any() and not su.any() and not ll.any()
