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
    a cap fits more programs to hide latency, at the price of spills (None: no cap);
    warp_specialized_pass2: Algorithm 3's pass 2 by kernels/two_pass_ws.py wherever that kernel takes
    it (tf32x3 on a Hopper GPU, d_pad = 32, d a multiple of 4; two_pass_ws.refusal), else by the
    Triton kernel as at 0;
    warp_specialized_one_pass: Algorithm 2 by kernels/one_pass_ws.py wherever that kernel takes it (tf32x3
    on a Hopper GPU, d_pad = 32, d a multiple of 4, K_pad <= 128; one_pass_ws.refusal), else by the Triton
    kernel as at 0. It runs one program per SM whatever programs_per_sm says.
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
    """A launch config from 'field=value,...' of LaunchConfig's fields, e.g.
    'block_n=32,block_k=64,num_warps=4,num_stages=2,normalizer_block_n=256,normalizer_warps=8'."""
    if not text:
        return None
    types = {f.name: f.type for f in dataclasses.fields(LaunchConfig)}
    kw = {}
    for item in text.split(","):
        key, value = item.split("=")
        if key not in types:
            raise ValueError(f"unknown launch-config field {key!r}; fields: {', '.join(types)}")
        kw[key] = float(value) if "float" in str(types[key]) else int(value)
    return LaunchConfig(**kw)
