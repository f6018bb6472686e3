"""Shared fixtures: the device the kernels run on and a statistics runner."""
import numpy as np
import pytest
import torch

from harness.data import make_dataset, shared_init
from kernels.launch import LaunchConfig
from kernels.lift import lift, pow2_at_least_16
from kernels.one_pass import one_pass_statistics
from kernels.two_pass import two_pass_statistics

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
PRECISIONS = ["ieee", "tf32x3"]
ALGORITHMS = ["one_pass", "two_pass"]


def problem(N, K, d, seed=0):
    """Seeded data and a perturbed shared init (so responsibilities are not trivial)."""
    X = make_dataset(N, min(K, N), d, seed, DEVICE).X
    Kd = min(K, N)
    init = shared_init(X, Kd, seed)
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 2.0, (K, d)).astype(np.float32)
    means[:Kd] = init.means
    var = (np.maximum(init.variances[0], 0.5) * rng.uniform(0.5, 2.0, (K, d))).astype(np.float32)
    w = rng.uniform(0.5, 1.5, K)
    return X, (w / w.sum()).astype(np.float32), means, var


def kernel_statistics(algorithm, X, weights, means, variances, precision, cfg=None):
    """(n, s, u, ell) in float64 NumPy from one kernel E-step on uncentered X."""
    K, d = means.shape
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    t = [torch.as_tensor(a, device=X.device) for a in (weights, means, variances)]
    W, b = lift(*t, k_pad, d_pad)
    center = torch.zeros(d_pad, dtype=torch.float32, device=X.device)
    cfg = cfg or LaunchConfig(block_n=32, block_k=16)
    if algorithm == "one_pass":
        n, su, ll = one_pass_statistics(X, center, W, b, cfg, precision)
    else:
        n, su, ll = two_pass_statistics(X, center, W, b, K, cfg, precision)
    n, su = n.cpu().numpy(), su.cpu().numpy()
    return n[:K], su[:K, :d], su[:K, d_pad : d_pad + d], float(ll.cpu()[0]), (n[K:], su[K:])


def assert_close_rel(got, want, rtol, what, scale=None):
    """max |got - want| <= rtol * scale; scale defaults to max |want|. Sums that
    cancel (s of centered data) pass the scale of their terms instead."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want).max() if scale is None else scale, 1e-300)
    err = np.abs(got - want).max() / scale
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    assert err <= rtol, f"{what}: max error {err:.3g} relative to {scale:.3g}, allowed {rtol:g}"


def assert_statistics_close(got, want, X, rtol):
    """(n, s, u) against a reference, each relative to the size of its terms:
    N for n, N*max|x| for s, N*max|x|^2 for u."""
    N, xmax = X.shape[0], float(np.abs(np.asarray(X)).max())
    for g, w, scale, what in zip(got, want, (N, N * xmax, N * xmax**2), "nsu"):
        assert_close_rel(g, w, rtol, what, scale)


@pytest.fixture(params=PRECISIONS)
def precision(request):
    return request.param
