"""Data-parallel EM's row split: every row on exactly one rank, and a rank's generated rows are
make_dataset's (before the global centering)."""
import torch

from turbo_gmm.datasets import generate_rows, make_dataset
from turbo_gmm.distributed import shard_bounds

N, K, D, SEED = 1023, 3, 33, 2


def test_shards_cover_the_rows_once():
    bounds = [shard_bounds(1023, r, 4) for r in range(4)]
    assert bounds == [(0, 256), (256, 512), (512, 768), (768, 1023)]


def test_generated_rows_are_make_datasets_before_centering():
    X = make_dataset(N, K, D, SEED).X
    parts = torch.cat([generate_rows(K, D, SEED, *shard_bounds(N, r, 3)) for r in range(3)])
    assert torch.equal(parts - (parts.double().sum(0) / N).float(), X)


def _weighted_rank(rank, world, store, X, counts, init, out):
    """One gloo rank of :func:`test_sharded_integer_weights_equal_duplicated_rows`: its shard and its weights."""
    import torch.distributed as dist

    from turbo_gmm.distributed import fit_sharded

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        r0, r1 = shard_bounds(X.shape[0], rank, world)
        fit = fit_sharded(X[r0:r1], init, 4, X.shape[0], sample_weight=counts[r0:r1], backend="torch")
        if rank == 0:
            torch.save({"w": fit.weights, "m": fit.means, "v": fit.variances, "ll": fit.log_likelihoods}, out)
    finally:
        dist.destroy_process_group()


def test_sharded_integer_weights_equal_duplicated_rows(tmp_path):
    """Two gloo ranks, each with its rows' integer weights (0: a dropped row, some of one shard all zero), fit the
    duplicated rows' mixture: float64 EM (kernels/diag/reference.py) on the repeated rows, to 1e-9."""
    import numpy as np
    import torch.multiprocessing as mp

    from turbo_gmm.diag import reference

    X = make_dataset(N, K, D, SEED).X.double()
    counts = torch.as_tensor(np.random.default_rng(1).integers(0, 4, N), dtype=torch.float64)
    counts[:40] = 0.0
    rng = np.random.default_rng(2)
    init = (np.full(K, 1.0 / K), X[rng.choice(N, K, replace=False)].numpy(), np.ones((K, D)))
    out = tmp_path / "rank0.pt"
    mp.spawn(_weighted_rank, args=(2, str(tmp_path / "store"), X, counts, init, str(out)), nprocs=2)
    got = torch.load(out)
    Xr = np.repeat(X.numpy(), counts.numpy().astype(int), axis=0)
    (w, m, v), lls = reference.em(Xr, *init, 4)
    np.testing.assert_allclose(got["ll"], lls, rtol=1e-9)
    for name, want in (("w", w), ("m", m), ("v", v)):
        np.testing.assert_allclose(got[name].cpu().numpy(), want, rtol=1e-9, atol=1e-12, err_msg=name)
