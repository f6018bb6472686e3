"""Launch geometry shared by the kernels: tile sizes, warps and the persistent grid."""
from __future__ import annotations

import dataclasses
import functools

import torch

INTERPRETER_PROGRAMS = 3  # programs the CPU interpreter runs: few, but > 1 so atomics are exercised

# How a statistics kernel (Algorithm 2, both passes 2 of Algorithm 3) sums its row tiles' n, s, u before the
# float64 commit (kernels/lift.py: running_sums, add_partial, committed):
#   "program": in the tensor cores' float32 accumulator across all of a program's tiles (before issue 21:
#              s, u lost ~1e-4 per component at ~30 000 rows per program, kernels/README.md "Numerics");
#   "tile_f32": each tile's product into a fresh accumulator, added in float32 on the CUDA cores;
#   "tile_f32x2": the same, added into a compensated two-float32 sum (TwoSum);
#   "tile_f64": the same, added in float64.
ACCUMULATIONS = ("program", "tile_f32", "tile_f32x2", "tile_f64")
STATISTICS_ACCUMULATION = "tile_f32x2"  # the default; harness.studies.statistics_accumulation measures them all


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
    on a Hopper GPU, d_pad = 32, d a multiple of 4, K_pad <= 128; one_pass_ws.refusal), else by the Triton
    kernel as at 0. It runs one program per SM whatever programs_per_sm says;
    accumulation: how the statistics kernels sum their row tiles (one of ACCUMULATIONS, default
    STATISTICS_ACCUMULATION); commit_tiles: a statistics program commits its running sums (float64
    atomics) and restarts them every this many of its row tiles, bounding the rows any float32 sum spans
    (0: once, at the end).
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
    accumulation: str = STATISTICS_ACCUMULATION
    commit_tiles: int = 0

    def __post_init__(self):
        if self.accumulation not in ACCUMULATIONS:
            raise ValueError(f"accumulation must be one of {ACCUMULATIONS}, got {self.accumulation!r}")
        if self.commit_tiles < 0:
            raise ValueError(f"commit_tiles must be >= 0 (0: one commit per program), got {self.commit_tiles}")

    def register_cap(self) -> dict:
        """The launch option that applies ``max_registers`` (nothing when unset)."""
        return {} if self.max_registers is None else {"maxnreg": self.max_registers}


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def program_count(n_tiles: int, device: torch.device, per_sm: float) -> int:
    """Persistent grid: a small multiple of the SM count, never more than the tiles."""
    if device.type != "cuda":
        return max(1, min(n_tiles, INTERPRETER_PROGRAMS))
    return max(1, min(n_tiles, int(per_sm * sm_count(device.index or 0))))


def statistics_grid(K: int, block_k: int, programs: int) -> tuple[int, int]:
    """Pass 2's grid (component tiles, row splits): at most ``programs`` programs (at least one split
    per tile), exactly that many when the tile count divides it. Rounding the splits down, not up,
    keeps a whole-waves target from spilling a few programs into an extra, nearly empty wave."""
    k_tiles = -(-K // block_k)
    return k_tiles, max(1, programs // k_tiles)


def parse_config(text: str | None) -> LaunchConfig | None:
    """A launch config from 'field=value,...' of LaunchConfig's fields, e.g.
    'block_n=32,block_k=64,num_warps=4,num_stages=2,normalizer_block_n=256,normalizer_warps=8,accumulation=tile_f64'."""
    if not text:
        return None
    types = {f.name: f.type for f in dataclasses.fields(LaunchConfig)}
    kw = {}
    for item in text.split(","):
        key, value = item.split("=")
        if key not in types:
            raise ValueError(f"unknown launch-config field {key!r}; fields: {', '.join(types)}")
        kw[key] = value if types[key] in (str, "str") else float(value) if "float" in str(types[key]) else int(value)
    return LaunchConfig(**kw)
