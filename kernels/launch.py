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

# Every statistics kernel adds each row tile's product into float32 running sums on the CUDA cores. Their error
# grows with the partial sums they add (<= 4e-7 a component at <= 237 tiles, 1.2e-5 at ~5 900: kernels/README.md
# "Numerics"), so the grids are sized for at most SUM_TILES row tiles a sum.
SUM_TILES = 128


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """Tile shape and launch knobs of one call of the lifted (diag, spherical, tied) kernels.

    ``dispatch.launch_config`` gives the default for a shape; the benchmarks override fields.

    Attributes
    ----------
    block_n, block_k : int
        Rows and components (Algorithm 3) per tile.
    num_warps, num_stages : int
        Triton's warps and software-pipelining stages.
    programs_per_sm : float
        Persistent programs per SM (below 1 leaves SMs idle but commits fewer atomic partial sums).
    max_registers : int or None
        A register cap for the statistics kernel (ptxas .maxnreg): more programs an SM, at the price of spills.
    normalizer_block_n, normalizer_block_k, normalizer_warps : int or None
        Algorithm 3's pass 1, which holds one product a tile and so fits other tiles (None: as pass 2).
    warp_specialized_pass2, warp_specialized_one_pass : int
        1: the Gluon kernels (diag/two_pass_ws.py, diag/one_pass_ws.py) wherever they apply, else Triton.
    warp_specialized_one_pass_rows : int
        The fewest rows from which the warp-specialized one pass takes the sweep.
    one_pass_overlap : int
        1: its consumers issue the next tile's score before this tile's exponentials.
    sum_tiles : int
        Most row tiles one float32 running sum adds (the grid grows to keep it); 0: no bound; 1: every
        tile committed alone in float64 (the accumulation-free reference)."""

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


def pow2_at_least_16(n: int) -> int:
    """Padded extent of a component or feature axis (tl.dot needs >= 16)."""
    return max(16, 1 << (int(n) - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class FullConfig:
    """Tile shape of the full-covariance kernels (``dispatch.full_launch_config``).

    block_n: rows per tile; block_k: components per score tile; cols: columns of [U_1 | U_2 | ...] a product;
    slab_dtype: the dtype of a program's sums over row tiles; resident_weights: 1 keeps one component tile's
    weights in shared memory over a program's row tiles."""

    block_n: int = 32
    block_k: int = 32
    cols: int = 64
    num_warps: int = 4
    num_stages: int = 1
    programs_per_sm: float = 2
    slab_dtype: torch.dtype = torch.float32
    resident_weights: int = 0


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
    """``programs`` times the smallest factor leaving each running sum at most ``sum_tiles`` of the ``n_tiles``
    row tiles, never more programs than tiles; sum_tiles = 0: unchanged."""
    if sum_tiles == 0:
        return programs
    factor = -(-n_tiles // (programs * sums_per_program * sum_tiles))
    return programs if factor <= 1 else min(programs * factor, n_tiles)


def statistics_grid(K: int, block_k: int, programs: int) -> tuple[int, int]:
    """Pass 2's grid (component tiles, row splits): at most ``programs`` (splits rounded down, so a whole-waves
    target does not spill into a nearly empty wave)."""
    k_tiles = -(-K // block_k)
    return k_tiles, max(1, programs // k_tiles)


MAX_ROW_SPLITS = 65535  # pass 2's row splits are its grid's y dimension


def statistics_pass_grid(K: int, block_k: int, n_tiles: int, device: torch.device, cfg: LaunchConfig) -> tuple[int, int]:
    """Pass 2's grid for ``n_tiles`` row tiles, splits raised so a running sum adds at most ``cfg.sum_tiles``
    tiles; refuses past MAX_ROW_SPLITS (run the rows in slices)."""
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
    """A LaunchConfig from 'field=value,...' (e.g. 'block_n=32,num_warps=8'); None for empty text."""
    if not text:
        return None
    return LaunchConfig(**config_fields(text))
