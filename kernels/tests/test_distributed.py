"""Data-parallel EM's row split: every row on exactly one rank, and a rank's generated rows are
make_dataset's (before the global centering)."""
import torch

from kernels.datasets import generate_rows, make_dataset
from kernels.distributed import shard_bounds

N, K, D, SEED = 1023, 3, 33, 2


def test_shards_cover_the_rows_once():
    bounds = [shard_bounds(1023, r, 4) for r in range(4)]
    assert bounds == [(0, 256), (256, 512), (512, 768), (768, 1023)]


def test_generated_rows_are_make_datasets_before_centering():
    X = make_dataset(N, K, D, SEED).X
    parts = torch.cat([generate_rows(K, D, SEED, *shard_bounds(N, r, 3)) for r in range(3)])
    assert torch.equal(parts - (parts.double().sum(0) / N).float(), X)
