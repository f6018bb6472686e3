"""Launch geometry shared by the kernels: tile sizes, warps and the persistent grid."""
from __future__ import annotations

import dataclasses
import functools
import os

import torch

# TURBO_GMM_HOPPER_KERNELS=0 switches the Hopper-only (Gluon, warp-specialized) kernels off: every sweep then takes
# the portable Triton kernels, the path a non-Hopper GPU (an A100) takes, so one H200 tests both paths.
HOPPER_KERNELS_SWITCH = "TURBO_GMM_HOPPER_KERNELS"


def hopper_kernels_switched_off() -> str | None:
    """Why the Hopper-only kernels may not run (None when they may): the switch above, read at each call."""
    if os.environ.get(HOPPER_KERNELS_SWITCH, "1") == "0":
        return f"the Hopper-only kernels are switched off ({HOPPER_KERNELS_SWITCH}=0)"
    return None


INTERPRETER_PROGRAMS = 3  # programs the CPU interpreter runs: few, but > 1 so atomics are exercised

# Every statistics kernel (Algorithm 2, Triton and warp-specialized; both passes 2 of Algorithm 3) puts each row
# tile's product into a fresh float32 accumulator and adds it into float32 running sums on the CUDA cores (issue 21:
# the tensor cores' accumulator carried across all of a program's tiles lost ~1e-4 per component of s and u at
# ~30 000 rows per program). A float32 running sum's error still grows with the partial sums it adds (measured on
# the H200, kernels/README.md "Numerics": <= 4e-7 per component at <= 237 tiles, 1.2e-6 at 473 (1M_4096_32's pass
# 2), 1.2e-5 at ~5 900 (100M rows in one pass)), so the grids are sized for at most SUM_TILES row tiles a sum.
SUM_TILES = 128


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """Tile shape and launch knobs of one kernel call.

    block_n: rows per tile; block_k: components per tile (two-pass only);
    normalizer_block_n, normalizer_block_k, normalizer_warps: Algorithm 3's first
    pass (the row normalizer), one dot per tile instead of two, so it fits more
    warps per SM than the statistics pass at other tile shapes (None: block_n,
    block_k, num_warps);
    programs_per_sm: persistent programs per multiprocessor (a fraction below 1 leaves
    multiprocessors idle but commits fewer atomic partial sums); max_registers: a cap on
    registers per thread for the statistics kernel (Algorithm 2, Algorithm 3's pass 2),
    ptxas's .maxnreg -- the compiler otherwise takes up to 255 and two programs fill an SM;
    a cap fits more programs to hide latency, at the price of spills (None: no cap);
    warp_specialized_pass2: Algorithm 3's pass 2 by kernels/two_pass_ws.py wherever that kernel takes
    it (tf32x3 on a Hopper GPU, d_pad = 32, d a multiple of 4; two_pass_ws.refusal), else by the
    Triton kernel as at 0;
    warp_specialized_one_pass: Algorithm 2 by kernels/one_pass_ws.py wherever that kernel takes it (tf32x3
    on a Hopper GPU, d a multiple of 4, (d_pad, K_pad) in one_pass_ws.K_PADS; one_pass_ws.refusal), else by the Triton
    kernel as at 0. It runs one program per SM (times :func:`sum_bounded`'s factor) whatever
    programs_per_sm says; warp_specialized_one_pass_rows: where warp_specialized_one_pass is set, the
    fewest rows N at which it takes the sweep (below, the Triton kernel: at 20 000 rows the warp-specialized
    kernel's 2.4 tiles per program measured slower);
    one_pass_overlap: where the warp-specialized one pass runs at d_pad 32 and K_pad 16 or 32
    (one_pass_ws.overlaps), each consumer issues its next tile's score before this tile's exponentials
    (one_pass_ws._consume_overlapped), else as at 0; launch_config sets it wherever the kernel runs;
    sum_tiles: the most row tiles one float32 running sum of a statistics program adds (:data:`SUM_TILES`):
    where the grid above would give a program more, it has more programs (:func:`sum_bounded`); 0: no bound,
    the grid alone decides (what a float32 sum over every tile of a program measured, for the studies);
    1: every row tile committed alone in float64 (the accumulation-free reference of the same kernel).
    """

    block_n: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 2
    programs_per_sm: float = 2
    max_registers: int | None = None
    normalizer_block_n: int | None = None
    normalizer_block_k: int | None = None
    normalizer_warps: int | None = None
    warp_specialized_pass2: int = 0
    warp_specialized_one_pass: int = 0
    warp_specialized_one_pass_rows: int = 0
    one_pass_overlap: int = 0
    sum_tiles: int = SUM_TILES

    def __post_init__(self):
        if self.sum_tiles < 0:
            raise ValueError(f"sum_tiles must be >= 0 (0: no bound), got {self.sum_tiles}")

    def register_cap(self) -> dict:
        """The launch option that applies ``max_registers`` (nothing when unset)."""
        return {} if self.max_registers is None else {"maxnreg": self.max_registers}


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def weight_arguments(sample_weight) -> dict:
    """A statistics kernel's weight arguments: none unweighted (its WEIGHTED default: it compiles as without),
    else the (N,) weights as ``sw`` and WEIGHTED."""
    return {} if sample_weight is None else {"sw": sample_weight, "WEIGHTED": True}


def program_count(n_tiles: int, device: torch.device, per_sm: float) -> int:
    """Persistent grid: a small multiple of the SM count, never more than the tiles."""
    if device.type != "cuda":
        return max(1, min(n_tiles, INTERPRETER_PROGRAMS))
    return max(1, min(n_tiles, int(per_sm * sm_count(device.index or 0))))


def sum_bounded(programs: int, n_tiles: int, sum_tiles: int, sums_per_program: int = 1) -> int:
    """``programs`` (a grid of whole waves) times the smallest whole factor that leaves each of a program's
    ``sums_per_program`` running sums at most ``sum_tiles`` of the ``n_tiles`` row tiles (a program takes every
    programs-th tile; the warp-specialized one pass deals a program's tiles to two consumers in turn), never
    more programs than tiles. sum_tiles = 0: ``programs`` unchanged."""
    if sum_tiles == 0:
        return programs
    factor = -(-n_tiles // (programs * sums_per_program * sum_tiles))
    return programs if factor <= 1 else min(programs * factor, n_tiles)


def statistics_grid(K: int, block_k: int, programs: int) -> tuple[int, int]:
    """Pass 2's grid (component tiles, row splits): at most ``programs`` programs (at least one split
    per tile), exactly that many when the tile count divides it. Rounding the splits down, not up,
    keeps a whole-waves target from spilling a few programs into an extra, nearly empty wave."""
    k_tiles = -(-K // block_k)
    return k_tiles, max(1, programs // k_tiles)


MAX_ROW_SPLITS = 65535  # pass 2's row splits are its grid's y dimension


def statistics_pass_grid(K: int, block_k: int, n_tiles: int, device: torch.device, cfg: LaunchConfig) -> tuple[int, int]:
    """Pass 2's grid (component tiles, row splits) for ``n_tiles`` row tiles: :func:`statistics_grid` of the
    persistent program count, the splits raised by :func:`sum_bounded` so a program's running sums add at most
    ``cfg.sum_tiles`` row tiles. Past MAX_ROW_SPLITS splits (sum_tiles = 1 beyond 4M rows) it refuses: run
    the rows in slices."""
    k_tiles, splits = statistics_grid(K, block_k, program_count(n_tiles, device, cfg.programs_per_sm))
    splits = sum_bounded(splits, n_tiles, cfg.sum_tiles)
    if splits > MAX_ROW_SPLITS:
        raise ValueError(f"pass 2 at sum_tiles = {cfg.sum_tiles} needs {splits} row splits for {n_tiles} row tiles; "
                         f"the grid takes {MAX_ROW_SPLITS}: give it fewer rows at a time")
    return k_tiles, splits


def config_fields(text: str) -> dict:
    """'field=value,...' of LaunchConfig's fields as keyword arguments, each typed as its field."""
    types = {f.name: f.type for f in dataclasses.fields(LaunchConfig)}
    kw = {}
    for item in text.split(","):
        key, value = item.split("=")
        if key not in types:
            raise ValueError(f"unknown launch-config field {key!r}; fields: {', '.join(types)}")
        kw[key] = value if types[key] in (str, "str") else float(value) if "float" in str(types[key]) else int(value)
    return kw


def parse_config(text: str | None) -> LaunchConfig | None:
    """A launch config from 'field=value,...' of LaunchConfig's fields (:func:`config_fields`), e.g.
    'block_n=32,block_k=64,num_warps=4,num_stages=2,normalizer_block_n=256,normalizer_warps=8'."""
    if not text:
        return None
    return LaunchConfig(**config_fields(text))
