"""Launch geometry shared by the kernels: tile sizes, warps and the persistent grid."""
from __future__ import annotations

import dataclasses
import functools

import torch

INTERPRETER_PROGRAMS = 3  # programs the CPU interpreter runs: few, but > 1 so atomics are exercised


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
    a cap fits more programs to hide latency, at the price of spills (None: no cap); stats_by_lanes:
    accumulate [s | u] transposed so its wider axis is the dot's M (None: when
    2*d_pad exceeds the component tile).
    """

    block_n: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 2
    programs_per_sm: float = 2
    max_registers: int | None = None
    stats_by_lanes: bool | None = None
    normalizer_block_n: int | None = None
    normalizer_block_k: int | None = None
    normalizer_warps: int | None = None

    def transpose_statistics(self, d_pad: int, k_tile: int) -> bool:
        return True if self.stats_by_lanes is None else self.stats_by_lanes

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


def parse_config(text: str | None) -> LaunchConfig | None:
    """A launch config from 'field=value,...' (LaunchConfig's fields, e.g.
    'block_n=32,block_k=64,num_warps=4,num_stages=2,normalizer_block_n=256,normalizer_warps=8')
    or the short form 'block_n:block_k:num_warps:num_stages[:T|F|-[:programs_per_sm]]'."""
    if not text:
        return None
    if "=" in text:
        types = {f.name: f.type for f in dataclasses.fields(LaunchConfig)}
        kw = {}
        for item in text.split(","):
            key, value = item.split("=")
            kw[key] = (value == "T") if "bool" in str(types[key]) else (float(value) if "float" in str(types[key]) else int(value))
        return LaunchConfig(**kw)
    f = text.split(":")
    lanes = None if len(f) < 5 or f[4] == "-" else f[4] == "T"
    per_sm = float(f[5]) if len(f) > 5 else LaunchConfig.programs_per_sm
    return LaunchConfig(block_n=int(f[0]), block_k=int(f[1]), num_warps=int(f[2]), num_stages=int(f[3]),
                        stats_by_lanes=lanes, programs_per_sm=per_sm)
