"""The one rule: what every covariance family runs with, decided here and nowhere else.

========================  ====================================  =========================================
decision                  diag, spherical, tied                 full
========================  ====================================  =========================================
precision                 :func:`initial_precision`, then per iteration :func:`auto_precision`
                          (the float32 lift's error bound)      (kept: float32 kernels or fp64 torch ops)
algorithm (one/two pass)  :func:`choose_algorithm` (measured    :func:`full_algorithm` (K_pad d_pad^2
                          register/shared-memory boundary)      against the L2)
dataflow                  the lift (tied: on whitened rows)     :func:`full_dataflow` (the products)
launch config             :func:`launch_config`                 :func:`full_launch_config`
========================  ====================================  =========================================

:func:`resolve_algorithm` turns a user's ``algorithm="auto"`` into one of :data:`ALGORITHMS` for any family.
The thresholds were measured on an H200 (the benchmarks in ``harness/studies`` re-measure them); where a GPU
has no measured rule the paper's A100 rule applies."""
from __future__ import annotations

import dataclasses

import torch

from .launch import FullConfig, LaunchConfig, pow2_at_least_16

# ---------------------------------------------------------------------------------------------- precision
FP64 = "fp64"  # lift, score, normalizer and sums in float64 (DMMA on sm_80+)
FLOAT32_PRECISIONS = ("tf32x3", "ieee")  # the precisions that score through the float32 lift
PRECISIONS = (*FLOAT32_PRECISIONS, FP64)
AUTO_PRECISIONS = ("tf32x3", FP64)  # precision="auto": within the float32 lift's tolerance, beyond it
# The score error a float32 fit may carry: exp(0.05) - 1 = 5% on a responsibility at the worst row. Data sets
# where float32 EM follows float64 measured at most 0.014; those where it does not, three decades above.
SCORE_TOLERANCE = 0.05
# Up to this much score work per sweep (N K d) an fp64 iteration costs what a tf32x3 one does: both sit at
# the kernels' launch floor, so "auto" takes float64 (scikit-learn's arithmetic) for the whole fit.
FP64_FLOOR_WORK = 2**25
# Full and tied have no float64 kernels; their float64 E-step is batched torch products whose time launches,
# not N K d^2 work, set up to this much (and (N, K, d) temporaries of at most FP64_FLOOR_WORK numbers).
MATRIX_FP64_FLOOR_WORK = 2**27


def fp64_costs_nothing(N: int, K: int, d: int, covariance_type: str = "diag") -> bool:
    """Whether a float64 E-step of N rows, K components and d features costs what a float32 one does."""
    if covariance_type in ("full", "tied") and N * K * d * d > MATRIX_FP64_FLOOR_WORK:
        return False
    return N * K * d <= FP64_FLOOR_WORK


def initial_precision(precision: str, N: int, K: int, d: int, covariance_type: str) -> tuple[str, bool]:
    """(the precision a fit starts with, whether it is re-chosen every iteration by :func:`auto_precision`)."""
    if precision != "auto":
        return precision, False
    if fp64_costs_nothing(N, K, d, covariance_type):
        return FP64, False
    return AUTO_PRECISIONS[0], covariance_type not in ("full", "tied")


def auto_precision(lift_error_bound: float) -> str:
    """tf32x3 while the float32 lift's error bound (``diag.precision.lift_error_bound``) is within tolerance."""
    return AUTO_PRECISIONS[lift_error_bound > SCORE_TOLERANCE]


# ---------------------------------------------------------------------------------------------- algorithm
ALGORITHMS = ("one_pass", "two_pass")  # Algorithm 2 (one sweep) and Algorithm 3 (normalizer, then statistics)


def a100_rule(k_pad: int, d_pad: int) -> bool:
    """The paper's A100 rule: one pass iff K_pad <= 128 and K_pad * d_pad <= 4096."""
    return k_pad <= 128 and k_pad * d_pad <= 4096


def h200_rule(k_pad: int, d_pad: int) -> bool:
    """One pass iff K_pad * d_pad <= 8192 with K_pad <= 128, or K_pad * d_pad <= 4096.

    The one sweep's loop-carried state is Theta(K_pad d_pad), so register pressure, then shared memory,
    bounds it: where it launches it was 1.24-2.0x faster; at (256, 32) the two tie and two passes are taken."""
    return k_pad * d_pad <= (8192 if k_pad <= 128 else 4096)


MEASURED_RULES = {"NVIDIA H200": h200_rule}


def device_name() -> str | None:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def choose_algorithm(K: int, d: int, device: str | None = None, precision: str = "tf32x3") -> str:
    """The algorithm of the lifted (diag, spherical, tied) kernels.

    Parameters
    ----------
    K, d : int
        Components and features.
    device : str, optional
        The GPU's name (``torch.cuda.get_device_name()``); default the current one. The paper's A100 rule
        applies where none was measured.
    precision : str
        Under "fp64" the rule is asked at twice d_pad: float64 state takes twice the registers.

    Returns
    -------
    str
        "one_pass" or "two_pass".

    Examples
    --------
    >>> from turbo_gmm import choose_algorithm
    >>> choose_algorithm(16, 32, device="NVIDIA H200"), choose_algorithm(1024, 32, device="NVIDIA H200")
    ('one_pass', 'two_pass')"""
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    rule = MEASURED_RULES.get(device if device is not None else device_name(), a100_rule)
    return "one_pass" if rule(k_pad, 2 * d_pad if precision == FP64 else d_pad) else "two_pass"


# Full: one pass iff its per-program slabs (~K_pad d_pad^2 / 2 sums, 2 programs an SM) fit the L2.
ONE_PASS_MAX_KD2 = 65536


def full_algorithm(K: int, d: int) -> str:
    """The full family's algorithm: one pass while its slabs fit the L2 and its tiles are as tall as
    Algorithm 3's (where they are shorter, the slab's read-modify-write per tile decides for two passes)."""
    K_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    shorter_tiles = full_launch_config("one_pass", K, d).block_n < full_launch_config("two_pass", K, d).block_n
    return "one_pass" if K_pad * d_pad ** 2 <= ONE_PASS_MAX_KD2 and not shorter_tiles else "two_pass"


def resolve_algorithm(K: int, d: int, algorithm: str, precision: str, covariance_type: str = "diag") -> str:
    """``algorithm`` checked, "auto" replaced by the family's rule."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if algorithm == "auto":
        return full_algorithm(K, d) if covariance_type == "full" else choose_algorithm(K, d, precision=precision)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'auto' or one of {ALGORITHMS}, got {algorithm!r}")
    return algorithm


# ---------------------------------------------------------------------------------------------- dataflow
def full_dataflow(d: int) -> str:
    """The full family's score: the per-component ``products`` at every d. The ``lift`` does ~0.6-0.75x
    their work but cancels |x|^2-sized terms: under tf32x3 its fits fail the float64 tests."""
    return "products"


# ---------------------------------------------------------------------------------------------- launch
# Rows from which Algorithm 2 runs warp-specialized (diag/one_pass_ws.py, where it takes the sweep): graph-
# replayed fits were faster from the smallest N measured, 250K; at 20K (2.4 row tiles a program) slower.
WS_ONE_PASS_MIN_ROWS = 250_000


def launch_config(algorithm: str, K: int, d: int, precision: str = "tf32x3") -> LaunchConfig:
    """Tiles of the lifted kernels for a (K, d), tuned on the H200 (``harness.studies.measure``).

    tf32x3 splits every dot operand in registers, so the kernels are register bound: fewer rows per tile
    as 2 d_pad or K_pad grows, no software pipelining at d_pad = 128 where shared memory runs out. Where
    diag/one_pass_ws.py takes the sweep, Algorithm 2 runs warp-specialized from WS_ONE_PASS_MIN_ROWS rows."""
    if precision == FP64:
        return fp64_launch_config(algorithm, K, d)
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    if algorithm == "one_pass":
        # one_pass_overlap: each consumer's next score issued before this tile's exponentials (1-6% faster).
        ws = dict(warp_specialized_one_pass=1, warp_specialized_one_pass_rows=WS_ONE_PASS_MIN_ROWS, one_pass_overlap=1)
        if d_pad >= 128:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=1, **ws)
        if d_pad == 32 and k_pad >= 64:
            # one stage of 32 rows fits two programs an SM where the deeper tiles fit one (1.04-1.33x)
            return LaunchConfig(block_n=32, num_warps=4, num_stages=1, **(ws if k_pad <= 128 else {}))
        if d_pad == 64 and k_pad <= 32:
            # K_pad 16: a 168-register cap fits three programs an SM; K_pad 32: 64 rows in two stages
            if k_pad == 16:
                return LaunchConfig(block_n=32, num_warps=4, num_stages=1, max_registers=168, programs_per_sm=3, **ws)
            return LaunchConfig(block_n=64, num_warps=4, num_stages=2, **ws)
        if k_pad >= 128 or d_pad >= 64:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=2, **(ws if d_pad == 64 else {}))
        return LaunchConfig(block_n=64, num_warps=4, num_stages=3, **(ws if d_pad == 32 else {}))
    if d_pad >= 128:
        return LaunchConfig(block_n=32, block_k=16, num_warps=4, num_stages=1)
    if d_pad <= 32:
        # Pass 1 at 256 rows x 8 warps; pass 2 (warp-specialized at d_pad 32) at 16 programs an SM: 2112 on
        # 132 SMs, which the component-tile counts of K = 512, 1024, 4096 divide, so no wave runs part-empty.
        return LaunchConfig(block_n=64, block_k=64, num_warps=4, num_stages=2, programs_per_sm=16,
                            normalizer_block_n=256, normalizer_warps=8, warp_specialized_pass2=int(d_pad == 32))
    return LaunchConfig(block_n=64, block_k=64, num_warps=4, num_stages=2)


def fp64_launch_config(algorithm: str, K: int, d: int) -> LaunchConfig:
    """Tiles under fp64: float64 doubles every operand's registers and the products are mma.sync (DMMA), so
    no warp-specialized kernel; float64 running sums need no bound (sum_tiles=0). Tuned on the H200 from
    the spill-free tiles of an offline sm_90 compile."""
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    if algorithm == "one_pass":
        if k_pad * d_pad <= 1024:
            return LaunchConfig(block_n=64, num_warps=4, num_stages=2, sum_tiles=0)
        if k_pad >= 128:
            return LaunchConfig(block_n=64, num_warps=8, num_stages=3, sum_tiles=0)
        if d_pad >= 128:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=3, sum_tiles=0)
        return LaunchConfig(block_n=64, num_warps=4, num_stages=1, sum_tiles=0)  # spills, yet fastest
    if d_pad <= 32:
        return LaunchConfig(block_n=64, block_k=32, num_warps=4, num_stages=2, programs_per_sm=16,
                            normalizer_block_n=128, normalizer_block_k=32, normalizer_warps=8, sum_tiles=0)
    return LaunchConfig(block_n=16, block_k=16, num_warps=4, num_stages=1, sum_tiles=0)


RESIDENT_WEIGHT_BYTES = 64 * 1024  # resident weights up to this: 2 programs an SM still fit the H200's 228 KB


def full_launch_config(algorithm: str, K: int, d: int, dataflow: str = "products") -> FullConfig:
    """Tiles of the full kernels: 64 rows where the products compile without spills for sm_90 (d_pad <= 32;
    in the one pass up to K_pad 64), else 32; the weights resident where one component tile's fit
    RESIDENT_WEIGHT_BYTES; 128 columns a product, 64 in the one pass at d_pad 16 (where 128 spills)."""
    d_pad, K_pad = pow2_at_least_16(d), pow2_at_least_16(K)
    wide = dataflow == "products" and d_pad <= 32
    cols = 64 if algorithm == "one_pass" and d_pad == 16 else 128
    if algorithm == "two_pass":
        cfg = FullConfig(block_n=64 if wide else 32, block_k=min(32, K_pad), cols=cols, programs_per_sm=8)
    else:
        cfg = FullConfig(block_n=64 if wide and K_pad <= 64 else 32, block_k=min(64, K_pad), cols=cols)
    return dataclasses.replace(cfg, resident_weights=full_resident_weights(algorithm, K, d, dataflow, cfg.block_k))


def full_resident_weights(algorithm: str, K: int, d: int, dataflow: str, block_k: int) -> int:
    """1 where the products' weights of one component tile stay in shared memory (8 block_k d_pad^2 bytes)."""
    K_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    block_k = min(block_k, K_pad)
    one_tile = algorithm == "two_pass" or block_k >= K_pad
    return int(dataflow == "products" and one_tile and 8 * block_k * d_pad ** 2 <= RESIDENT_WEIGHT_BYTES)


def parse_full_config(text: str | None, algorithm: str, K: int, d: int, dataflow: str = "products") -> FullConfig:
    """:func:`full_launch_config` with 'field=value,...' of FullConfig's fields over it (not slab_dtype)."""
    cfg = full_launch_config(algorithm, K, d, dataflow)
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
        kw["resident_weights"] = full_resident_weights(algorithm, K, d, dataflow, kw.get("block_k", cfg.block_k))
    return dataclasses.replace(cfg, **kw)
