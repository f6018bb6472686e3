"""The fused Lloyd assignment (turbo_gmm.init.kmeans_assign.Assigner) against float64 distances.

Its scores are tensor-core products (TF32, or tf32x3); every row whose two best scores lie within the products'
error bound is rescored in float64, so its labels must be exactly the nearest centers by float64 distances (ties
to the lower index), whatever the precision. The single-TF32 operands are rounded in the kernel, so the
interpreter's float32 products are the GPU's and the bound is exercised here too."""
import os

import numpy as np
import pytest
import torch

from turbo_gmm.init.kmeans_assign import ASSIGN_PRECISIONS, Assigner, score_slack
from turbo_gmm.tf32x3 import TF32_HALF_UNIT, TF32_MASK

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
pytestmark = pytest.mark.skipif(not INTERPRETED and not torch.cuda.is_available(),
                                reason="the fused kernels need CUDA or TRITON_INTERPRET=1")
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"


def nearest(X: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Float64 nearest centers in the direct form, ties to the lower index (NumPy's argmin)."""
    d2 = (X.double()[:, None, :] - centers.double()[None]).square().sum(2)
    return torch.from_numpy(d2.cpu().numpy().argmin(1))


def tied_problem(N: int, d: int, K: int, offset: float, seed: int):
    """Points and centers with every kind of near-tie: rows on the bisector of two centers (to float32 rounding),
    duplicated centers (exact ties), three centers equidistant from a row (a crowded tie; past K = 64 in three
    blocks of the kernel's centers, so the running best three are merged across blocks), offset data."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, d, generator=g) * 3.0 + offset
    centers = X[torch.randperm(N, generator=g)[:K]].double()
    centers[1] = centers[0]  # exact ties
    mid = (centers[2] + centers[3]) / 2
    X[:40] = (mid + 1e-6 * torch.randn(40, d, generator=g, dtype=torch.float64)).float()
    e = torch.zeros(d, dtype=torch.float64)
    e[0] = 1.0
    crowd = (4, 70, 140) if K > 140 else (4, 5, 6)
    for k, point in zip(crowd, (X[40].double() + 2 * e, X[40].double() - 2 * e, X[40].double() + 2 * e.roll(1))):
        centers[k] = point
    return X, centers


@pytest.mark.parametrize("precision", ASSIGN_PRECISIONS)
@pytest.mark.parametrize("N,d,K,offset", [(1500, 5, 9, 0.0), (1100, 33, 40, 100.0), (700, 64, 17, -3.0),
                                          (900, 5, 150, 0.0)])
def test_labels_are_the_float64_nearest_centers(precision, N, d, K, offset):
    X, centers = tied_problem(N, d, K, offset, seed=N + K)
    assign = Assigner(X.to(DEVICE), X.double().mean(0).to(DEVICE), K, precision)
    labels = torch.full((N,), -1, dtype=torch.int64, device=DEVICE)
    sums, counts, changed = assign(centers.to(DEVICE), labels)
    want = nearest(X, centers)
    np.testing.assert_array_equal(labels.cpu().numpy(), want.numpy())
    assert int(changed) == N
    np.testing.assert_array_equal(counts.cpu().numpy(), np.bincount(want.numpy(), minlength=K))
    ref = torch.zeros(K, d, dtype=torch.float64).index_add_(0, want, X.double())
    scale = X.double().abs().max() * counts.max().cpu()
    assert float((sums.cpu() - ref).abs().max()) <= 1e-6 * float(scale)
    _, _, again = assign(centers.to(DEVICE), labels, update=False)
    assert int(again) == 0


def test_weighted_sums_and_counts():
    X, centers = tied_problem(900, 7, 11, 5.0, seed=3)
    w = torch.rand(900, generator=torch.Generator().manual_seed(1), dtype=torch.float64).float() * 4
    assign = Assigner(X.to(DEVICE), X.double().mean(0).to(DEVICE), 11, "tf32", sample_weight=w.to(DEVICE))
    labels = torch.zeros(900, dtype=torch.int64, device=DEVICE)
    sums, counts, _ = assign(centers.to(DEVICE), labels)
    want = nearest(X, centers)
    np.testing.assert_array_equal(labels.cpu().numpy(), want.numpy())
    ref_n = torch.zeros(11, dtype=torch.float64).index_add_(0, want, w.double())
    ref_s = torch.zeros(11, 7, dtype=torch.float64).index_add_(0, want, X.double() * w.double()[:, None])
    np.testing.assert_allclose(counts.cpu().numpy(), ref_n.numpy(), rtol=1e-6)
    np.testing.assert_allclose(sums.cpu().numpy(), ref_s.numpy(), rtol=1e-6, atol=1e-6 * float(ref_s.abs().max()))


def _tf32(a: torch.Tensor) -> torch.Tensor:
    return ((a.view(torch.int32) + TF32_HALF_UNIT.value) & TF32_MASK.value).view(torch.float32)


@pytest.mark.parametrize("d", [3, 32, 100])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_score_slack_bounds_single_tf32_scores(d, offset):
    """The kernel's single-TF32 score (x - c and -2 (mu - c) in float32, both rounded to TF32, float32 products and
    sums, the float32 bias added) is within half the slack of ||x - mu||^2 - ||x - c||^2 in float64, row by row:
    the bound the rescoring relies on, checked here outside the kernel."""
    g = torch.Generator().manual_seed(d)
    X = (torch.randn(4000, d, generator=g) * torch.rand(d, generator=g) * 10 + offset).float()
    mu = X[torch.randperm(4000, generator=g)[:50]].double() + torch.randn(50, d, generator=g, dtype=torch.float64)
    c = X.double().mean(0).float()
    y = mu - c.double()
    xc = X - c
    computed = (_tf32(xc) @ _tf32((-2.0 * y).float()).T) + (y * y).sum(1).float()
    exact = (X.double()[:, None] - mu[None]).square().sum(2) - (X.double() - c.double()).square().sum(1)[:, None]
    radius_coef, square_coef = score_slack("tf32", max(16, 1 << (d - 1).bit_length()), float(y.norm(dim=1).max()))
    half = radius_coef * xc.double().norm(dim=1) + square_coef
    err = (computed.double() - exact).abs().max(1).values
    assert bool((err <= half).all()), float((err / half).max())
    assert float((err / half).max()) > 1e-3  # the bound is not vacuous: the error reaches a visible part of it
