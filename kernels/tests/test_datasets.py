"""Seeded data and shared init: same seed, same bits; another seed, other data."""
import numpy as np
import pytest
import torch

from turbo_gmm.datasets import generating_mixture, make_dataset, shared_init


def test_same_seed_gives_identical_data_and_init():
    a, b = make_dataset(1023, 7, 5, 0), make_dataset(1023, 7, 5, 0)
    assert torch.equal(a.X, b.X) and a.checksum == b.checksum
    ia, ib = shared_init(a.X, 7, 0), shared_init(b.X, 7, 0)
    for f in ("weights", "means", "variances"):
        assert np.array_equal(getattr(ia, f), getattr(ib, f))


def test_other_seed_gives_other_data_and_init():
    a, b = make_dataset(1023, 7, 5, 0), make_dataset(1023, 7, 5, 1)
    assert not torch.equal(a.X, b.X) and a.checksum != b.checksum
    assert not np.array_equal(shared_init(a.X, 7, 0).means, shared_init(b.X, 7, 1).means)


def test_checksum_is_the_float64_moments_of_X():
    ds = make_dataset(1023, 3, 33, 0)
    s1, s2 = (float(v) for v in ds.checksum.split("/"))
    X = ds.X.double()
    assert np.isclose(s1, float(X.sum()), rtol=1e-8, atol=1e-6) and np.isclose(s2, float((X * X).sum()), rtol=1e-8)


def test_X_is_centered_float32_and_follows_its_mixture():
    N, K, d = 50_000, 3, 5
    X = make_dataset(N, K, d, 0).X
    assert X.dtype == torch.float32 and X.is_contiguous() and X.shape == (N, d)
    assert torch.allclose(X.double().mean(0), torch.zeros(d, dtype=torch.float64), atol=1e-6)
    w, mu, var = generating_mixture(K, d, 0)
    mean = (w[:, None] * mu).sum(0)
    second = (w[:, None] * (var + mu**2)).sum(0) - mean**2  # mixture variance per dimension
    assert torch.allclose(X.double().var(0), second, rtol=0.05)


def test_chunked_generation_is_prefix_stable():
    """Rows do not depend on N (counter-based RNG), up to the centering shift."""
    a, b = make_dataset(1023, 7, 5, 0).X.double(), make_dataset(2047, 7, 5, 0).X.double()
    shift = (a - b[:1023])
    assert torch.allclose(shift, shift[:1].expand_as(shift), atol=1e-5)


def test_shared_init_is_distinct_rows_uniform_weights_data_variance():
    X = make_dataset(1023, 7, 5, 0).X
    init = shared_init(X, 7, 0)
    assert np.allclose(init.weights, 1 / 7) and init.weights.dtype == np.float32
    rows = {tuple(r) for r in X.numpy()}
    assert all(tuple(m) in rows for m in init.means) and len({tuple(m) for m in init.means}) == 7
    assert np.allclose(init.variances, X.double().var(0, unbiased=False).numpy()[None], rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: compares GPU-generated X with the CPU's")
def test_gpu_and_cpu_generate_the_same_data():
    a, b = make_dataset(4099, 7, 33, 0, "cpu"), make_dataset(4099, 7, 33, 0, "cuda")
    assert torch.allclose(a.X, b.X.cpu(), rtol=0, atol=1e-5)
    assert np.allclose(shared_init(a.X, 7, 0).means, shared_init(b.X, 7, 0).means, rtol=0, atol=1e-5)
