"""Launch geometry of the full-covariance kernels and the rule between their algorithms and dataflows.

``python -m harness.studies.full_bench`` measures both algorithms and dataflows per shape and prints what its
rows imply for the thresholds here:

- one pass (Algorithm 2) iff K_pad * d_pad^2 <= ONE_PASS_MAX_KD2 and its tiles are as tall as Algorithm 3's:
  each persistent program's slab holds K_pad * (1 + d_pad + 64 * pairs) sums, about K_pad d_pad^2 / 2; past
  ~64K the slabs of 264 programs (2 per SM) stop fitting the H200's 50 MB L2, and Algorithm 3's component-tile
  programs (slab BLOCK_K wide) win despite scoring twice. Below it, where the one pass has to take 32-row tiles
  and Algorithm 3 64 (:func:`default_config`: d_pad <= 32 with K_pad > 64, i.e. d_pad 16 at K_pad 128 and 256),
  the slab's read-modify-write per row tile decides: at 1M_256_16 Algorithm 3 took 12.2 ms/iter against the
  one pass's 33.6 on the H200 (530add0, results/h200/kernel_measure/full_bench_resident_2026-12-01_530add0.csv);
  at 20M_32_16 (both 64 rows) the one pass 20.7 against 30.1, at 4M_16_64 (both 32 rows) 34.9 against 48.2
  (77798cf). K_pad 128 at d_pad 16 follows by the same reading, unmeasured;
- the products dataflow by default; the lift only when asked (``dataflow="lift"``). The lift does
  ~(d/8 + 1) / (d/4) of the products' score work (d = 16: 0.75x, 32: 0.625x, 64: 0.56x) and ran 1.16x
  faster at 1M_32_32 on the H200 (results/h200/kernel_measure/full_bench_2026-12-01_77798cf.csv), but at
  tf32x3 there its statistics and fits failed the float64 tests that the products passed
  (results/h200/gpu_tests_kernels_without_estimator_2026-12-01_ac2a7c6.log: the six failures are the
  lift's): its score cancels |x|^2-sized terms.
"""
from __future__ import annotations

import dataclasses

import torch

from ..lift import pow2_at_least_16

ALGORITHMS = ("one_pass", "two_pass")
ONE_PASS_MAX_KD2 = 65536
RESIDENT_WEIGHT_BYTES = 64 * 1024  # resident weights up to this: 2 programs per SM still fit the H200's 228 KB


@dataclasses.dataclass(frozen=True)
class FullConfig:
    """block_n: rows per tile; block_k: components per score tile (capped at K_pad); cols: columns of
    [U_1 | U_2 | ...] per product in the ``products`` score (cols / d_pad components, or part of one);
    slab_dtype: the dtype the statistics are summed in across a program's row tiles (float64 costs twice
    the slab traffic and removes the float32 sums' drift over ~N / programs rows); resident_weights: 1 loads the
    products score's weights once a program and keeps them in shared memory over its row tiles
    (turbo_gmm.full.tiles.resident_weights; the one pass with one component tile, block_k >= K_pad, and Algorithm 3's
    statistics pass) where 0 re-reads them every tile; 8 block_k d_pad^2 bytes of shared memory under tf32x3, on by
    default where that is at most RESIDENT_WEIGHT_BYTES (:func:`default_config`)."""

    block_n: int = 32
    block_k: int = 32
    cols: int = 64
    num_warps: int = 4
    num_stages: int = 1
    programs_per_sm: float = 2
    slab_dtype: torch.dtype = torch.float32
    resident_weights: int = 0


def choose_algorithm(K: int, d: int) -> str:
    K_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    shorter_tiles = default_config("one_pass", K, d).block_n < default_config("two_pass", K, d).block_n
    return "one_pass" if K_pad * d_pad ** 2 <= ONE_PASS_MAX_KD2 and not shorter_tiles else "two_pass"


def choose_dataflow(d: int) -> str:
    """The products at every d (module docstring: the lift's tf32x3 accuracy on the H200)."""
    return "products"


def default_config(algorithm: str, K: int, d: int, dataflow: str = "products") -> FullConfig:
    """Rows per tile: 64 where the products dataflow compiles without spills for sm_90 (offline,
    `harness.studies.resources --covariance full`: d_pad <= 32 in Algorithm 3, whose statistics programs hold
    one 32-component tile, and in the one pass up to K_pad = 64; 220-255 registers, 2 programs per SM as
    launched), else 32 (the one pass at K_pad 256 and d_pad 16, or d_pad 64, spills 32-224 bytes with 64 rows,
    and the lift 56-112 bytes at K_pad 32 and 128, d_pad 32). Measured on the H200 at 1f63e08
    (results/h200/kernel_measure/full_bench_2026-12-01_1f63e08.csv): 64 rows are 2.6x faster at 20M_32_16 in
    the one pass (53.4 -> 20.6 ms/iter: each tile ends in a read-modify-write of the program's second-moment
    slab, which 64-row tiles do half as often: our reading, unprofiled) and 1.16x at 1M_128_32 in Algorithm 3;
    other shapes by the compile alone. No software pipelining. Algorithm 3 takes more programs per SM (its
    programs hold one component tile).

    Resident weights where the component tile's take at most RESIDENT_WEIGHT_BYTES (d_pad 16 at block_k <= 32),
    measured on the H200 at 093139c (results/h200/kernel_measure/full_bench_layouts_2026-12-02_093139c.csv, two
    runs): the one pass at 20M_32_16 16.4 -> 13.5 ms/iter, Algorithm 3 at 1M_256_16 8.9 -> 8.5; at d_pad 32 the
    one pass and Algorithm 3 would need 311 KB of shared memory (refused); num_stages 2, 8 warps and 3 programs per
    SM were slower at every shape timed there.

    128 columns a product (COLS), but 64 in the one pass at d_pad 16: with the slab's sums as atomics, on the H200 at
    c4a6ef5 (results/h200/kernel_measure/full_bench_slab_red_2026-12-02_c4a6ef5.csv, ms/iter, 64 -> 128) 1M_32_32
    2.32 -> 2.08, 1M_256_16 7.86 -> 7.04, 4M_16_64 27.5 -> 25.8, 1M_128_32 12.4 -> 11.6, and 20M_32_16 11.05 -> 12.03
    (the resident one pass spills 120 B at 128 in an offline sm_90 compile, none at 64)."""
    d_pad, K_pad = pow2_at_least_16(d), pow2_at_least_16(K)
    wide = dataflow == "products" and d_pad <= 32
    cols = 64 if algorithm == "one_pass" and d_pad == 16 else 128
    if algorithm == "two_pass":
        cfg = FullConfig(block_n=64 if wide else 32, block_k=min(32, K_pad), cols=cols, programs_per_sm=8)
    else:
        cfg = FullConfig(block_n=64 if wide and K_pad <= 64 else 32, block_k=min(64, K_pad), cols=cols)
    return dataclasses.replace(cfg, resident_weights=resident_by_default(algorithm, K, d, dataflow, cfg.block_k))


def resident_by_default(algorithm: str, K: int, d: int, dataflow: str, block_k: int) -> int:
    """1 where the products' weights of one component tile stay in shared memory by default (:func:`default_config`)."""
    K_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    block_k = min(block_k, K_pad)
    one_tile = algorithm == "two_pass" or block_k >= K_pad
    return int(dataflow == "products" and one_tile and 8 * block_k * d_pad ** 2 <= RESIDENT_WEIGHT_BYTES)


def parse_full_config(text: str | None, algorithm: str, K: int, d: int, dataflow: str = "products") -> FullConfig:
    """turbo_gmm.full.config.default_config with 'field=value,...' of FullConfig's fields over it, e.g.
    'block_n=64,block_k=32,cols=64,num_warps=8,num_stages=2' (slab_dtype is not a field here)."""
    cfg = default_config(algorithm, K, d, dataflow)
    if not text:
        return cfg
    types = {f.name: f.type for f in dataclasses.fields(FullConfig) if f.name != "slab_dtype"}
    kw = {}
    for item in text.split(","):
        key, value = item.split("=")
        if key not in types:
            raise ValueError(f"unknown full-config field {key!r}; fields: {', '.join(types)}")
        kw[key] = float(value) if "float" in str(types[key]) else int(value)
    if "resident_weights" not in kw:  # the default follows the tile the overrides give
        kw["resident_weights"] = resident_by_default(algorithm, K, d, dataflow, kw.get("block_k", cfg.block_k))
    return dataclasses.replace(cfg, **kw)
