"""Algorithm 3's pass 2, warp-specialized (Gluon; Hopper, d_pad = 32, tf32x3).

The Triton pass 2 moves its A operands register -> shared -> register to reach wgmma's layout, which
bounds it on shared-memory bandwidth. Here a one-warp loader TMA-copies each row tile into a ring (twice:
the statistics' operand is the lifted tile [x - c | (x - c)^2] transposed, its lanes permuted so no load
meets a bank twice, :func:`transposed_lift`); the compute warpgroup loads both operands straight into
wgmma's layout, lifts and splits them in registers, and stores only Gamma's TF32 halves.

The sums, grid and float64 commit are turbo_gmm.diag.two_pass.statistics_pass's; the score's six products
run in the Triton passes' order, so S - L <= 0 holds here as there. 1.3-1.4x the Triton pass 2 at
K = 512-4096, d = 32 on the H200."""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..launch import hopper_kernels_switched_off, statistics_pass_grid, weight_arguments
from ..tf32x3 import TF32_HALF_UNIT, TF32_MASK

D_PAD = 32  # the one lane width this kernel takes
STAGES = 2  # row tiles in flight between the loader and the compute warpgroup
LOADER_REGISTERS = 24


@gluon.jit
def tf32_high(x):
    """x's TF32 high half (turbo_gmm.tf32x3.tf32_high for Gluon, which cannot call a triton.jit function)."""
    return ((x.to(gl.int32, bitcast=True) + TF32_HALF_UNIT) & TF32_MASK).to(gl.float32, bitcast=True)


@gluon.jit
def loop_variant_zero(j):
    """0 for every tile index j (< 2^30) in a way the compiler cannot fold: buffers indexed by it get their wgmma
    descriptors computed in the loop, in uniform registers. Indexed by constants, the hoisted descriptors
    spilled (hundreds of bytes a thread) and their loads missed L1."""
    return j // 1073741824


@gluon.jit
def exp_ftz(x):
    """exp(x) as gl.exp computes it but flushing results below 2^-126 to zero: no compare and multiplies around
    every MUFU.EX2. A Gamma below 1e-38 is nothing to the statistics."""
    return gl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634],
                                     dtype=gl.float32, is_pure=True, pack=1)


@gluon.jit
def transposed_lift(both, BLOCK_N: gl.constexpr, D_PAD: gl.constexpr):
    """A ring stage's two copies of a row tile viewed as the statistics' A operand [x - c | (x - c)^2]^T
    (2 D_PAD lanes x BLOCK_N rows), lanes in :func:`lane_columns`'s order, in which a warp's loads cover all 32
    banks (a plain transpose conflicts 2-way under the ring's swizzle)."""
    gl.static_assert(D_PAD == 32, "the lane order is laid out for 32 columns (128-byte rows)")
    return both.reshape([2, BLOCK_N, 2, 4, 4]).permute((0, 3, 2, 4, 1)).reshape([2 * D_PAD, BLOCK_N])


@gluon.jit
def lane_columns(lanes, D_PAD: gl.constexpr):
    """The lifted lane (h * D_PAD + column of X) that lane ``lanes`` of :func:`transposed_lift` holds: within a
    copy h, lane m holds column m % 4 + 16 * (m // 4 % 2) + 4 * (m // 8)."""
    m = lanes % D_PAD
    return lanes - m + m % 4 + 16 * (m // 4 % 2) + 4 * (m // 8)


@gluon.jit
def centers(center, a_op: gl.constexpr, D_PAD: gl.constexpr):
    """The center as the score's (1, D_PAD) row and as the statistics' (2 D_PAD, 1) column, and which lanes are
    squared. No mask past d: TMA fills zeros there and the center is zero."""
    c = gl.load(center + gl.arange(0, D_PAD, layout=gl.SliceLayout(0, a_op)))[None, :]
    lanes = gl.arange(0, 2 * D_PAD, layout=gl.SliceLayout(1, a_op))
    c_t = gl.load(center + lane_columns(lanes, D_PAD) % D_PAD)[:, None]
    return c, c_t, (lanes >= D_PAD)[:, None]


@gluon.jit
def row_tile_loader(x_desc, ring, ready, empty, first, n_tiles, stride, BLOCKS: gl.constexpr = 1):
    """Loader partition: each of the program's row tiles into the next free ring stage (BLOCKS 32-column blocks in
    turn, or at BLOCKS = 1 its one block twice)."""
    PAIRS: gl.constexpr = (BLOCKS + 1) // 2
    stages: gl.constexpr = ring.type.shape[0] // PAIRS
    block_n: gl.constexpr = x_desc.block_type.shape[0]
    i = 0
    for tile in range(first, n_tiles, stride):
        stage = i % stages
        mbarrier.wait(empty.index(stage), ((i // stages) & 1) ^ 1)  # a fresh barrier passes phase 1
        mbarrier.expect(ready.index(stage), 2 * PAIRS * x_desc.block_type.nbytes)
        for box in gl.static_range(2 * PAIRS):
            tma.async_copy_global_to_shared(x_desc, [tile * block_n, (box % BLOCKS) * 32], ready.index(stage),
                                            ring.index(stage * PAIRS + box // 2).slice((box % 2) * block_n, block_n))
        i += 1


@gluon.jit
def score_products(lin, w_smem, w0, acc, ADD: gl.constexpr = False):
    """The score's six TF32 products of 32 columns of x - c (``lin``) and their squares against W^T's halves,
    issued without a wait in the Triton passes' order (lo.hi, hi.lo, hi.hi); returns the pending accumulator
    and the operands it reads until waited for."""
    sq = lin * lin
    lin_hi = tf32_high(lin)
    lin_lo = lin - lin_hi
    sq_hi = tf32_high(sq)
    sq_lo = sq - sq_hi
    s = warpgroup_mma(lin_lo, w_smem.index(w0).permute((1, 0)), acc, use_acc=ADD, is_async=True)
    s = warpgroup_mma(sq_lo, w_smem.index(w0 + 2).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(lin_hi, w_smem.index(w0 + 1).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(sq_hi, w_smem.index(w0 + 3).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(lin_hi, w_smem.index(w0).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(sq_hi, w_smem.index(w0 + 2).permute((1, 0)), s, is_async=True)
    return s, lin_hi, lin_lo, sq_hi, sq_lo


@gluon.jit
def _compute(ring, ready, empty, w_smem, gh_all, gl_all, center, b, L, sw, N, first, n_tiles, stride, comp0,
             BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, D_PAD: gl.constexpr, WEIGHTED: gl.constexpr):
    """Compute warpgroup: score, Gamma and statistics of each row tile into float32 running sums (each tile's
    product into a fresh accumulator); WEIGHTED multiplies Gamma by the row's sample weight."""
    LANES: gl.constexpr = 2 * D_PAD
    stages: gl.constexpr = ring.type.shape[0]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_K, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=1)

    HALF_N: gl.constexpr = BLOCK_N // 2
    c, c_t, squared = centers(center, a_op, D_PAD)
    comps = comp0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, mma))
    bias = gl.load(b + comps)[None, :]
    n_acc = gl.zeros([BLOCK_K], gl.float32, gl.SliceLayout(0, mma))
    su_sum = gl.zeros([LANES, BLOCK_K], gl.float32, mma)  # [s | u]^T
    zero_su = gl.zeros([LANES, BLOCK_K], gl.float32, mma)
    zero = gl.zeros([BLOCK_N, BLOCK_K], gl.float32, mma)

    i = 0
    for tile in range(first, n_tiles, stride):
        stage = i % stages
        w0 = loop_variant_zero(tile)  # the buffers' descriptors computed here, not hoisted (loop_variant_zero)
        gh_smem = gh_all.index(w0)
        gl_smem = gl_all.index(w0)
        rows = tile * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
        row_ok = rows < N
        Lr = gl.load(L + rows, mask=row_ok, other=0.0)[:, None]
        mbarrier.wait(ready.index(stage), (i // stages) & 1)
        lifted_t = transposed_lift(ring.index(stage), BLOCK_N, D_PAD)  # the stage holds the row tile twice
        # the same products in the same order as pass 1, so S - L stays <= 0. Taken lane half by lane half, the fit
        # at 1M_4096_32 went NaN at its 8th iteration (our reading: Gamma = exp(S - L) overflowed at floored
        # components)
        s, lin_hi, lin_lo, sq_hi, sq_lo = score_of_stage(ring, stage, c, w_smem, w0, zero, a_op, BLOCK_N)
        s, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(s, lin_hi, lin_lo, sq_hi, sq_lo))

        g = exp_ftz(s + bias - Lr)
        if WEIGHTED:
            g = g * gl.load(sw + rows, mask=row_ok, other=0.0)[:, None]
        g = gl.where(row_ok[:, None], g, 0.0)
        n_acc += gl.sum(g, 0)
        g_hi = tf32_high(g)
        gh_smem.store(g_hi)
        gl_smem.store(g - g_hi)
        fence_async_shared()
        su = zero_su
        for half in gl.static_range(2):  # the statistics over the tile's two halves of rows: half the registers
            xt = lifted_t.slice(half * HALF_N, HALF_N, dim=1).load(a_op)  # (LANES, HALF_N): x^T twice
            xl = xt - c_t
            xl = gl.where(squared, xl * xl, xl)
            xt_hi = tf32_high(xl)
            xt_lo = xl - xt_hi
            g_hi_rows = gh_smem.slice(half * HALF_N, HALF_N)
            g_lo_rows = gl_smem.slice(half * HALF_N, HALF_N)
            # a fresh accumulator per tile: use_acc=False on its first product
            su = warpgroup_mma(xt_lo, g_hi_rows, su, use_acc=half > 0, is_async=True)
            su = warpgroup_mma(xt_hi, g_lo_rows, su, is_async=True)
            su = warpgroup_mma(xt_hi, g_hi_rows, su, is_async=True)
            su, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo, g_hi_rows, g_lo_rows))
        su_sum += su
        fence_async_shared()  # this stage's loads before the loader's next TMA into it
        mbarrier.arrive(empty.index(stage), count=1)
        i += 1
    return n_acc, su_sum


@gluon.jit
def score_of_stage(ring, stage, c, w_smem, w0, zero, a_op: gl.constexpr, BLOCK_N: gl.constexpr):
    """At D_PAD = 32: :func:`score_products` of the tile in ring stage ``stage``."""
    return score_products(ring.index(stage).slice(0, BLOCK_N).load(a_op) - c, w_smem, w0, zero)


# the grid's size (n_splits) is not specialized on (== 1, divisible by 16): it varies with N by whole waves
# (launch.sum_bounded), and one compile serves every N
@gluon.jit(do_not_specialize=["n_splits"])
def _statistics_kernel_ws(
    x_desc, center, W, b, L, n_out, su_out,
    N, n_tiles, n_splits,
    K_PAD: gl.constexpr, D_PAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
    LOADER_REGS: gl.constexpr,
    sw=None, WEIGHTED: gl.constexpr = False,  # sw (N,) float32: the sample weights, read only when WEIGHTED
):
    ring_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    ring = gl.allocate_shared_memory(gl.float32, [STAGES, 2 * BLOCK_N, D_PAD], ring_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)

    # W^T's component tile, each lane half split into TF32 halves: (hi, lo) of x - c, then of (x - c)^2
    lanes_fast: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    w_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    comp0 = gl.program_id(0) * BLOCK_K
    kk = comp0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, lanes_fast))
    lanes = gl.arange(0, D_PAD, layout=gl.SliceLayout(0, lanes_fast))
    w_smem = gl.allocate_shared_memory(gl.float32, [4, BLOCK_K, D_PAD], w_layout)
    for half in gl.static_range(2):
        w = gl.load(W + (half * D_PAD + lanes)[None, :] * K_PAD + kk[:, None])
        w_hi = tf32_high(w)
        w_smem.index(2 * half).store(w_hi)
        w_smem.index(2 * half + 1).store(w - w_hi)
    g_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2,
                                                  transposed=True)  # Gamma rows-contiguous: K-major as wgmma's B
    # Gamma's TF32 halves in two allocations: in one, the compiler's shared-memory hazard analysis takes the store
    # of one half for a conflict with the other (kernels/diag/one_pass_ws.py: a warpgroup barrier between them)
    gh_all = gl.allocate_shared_memory(gl.float32, [1, BLOCK_N, BLOCK_K], g_layout)
    gl_all = gl.allocate_shared_memory(gl.float32, [1, BLOCK_N, BLOCK_K], g_layout)
    fence_async_shared()

    split = gl.program_id(1)
    n, su = gl.warp_specialize([
        (_compute, (ring, ready, empty, w_smem, gh_all, gl_all, center, b, L, sw, N, split, n_tiles, n_splits, comp0,
                    BLOCK_N, BLOCK_K, D_PAD, WEIGHTED)),
        (row_tile_loader, (x_desc, ring, ready, empty, split, n_tiles, n_splits)),
    ], [1], [LOADER_REGS])

    mma: gl.constexpr = su.type.layout
    comps = comp0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, mma))
    gl.atomic_add(n_out + comps, n.to(gl.float64), sem="relaxed")
    su_lanes = lane_columns(gl.arange(0, 2 * D_PAD, layout=gl.SliceLayout(1, mma)), D_PAD)
    gl.atomic_add(su_out + comps[None, :] * (2 * D_PAD) + su_lanes[:, None], su.to(gl.float64), sem="relaxed")


def refusal(X, W, cfg) -> str | None:
    """Why this kernel cannot take the pass (None when it can): d_pad = 32 with d a multiple of 4 (TMA's
    16-byte row stride, rows contiguous), component tiles of 32 or 64 dividing K_pad, a Hopper GPU."""
    d, d_pad, k_pad = X.shape[1], W.shape[0] // 2, W.shape[1]
    if (off := hopper_kernels_switched_off()) is not None:
        return off
    if d_pad != D_PAD or d % 4 or X.stride(1) != 1 or X.stride(0) % 4 or cfg.block_k not in (32, 64) or k_pad % cfg.block_k:
        return (f"the warp-specialized pass 2 takes d_pad = 32 with d a multiple of 4 (rows contiguous) and "
                f"component tiles of 32 or 64 dividing K_pad; got d = {d}, K_pad = {k_pad}, block_k = {cfg.block_k}")
    if not X.is_cuda or torch.cuda.get_device_capability(X.device)[0] != 9:
        return f"the warp-specialized pass 2 needs a Hopper GPU (sm_90); X is on {X.device}"
    return None


def statistics_pass_ws(X, center, W, b, K: int, cfg, L, n, su, sample_weight=None) -> None:
    """:func:`turbo_gmm.diag.two_pass.statistics_pass` under tf32x3 where :func:`refusal` is None, on
    :func:`turbo_gmm.launch.statistics_pass_grid`'s grid."""
    why = refusal(X, W, cfg)
    if why:
        raise ValueError(why)
    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    block_n, block_k = 64, cfg.block_k  # one warpgroup: wgmma's M = 64 rows (score) and 64 lanes (statistics)
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    x_desc = TensorDescriptor(X, [N, d], [X.stride(0), 1], [block_n, d_pad], layout)
    n_tiles = triton.cdiv(N, block_n)
    k_tiles, n_splits = statistics_pass_grid(K, block_k, n_tiles, X.device, cfg)
    # 4 + 4 warps (the loader's warpgroup); at 128 registers per thread two programs fit an SM and the
    # compute warpgroup gets what the loader does not take: (128 * 8 - 24 * 4) / 4 = 232 (sm_90 compile:
    # 8 bytes of stack, 99 KB shared at 64 components; 66 KB at 32)
    _statistics_kernel_ws[(k_tiles, n_splits)](x_desc, center, W, b, L, n, su, N, n_tiles, n_splits,
                                               K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=block_n, BLOCK_K=block_k,
                                               STAGES=STAGES, LOADER_REGS=LOADER_REGISTERS, num_warps=4,
                                               maxnreg=128, **weight_arguments(sample_weight))

