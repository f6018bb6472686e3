"""Launch geometry of the full-covariance kernels and the rule between their algorithms and dataflows.

The rule's two thresholds are to be set from ``python -m harness.studies.full_bench`` on each
device (it prints the values its rows imply); until an H200 run sets them they are the
reasoning below, not measurements:

- one pass (Algorithm 2) iff K_pad * d_pad^2 <= ONE_PASS_MAX_KD2: each persistent program's slab
  holds K_pad * (1 + d_pad + 64 * pairs) sums, about K_pad d_pad^2 / 2; past ~64K the slabs of
  264 programs (2 per SM) stop fitting the H200's 50 MB L2, and Algorithm 3's component-tile
  programs (slab BLOCK_K wide) win despite scoring twice;
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

from kernels.lift import pow2_at_least_16

ALGORITHMS = ("one_pass", "two_pass")
ONE_PASS_MAX_KD2 = 65536


@dataclasses.dataclass(frozen=True)
class FullConfig:
    """block_n: rows per tile; block_k: components per score tile (capped at K_pad); cols: columns of
    [U_1 | U_2 | ...] per product in the ``products`` score (cols / d_pad components, or part of one);
    slab_dtype: the dtype the statistics are summed in across a program's row tiles (float64 costs twice
    the slab traffic and removes the float32 sums' drift over ~N / programs rows); resident_moments: keep the
    center moments of a program's component tile in registers over its row tiles and write the slab once,
    where :func:`resident_moments` allows (kernels/full/tiles.py tile_moments), instead of a read-modify-write
    of the slab per row tile."""

    block_n: int = 32
    block_k: int = 32
    cols: int = 64
    num_warps: int = 4
    num_stages: int = 1
    programs_per_sm: float = 2
    slab_dtype: torch.dtype = torch.float32
    resident_moments: int = 0


RESIDENT_MAX = 8192  # float32 second-moment sums a program may keep in registers (64 a thread at 4 warps)


def resident_moments(cfg: FullConfig, d_pad: int, block_k: int, component_tiles: int, shifted: bool) -> bool:
    """Whether a statistics kernel keeps its moments in registers: asked for by ``cfg``, moments about the center
    (the component fallback sums a component at a time), one component tile a program (Algorithm 3's programs
    always; the one pass when BLOCK_K = K_pad) and d_pad^2 x BLOCK_K <= RESIDENT_MAX (d_pad 16, BLOCK_K <= 32)."""
    fits = d_pad * d_pad * block_k <= RESIDENT_MAX
    return bool(cfg.resident_moments) and not shifted and component_tiles == 1 and fits


def choose_algorithm(K: int, d: int) -> str:
    return "one_pass" if pow2_at_least_16(K) * pow2_at_least_16(d) ** 2 <= ONE_PASS_MAX_KD2 else "two_pass"


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
    programs hold one component tile)."""
    d_pad, K_pad = pow2_at_least_16(d), pow2_at_least_16(K)
    wide = dataflow == "products" and d_pad <= 32
    if algorithm == "two_pass":
        return FullConfig(block_n=64 if wide else 32, block_k=min(32, K_pad), programs_per_sm=8)
    return FullConfig(block_n=64 if wide and K_pad <= 64 else 32, block_k=min(64, K_pad))


def parse_full_config(text: str | None, algorithm: str, K: int, d: int, dataflow: str = "products") -> FullConfig:
    """kernels.full.config.default_config with 'field=value,...' of FullConfig's fields over it, e.g.
    'block_n=64,block_k=32,cols=64,num_warps=8,num_stages=2,resident_moments=1' (slab_dtype is not a field here)."""
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
    return dataclasses.replace(cfg, **kw)
