"""Which algorithm runs where: Algorithm 2 while the component axis fits on chip.

The rule is measured, not derived (paper §5.2): the single sweep's loop-carried
state is Theta(K_pad * d_pad) and register pressure binds before shared-memory
capacity does, so the boundary is a property of the device and the compiler.
"""
from __future__ import annotations

import torch

from .launch import LaunchConfig
from .lift import FP64, pow2_at_least_16

ALGORITHMS = ("one_pass", "two_pass")


def a100_rule(k_pad: int, d_pad: int) -> bool:
    """The paper's A100 rule: one pass iff K_pad <= 128 and K_pad * d_pad <= 4096."""
    return k_pad <= 128 and k_pad * d_pad <= 4096


def h200_rule(k_pad: int, d_pad: int) -> bool:
    """One pass iff K_pad * d_pad <= 8192 with K_pad <= 128, or K_pad * d_pad <= 4096.

    Measured by ``experiment=dispatch`` (results/h200/dispatch.csv, kernels of
    d4b8581, N = 1M, K 16..1024 x d 16..128, tf32x3): Algorithm 2 is faster
    wherever K_pad <= 128 and it launches -- by 1.24x at (64, 32) to 2.0x at
    (64, 128) -- and at (256, 16) by 1.13x; at (256, 32) the two tie (two passes
    1.01x faster, 2.33 vs 2.35 ms), so the rule takes Algorithm 3 there. One pass
    does not launch (shared memory) at (128, 128), (256, 64), (256, 128) and any
    K >= 512. Unlike the A100's, the (256, 16) probe does not invert.
    """
    return k_pad * d_pad <= (8192 if k_pad <= 128 else 4096)


MEASURED_RULES = {"NVIDIA H200": h200_rule}

# Rows from which Algorithm 2 runs warp-specialized (kernels/one_pass_ws.py, where it takes the sweep: tf32x3 on a
# Hopper GPU, d a multiple of 4, one_pass_ws.K_PADS; measured at d_pad = 32 below, and at 250K_16_128 on an H100 on
# 2026-12-05: 0.25 against the Triton kernel's 0.34 ms/iter). On the H200 at 361b4d4
# (results/h200/kernel_measure/one_pass_ws_2026-12-01_361b4d4.csv, one E-step) it was 1.42x faster than the
# Triton kernel at 20M_32_32, 1.34x at 4M_32_32, 1.15x at 1M_32_32, 1.25x at 1M_128_32 and 0.63x at 20K_32_32
# (0.069 vs 0.043 ms: 2.4 row tiles per program). At d085e2d (numerics_dispatch_2026-12-01_d085e2d.csv, same
# kernels with the 128-tile bound) the Triton kernel was faster up to 500K rows (0.1345 vs 0.1440 ms at 500K,
# 0.0859 vs 0.1075 at 250K) and the warp-specialized one from 1M (0.2174 vs 0.2363 ms): the ratio, interpolated
# linearly between 500K and 1M, crosses at ~715 000 rows. Those were single sweeps timed from the host, which
# count the Gluon launch's host time (its TensorDescriptor) while the GPU waits. Graph-replayed 10-iteration fits,
# how turbo_gmm.fit runs, after the warp-specialized kernel's instruction cuts (ws_rows_2026-12-02_ceaf113.csv,
# ms/iter, Triton / warp-specialized): 250K_32_32 0.149-0.186 / 0.113, 500K 0.183-0.191 / 0.150, 1M 0.292 /
# 0.207; 250K_128_32 0.247 / 0.205, 500K 0.423 / 0.322. The warp-specialized kernel wins from the smallest N
# measured there; between 20K (where it lost: 2.4 row tiles per program) and 250K it is not measured.
WS_ONE_PASS_MIN_ROWS = 250_000


def device_name() -> str | None:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def choose_algorithm(K: int, d: int, device: str | None = None, precision: str = "tf32x3") -> str:
    """'one_pass' or 'two_pass' for K components in d dimensions on the named GPU
    (default: the current one); the paper's A100 rule where none was measured.

    Under fp64 the rule is asked at twice d_pad (NOT MEASURED on the H200): the loop-carried state
    Theta(K_pad * d_pad) is float64, twice the registers and shared memory of the float32 state the
    rules were measured on, so Algorithm 2 gets half the K_pad * d_pad budget."""
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    rule = MEASURED_RULES.get(device if device is not None else device_name(), a100_rule)
    return "one_pass" if rule(k_pad, 2 * d_pad if precision == FP64 else d_pad) else "two_pass"


def launch_config(algorithm: str, K: int, d: int, precision: str = "tf32x3") -> LaunchConfig:
    """Tile shape for a (K, d), measured on the H200 (harness/studies/measure.py, 2026-11-30); wherever
    kernels/one_pass_ws.py takes the sweep (d_pad 32 with K_pad <= 128, d_pad 64 with K_pad <= 64, d_pad 128 with
    K_pad <= 32: one_pass_ws.K_PADS) Algorithm 2 runs warp-specialized from WS_ONE_PASS_MIN_ROWS rows (the Triton
    tiles below take the sweep under that, off Hopper and under ieee). Past d_pad 32 that was measured on an H100
    (results/h100_80gb_hbm3/kernel_measure/, 2026-12-05, ms/iter, Triton / warp-specialized at 2f9612d or its
    kernel's first version): 4M_16_128 3.39 / 1.55-1.64, 4M_32_128 7.39 / 1.68-1.69, 4M_16_64 1.72 / 0.84-0.85,
    4M_32_64 1.47 / 0.96, 4M_64_64 2.67 / 1.46-1.52, 1M_16_128 0.95 / 0.52, 250K_16_128 0.34 / 0.25.
    fp64: :func:`fp64_launch_config`.

    tf32x3 splits every dot operand in registers, so the kernels are register
    bound: fewer rows per tile as the lifted width 2*d_pad or K_pad grows, and no
    software pipelining at d_pad = 128 where shared memory runs out.
    """
    if precision == FP64:
        return fp64_launch_config(algorithm, K, d)
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    if algorithm == "one_pass":
        # one_pass_overlap where one_pass_ws.overlaps (d_pad 32, K_pad 16 or 32): each consumer's next score issued
        # before this tile's exponentials; on an H100 1-2% faster at 4M and 20M rows, 5-6% at K = 16, 1-2% slower at
        # 1M_32_32 (results/h100_80gb_hbm3/kernel_measure/one_pass_overlap_{a,b}_2026-12-05_a91e532.csv)
        ws = dict(warp_specialized_one_pass=1, warp_specialized_one_pass_rows=WS_ONE_PASS_MIN_ROWS, one_pass_overlap=1)
        if d_pad >= 128:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=1, **ws)
        if d_pad == 32 and k_pad >= 64:
            # results/h200/kernel_measure/tune_*_e5c5ab2.csv (2026-11-30): the tiles below need 122 KB (32 rows x 2 stages at
            # K_pad 128) and 131 KB (64 rows x 3 stages at K_pad 64) of shared memory, so one program fits per SM;
            # one stage of 32 rows fits two: 1M_128_32 1.09 -> 0.82 ms, 4M_64_32 2.13 -> 2.05 ms per iteration.
            return LaunchConfig(block_n=32, num_warps=4, num_stages=1, **(ws if k_pad <= 128 else {}))
        if d_pad == 64 and k_pad <= 32:
            # results/h200/kernel_measure/*_2026-11-30_f9e8316.csv, the lift's halves contracted apart: at K_pad 16 a
            # 168-register cap fits three programs per SM (4M_16_64 1.83 -> 1.62 ms); at K_pad 32, 64 rows
            # in two stages (4M_32_64 2.24 -> 1.52 ms).
            if k_pad == 16:
                return LaunchConfig(block_n=32, num_warps=4, num_stages=1, max_registers=168, programs_per_sm=3, **ws)
            return LaunchConfig(block_n=64, num_warps=4, num_stages=2, **ws)
        if k_pad >= 128 or d_pad >= 64:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=2, **(ws if d_pad == 64 else {}))
        return LaunchConfig(block_n=64, num_warps=4, num_stages=3, **(ws if d_pad == 32 else {}))
    if d_pad >= 128:
        return LaunchConfig(block_n=32, block_k=16, num_warps=4, num_stages=1)
    if d_pad <= 32:
        # results/h200/kernel_measure/m_*_2026-11-30_cd90398.csv. Pass 1 at 256 rows x 8 warps: 2.15 -> 1.32 ms at
        # 1M_512_32, 16.0 -> 9.5 ms at 1M_4096_32. Pass 2 fits two CTAs per SM (240 registers, 115 KB shared
        # memory), 264 at once; 16 programs per SM = 2112 = 8 full waves, and the component-tile counts of
        # K = 512, 1024, 4096 (8, 16, 64) all divide it, so no wave runs part-empty: pass 2 at 1M_4096_32
        # 33.9 ms (2 per SM: 320 programs, 1.2 waves) -> 29.2 (4: 576, 2.2) -> 23.5 (16: 2112, 8);
        # 1M_1024_32 6.22 -> 6.16 ms (4 -> 16 per SM); 1M_512_32 unchanged. At d_pad = 32 pass 2 is the
        # warp-specialized kernel (kernels/two_pass_ws.py; kernel_measure/ws_pass2_2026-11-30_0b70456.jsonl, pass 2 alone):
        # 2.29 -> 1.70 ms at 1M_512_32, 4.40 -> 3.28 at 1M_1024_32, 16.9 -> 12.2 at 1M_4096_32; 16 per SM
        # as the Triton pass (at 2 per SM its float32 accumulators sum 8x more rows: s, u errors 6x larger).
        return LaunchConfig(block_n=64, block_k=64, num_warps=4, num_stages=2, programs_per_sm=16,
                            normalizer_block_n=256, normalizer_warps=8, warp_specialized_pass2=int(d_pad == 32))
    return LaunchConfig(block_n=64, block_k=64, num_warps=4, num_stages=2)


def fp64_launch_config(algorithm: str, K: int, d: int) -> LaunchConfig:
    """Tiles for precision fp64: float64 doubles the registers of every operand and accumulator, and the
    products are mma.sync (DMMA), not wgmma, so no warp-specialized kernel. Measured on the H200 at 621461b
    (kernel_measure/fp64_tiles_one_pass_2026-12-01_621461b.csv, 10-iteration graphed fits; the sm_90 offline
    compile's spill-free tiles were the starting points): Algorithm 2 up to K_pad * d_pad = 1024 at 64 rows,
    4 warps, 2 stages (20M_32_32 14.0 -> 8.6 ms, 4M_32_32 2.90 -> 1.77, 4M_64_16 2.24 -> 2.04, against 32
    rows); at K_pad >= 128, 64 rows in 8 warps and 3 stages (1M_128_32 1.62 -> 1.51); at d_pad >= 128, 32 rows,
    4 warps, 3 stages (4M_16_128 6.16 -> 4.91); else 64 rows, 4 warps, 1 stage, spills and all (at bc62f9f,
    kernel_measure/fp64_tiles_one_pass{,_b}_2026-12-02_bc62f9f.csv: 4M_64_32 8.71 -> 3.24 ms with 42 B spilled,
    4M_32_64 6.08 -> 3.51, against 16 rows; 32 or 128 rows slower at both). Algorithm 3 at d_pad <= 32: pass 2 at
    64 x 32 tiles, pass 1 at 128 rows x 32 components in 8 warps (fp64_tiles_two_pass_*: within 1.3% of the best of
    five at 1M_256_32, 1M_1024_32, 1M_4096_32). sum_tiles = 0: float64 running sums need no bound
    (turbo_gmm.lift.accumulate_statistics)."""
    k_pad, d_pad = pow2_at_least_16(K), pow2_at_least_16(d)
    if algorithm == "one_pass":
        if k_pad * d_pad <= 1024:
            return LaunchConfig(block_n=64, num_warps=4, num_stages=2, sum_tiles=0)
        if k_pad >= 128:
            return LaunchConfig(block_n=64, num_warps=8, num_stages=3, sum_tiles=0)
        if d_pad >= 128:
            return LaunchConfig(block_n=32, num_warps=4, num_stages=3, sum_tiles=0)
        return LaunchConfig(block_n=64, num_warps=4, num_stages=1, sum_tiles=0)
    if d_pad <= 32:
        return LaunchConfig(block_n=64, block_k=32, num_warps=4, num_stages=2, programs_per_sm=16,
                            normalizer_block_n=128, normalizer_block_k=32, normalizer_warps=8, sum_tiles=0)
    return LaunchConfig(block_n=16, block_k=16, num_warps=4, num_stages=1, sum_tiles=0)
