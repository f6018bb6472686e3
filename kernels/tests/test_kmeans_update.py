"""Lloyd's center update by a sorted segment reduction (turbo_gmm.init.kmeans_update.SegmentSums) against float64
index_add: every level of the reduction (chunks of a few rows here, so a cluster spans many chunks and the pieces
are reduced two and three times), empty clusters, weights, one label, fewer rows than a tile; the same labels give
the same bits; row order changes the sums only by float64 rounding. Through the Assigner, its sums are the one-hot
path's."""
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turbo_gmm.init.kmeans_assign import Assigner
from turbo_gmm.init.kmeans_update import SegmentSums

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
pytestmark = pytest.mark.skipif(not INTERPRETED and not torch.cuda.is_available(),
                                reason="the fused kernels need CUDA or TRITON_INTERPRET=1")
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"


def reference(X, labels, K, weight=None):
    w = torch.ones(X.shape[0], dtype=torch.float64) if weight is None else weight.double().cpu()
    lab = labels.cpu()
    sums = torch.zeros(K, X.shape[1], dtype=torch.float64).index_add_(0, lab, X.double().cpu() * w[:, None])
    return sums, torch.zeros(K, dtype=torch.float64).index_add_(0, lab, w)


def check(X, labels, K, weight=None, **chunking):
    seg = SegmentSums(X.to(DEVICE), K, None if weight is None else weight.to(DEVICE), **chunking)
    sums, counts = seg(labels.to(DEVICE))
    want_sums, want_counts = reference(X, labels, K, weight)
    scale = float((X.double().abs().max() * want_counts.max()).clamp_min(1.0))
    assert float((sums.cpu() - want_sums).abs().max()) <= 1e-13 * scale
    assert float((counts.cpu() - want_counts).abs().max()) <= 1e-13 * float(want_counts.max().clamp_min(1.0))
    return seg, sums, counts


@pytest.mark.parametrize("N,K,d,block,tiles,levels", [
    (1000, 7, 5, 16, 2, 3),  # clusters of ~140 rows over chunks of 32: pieces reduced twice more
    (1000, 300, 3, 16, 2, 3),  # most clusters inside one chunk, some split by a chunk's edge
    (37, 4, 2, 16, 2, 2),
    (9, 3, 4, 16, 2, 1),  # fewer rows than a tile: one chunk, every segment complete
    (2100, 2, 33, 16, 4, 3),  # d past a power of two; two clusters spanning ~30 chunks each
])
@pytest.mark.parametrize("weighted", [False, True])
def test_sums_and_counts_are_float64_index_add(N, K, d, block, tiles, levels, weighted):
    g = torch.Generator().manual_seed(N + K)
    X = torch.randn(N, d, generator=g) * 3.0 + 10.0
    labels = torch.randint(0, K, (N,), generator=g)
    if K > 3:
        labels[labels == 3] = 2  # an empty cluster
    weight = torch.rand(N, generator=g) + 0.1 if weighted else None
    seg, sums, counts = check(X, labels, K, weight, block=block, tiles=tiles)
    assert len(seg.levels) == levels
    if K > 3:
        assert float(counts[3]) == 0.0 and float(sums[3].abs().max()) == 0.0


def test_one_label_and_the_default_chunks():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(5000, 8, generator=g)
    check(X, torch.full((5000,), 4, dtype=torch.int64), 6, block=16, tiles=2)
    check(X, torch.randint(0, 6, (5000,), generator=g), 6)  # chunks of BLOCK_ROWS x CHUNK_TILES: two here


def test_same_labels_same_bits_and_row_order_only_rounds():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(800, 6, generator=g) * 100.0
    labels = torch.randint(0, 5, (800,), generator=g)
    seg = SegmentSums(X.to(DEVICE), 5, block=16, tiles=2)
    first = [t.clone() for t in seg(labels.to(DEVICE))]
    again = seg(labels.to(DEVICE))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    perm = torch.randperm(800, generator=g)
    shuffled = SegmentSums(X[perm].contiguous().to(DEVICE), 5, block=16, tiles=2)(labels[perm].to(DEVICE))
    np.testing.assert_allclose(shuffled[0].cpu().numpy(), first[0].cpu().numpy(), rtol=1e-13, atol=1e-10)
    np.testing.assert_array_equal(shuffled[1].cpu().numpy(), first[1].cpu().numpy())


@settings(max_examples=12, deadline=None)
@given(N=st.integers(1, 300), K=st.integers(1, 40), d=st.integers(1, 9), block=st.sampled_from([16, 32]),
       tiles=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_any_labelling(N, K, d, block, tiles, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N, d, generator=g)
    labels = torch.randint(0, K, (N,), generator=g)
    check(X, labels, K, block=block, tiles=tiles)


@pytest.mark.parametrize("weighted", [False, True])
def test_assigner_sorted_update_is_the_onehot_update(weighted):
    g = torch.Generator().manual_seed(3)
    X = (torch.randn(1200, 7, generator=g) * 2.0 + 5.0).to(DEVICE)
    centers = X[:11].double().clone()
    w = (torch.rand(1200, generator=g) + 0.5).to(DEVICE) if weighted else None
    out = {}
    for update in ("onehot", "sorted"):
        labels = torch.full((1200,), -1, dtype=torch.int64, device=DEVICE)
        assign = Assigner(X, X.double().mean(0), 11, sample_weight=w, update=update)
        out[update] = (*assign(centers, labels), labels)
    np.testing.assert_array_equal(out["sorted"][3].cpu().numpy(), out["onehot"][3].cpu().numpy())
    assert int(out["sorted"][2]) == int(out["onehot"][2]) == 1200
    np.testing.assert_allclose(out["sorted"][1].cpu().numpy(), out["onehot"][1].cpu().numpy(), rtol=1e-6)
    np.testing.assert_allclose(out["sorted"][0].cpu().numpy(), out["onehot"][0].cpu().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="update must be one of"):
        Assigner(X, X.double().mean(0), 11, update="scatter")
