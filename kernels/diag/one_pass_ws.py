"""Algorithm 2, warp-specialized (Gluon; Hopper, tf32x3; d_pad 32 at K_pad <= 128, 64 at <= 64, 128 at <= 32).

The Triton one pass is register bound and waits on each TF32 product, so the tensor cores idle through the
exponentials. Here one persistent program an SM keeps W's TF32 halves in shared memory and splits the work:
a one-warp TMA loader streams 64-row tiles into a ring; two consumer warpgroups (setmaxnreg 240) take tiles
in turn, each issuing the score's six products under one wait, then Gamma, then the statistics' products
into a fresh accumulator added into float32 running sums. ``OVERLAP`` issues a consumer's next score before
this tile's exponentials; ``PINGPONG`` (FlashAttention-3's schedule) is off, measured no faster. The score is
summed in the Triton kernel's order, so S matches diag/one_pass.py; ``dispatch`` routes it by N."""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..launch import SUM_TILES, hopper_kernels_switched_off, sm_count, sum_bounded, weight_arguments
from .two_pass_ws import (centers, exp_ftz, lane_columns, loop_variant_zero, row_tile_loader, score_of_stage,
    score_products, tf32_high, transposed_lift)

BLOCK_N = 64  # rows per tile: wgmma's M for the score, and the 64 lifted lanes of a statistics chunk
K_PADS = {32: (16, 32, 64, 128), 64: (16, 32, 64), 128: (16, 32)}  # the component widths it takes per d_pad (W,
# Gamma and the accumulators on chip; past d_pad = 32 one set of running sums per chunk: K_PAD * D_PAD / 64
# registers a thread, within the consumers' 240 up to K_pad * d_pad = 4096)
BOX_COLUMNS = 32  # TMA's box: one 128-byte swizzle of float32
CONSUMERS = 2
LOADER_REGISTERS = 24
REGISTERS = 65536  # a multiprocessor's, all for the one program
# setmaxnreg's split, multiples of 8: the launch's registers a thread over the consumers' and the loader's warpgroups
# (its one warp rounds up to a warpgroup), 168; what the loader's 24 leave each consumer, 240
LAUNCH_REGISTERS = REGISTERS // (128 * (CONSUMERS + 1)) // 8 * 8
CONSUMER_REGISTERS = (REGISTERS - 128 * LOADER_REGISTERS) // (128 * CONSUMERS) // 8 * 8
SHARED_LIMIT = 232448  # bytes per program the H200 allows (cudaDevAttrMaxSharedMemoryPerBlockOptin)
MIN_STAGES = 2  # each consumer holds one stage while it splits its tile
MAX_STAGES = 4
OVERLAP_K_PADS = (16, 32)  # where _consume_overlapped compiles without spills at d_pad 32 (K_pad 64: 393 LDL/STL)
OVERLAP_MAX_STAGES = 6  # overlapped, each consumer holds two stages: the ring keeps two more for the loader
N_TILE_MAX_K_PAD = gl.constexpr(32)  # the widest K_pad whose n is summed as whole Gamma tiles (_consume)
SCRATCH_MARGIN = 8192  # the compiler's reduction and layout-conversion scratch (sm_90 compile: ~2-4 KB)


@gluon.jit
def _take_turn(turn, turns, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """Wait for this consumer's token (the first wait of consumer 0 passes on the fresh barrier)."""
    if PINGPONG:
        mbarrier.wait(turn.index(CONSUMER), (turns + CONSUMER + 1) & 1)
    return turns + 1


@gluon.jit
def _pass_turn(turn, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - CONSUMER), count=1)


@gluon.jit
def _chunk_lanes(lanes, CHUNK: gl.constexpr, D_PAD: gl.constexpr):
    """The lifted lane (h * D_PAD + column, h = 1 for (x - c)^2) that lane ``lanes`` of statistics chunk CHUNK
    holds: at D_PAD = 32 two_pass_ws.lane_columns; wider, chunks < PAIRS hold x - c of blocks 2p, 2p + 1 and the
    rest their squares."""
    BLOCKS: gl.constexpr = D_PAD // 32
    PAIRS: gl.constexpr = (BLOCKS + 1) // 2
    if BLOCKS == 1:
        return lane_columns(lanes, D_PAD)
    else:
        return (CHUNK // PAIRS) * D_PAD + 64 * (CHUNK % PAIRS) + lane_columns(lanes, 32)


@gluon.jit
def _chunk_view(ring, stage, CHUNK: gl.constexpr, BLOCK_N: gl.constexpr, D_PAD: gl.constexpr):
    """Chunk CHUNK of the statistics' A operand (64 lifted lanes x BLOCK_N rows, still to be centered and, for the
    squared lanes, squared): a pair of the stage's 32-column blocks transposed (two_pass_ws.transposed_lift)."""
    BLOCKS: gl.constexpr = D_PAD // 32
    PAIRS: gl.constexpr = (BLOCKS + 1) // 2
    return transposed_lift(ring.index(stage * PAIRS + CHUNK % PAIRS), BLOCK_N, 32)


@gluon.jit
def _centered_pair(ring, stage, center, PAIR: gl.constexpr, a_op: gl.constexpr, BLOCK_N: gl.constexpr,
                   D_PAD: gl.constexpr):
    """x - c of column blocks 2 PAIR, 2 PAIR + 1 (64 lifted lanes x BLOCK_N) from the ring, past D_PAD = 32:
    loaded and centered once for chunk PAIR and its squared chunk."""
    BLOCKS: gl.constexpr = D_PAD // 32
    gl.static_assert(BLOCKS >= 2, "at D_PAD = 32 the chunk's lanes are half squared: _consume takes it")
    lanes = gl.arange(0, 64, layout=gl.SliceLayout(1, a_op))
    lifted = _chunk_lanes(lanes, PAIR, D_PAD)
    return _chunk_view(ring, stage, PAIR, BLOCK_N, D_PAD).load(a_op) - gl.load(center + lifted % D_PAD)[:, None]


@gluon.jit
def _statistics_chunk(xt, gh_smem, gl_smem, zero):
    """One chunk's [s | u]^T products (64 lifted lanes x K_PAD) of the tile past D_PAD = 32: its A operand ``xt``
    (:func:`_centered_pair`, or its square) split into TF32 halves, against Gamma's halves."""
    xt_hi = tf32_high(xt)
    xt_lo = xt - xt_hi
    su = warpgroup_mma(xt_lo, gh_smem, zero, use_acc=False, is_async=True)  # (64, K_PAD): 64 == BLOCK_N
    su = warpgroup_mma(xt_hi, gl_smem, su, is_async=True)
    su = warpgroup_mma(xt_hi, gh_smem, su, is_async=True)
    return su, xt_hi, xt_lo


@gluon.jit
def _commit_chunk(su_out, su_run, CHUNK: gl.constexpr, K_PAD: gl.constexpr, D_PAD: gl.constexpr):
    """A chunk's float32 running sums ([s | u]^T of its 64 lifted lanes) added into [s | u] in float64, once."""
    mma: gl.constexpr = su_run.type.layout
    comps = gl.arange(0, K_PAD, layout=gl.SliceLayout(0, mma))
    lifted = _chunk_lanes(gl.arange(0, 64, layout=gl.SliceLayout(1, mma)), CHUNK, D_PAD)
    gl.atomic_add(su_out + comps[None, :] * (2 * D_PAD) + lifted[:, None], su_run.to(gl.float64), sem="relaxed")


@gluon.jit
def _consume(ring, ready, empty, turn, gamma_free, w_smem, gh_all, gl_all, b_smem, center, sw, n_out, su_out, ll_out, N,
             n_tiles, first, stride, CONSUMER: gl.constexpr, K_PAD: gl.constexpr, D_PAD: gl.constexpr,
             BLOCK_N: gl.constexpr, PINGPONG: gl.constexpr, WEIGHTED: gl.constexpr):
    """Consumer warpgroup: tiles CONSUMER, CONSUMER + 2, ...; commits its own n, [s | u] and ell (weighted by
    ``sw`` when WEIGHTED). Past D_PAD = 32 the score is taken a 32-column block at a time and the statistics in
    chunks of 64 lifted lanes (:func:`_chunk_lanes`), each with its own running sums."""
    gl.static_assert(BLOCK_N == 64, "the score's and the statistics' accumulators share one shape")
    BLOCKS: gl.constexpr = D_PAD // 32
    PAIRS: gl.constexpr = (BLOCKS + 1) // 2
    stages: gl.constexpr = ring.type.shape[0] // PAIRS
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, K_PAD, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=1)
    SHARED_GAMMA: gl.constexpr = gh_all.type.shape[0] == 1  # one Gamma buffer for both consumers, in turn

    # x - c needs no mask past d (two_pass_ws.centers)
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, a_op))
    if BLOCKS == 1:  # the score's centers; the statistics' one chunk: its lanes' centers, which lanes are squared
        c, c_t, squared = centers(center, a_op, D_PAD)
    zero = gl.zeros([BLOCK_N, K_PAD], gl.float32, mma)
    # n: at K_PAD <= N_TILE_MAX_K_PAD Gamma tiles are summed elementwise in the score's layout and reduced over
    # rows once, after the sweep: a tile's column sum crosses the warpgroup's four warps through shared memory
    # (four warpgroup barriers a tile in the sm_90 SASS). Past K_PAD = 32 the tile's K_PAD / 2 registers a thread
    # spill (sm_90 compile: 80 B of stack at K_PAD = 64 against 8): each tile's column sums go into one component
    # per thread there.
    N_TILE: gl.constexpr = K_PAD <= N_TILE_MAX_K_PAD
    per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    n_comps = gl.arange(0, K_PAD, layout=per_thread)
    if N_TILE:
        n_run = gl.zeros([BLOCK_N, K_PAD], gl.float32, mma)
    else:
        n_run = gl.zeros([K_PAD], gl.float32, per_thread)
    su_run0 = gl.zeros([64, K_PAD], gl.float32, mma)  # [s | u]^T, chunk by chunk (_chunk_lanes)
    if BLOCKS >= 2:
        su_run1 = gl.zeros([64, K_PAD], gl.float32, mma)
    if BLOCKS >= 4:
        su_run2 = gl.zeros([64, K_PAD], gl.float32, mma)
        su_run3 = gl.zeros([64, K_PAD], gl.float32, mma)
    ll_run = gl.zeros([BLOCK_N], gl.float64, gl.SliceLayout(1, mma))

    program_tiles = (n_tiles - first + stride - 1) // stride
    turns = 0
    gamma_turns = 0
    for j in range(CONSUMER, program_tiles, 2):
        stage = j % stages
        w0 = loop_variant_zero(j)  # W's and Gamma's buffers indexed by it: their descriptors stay in the loop
        if SHARED_GAMMA:  # this consumer's Gamma halves: the statistics' B operands
            gh_smem = gh_all.index(w0)
            gl_smem = gl_all.index(w0)
        else:
            gh_smem = gh_all.index(w0 + CONSUMER)
            gl_smem = gl_all.index(w0 + CONSUMER)
        rows = (first + j * stride) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
        row_ok = rows < N
        mbarrier.wait(ready.index(stage), (j // stages) & 1)

        if BLOCKS == 1:
            turns = _take_turn(turn, turns, CONSUMER, PINGPONG)
            s, lin_hi, lin_lo, sq_hi, sq_lo = score_of_stage(ring, stage, c, w_smem, w0, zero, a_op, BLOCK_N)
            _pass_turn(turn, CONSUMER, PINGPONG)
            s, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(s, lin_hi, lin_lo, sq_hi, sq_lo))
        else:
            turns = _take_turn(turn, turns, CONSUMER, PINGPONG)
            s = zero
            for blk in gl.static_range(BLOCKS):  # W^T's halves of block blk: w_smem 4 blk + (0, 1, 2, 3)
                lin = ring.index(stage * PAIRS + blk // 2).slice((blk % 2) * BLOCK_N, BLOCK_N).load(a_op)
                lin = lin - gl.load(center + blk * 32 + cols)[None, :]
                s, lin_hi, lin_lo, sq_hi, sq_lo = score_products(lin, w_smem, w0 + 4 * blk, s, blk > 0)
                s, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(s, lin_hi, lin_lo, sq_hi, sq_lo))
            _pass_turn(turn, CONSUMER, PINGPONG)

        g, m, lam, weight = _responsibilities(s, b_smem, sw, rows, row_ok, WEIGHTED)
        if N_TILE:
            n_run += g
        else:
            n_run += gl.convert_layout(gl.sum(g, 0), per_thread)
        ll_run += gl.where(row_ok, weight * (m + gl.log(lam)), 0.0).to(gl.float64)
        g_hi = tf32_high(g)
        if SHARED_GAMMA:  # the other consumer's statistics products have read the buffer
            gamma_turns = _take_turn(gamma_free, gamma_turns, CONSUMER, True)
        gh_smem.store(g_hi)
        gl_smem.store(g - g_hi)

        if BLOCKS == 1:
            # (64, BLOCK_N): [x - c | (x - c)^2]^T; both A operands in registers, so the stage is free
            xt = _lifted_transpose(ring, stage, c_t, squared, a_op, BLOCK_N)
            xt_hi = tf32_high(xt)
            xt_lo = xt - xt_hi
            fence_async_shared()  # Gamma's stores before wgmma reads them; the ring's loads before the next TMA
            mbarrier.arrive(empty.index(stage), count=1)
            turns = _take_turn(turn, turns, CONSUMER, PINGPONG)
            su = warpgroup_mma(xt_lo, gh_smem, zero, use_acc=False, is_async=True)  # (64, K_PAD): 64 == BLOCK_N
            su = warpgroup_mma(xt_hi, gl_smem, su, is_async=True)
            su = warpgroup_mma(xt_hi, gh_smem, su, is_async=True)
            _pass_turn(turn, CONSUMER, PINGPONG)
            su, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo))
            _pass_turn(gamma_free, CONSUMER, SHARED_GAMMA)
            su_run0 += su
        else:
            fence_async_shared()  # Gamma's stores before wgmma reads them
            turns = _take_turn(turn, turns, CONSUMER, PINGPONG)
            # chunk p (x - c of the pair p of column blocks) and chunk p + PAIRS (their squares) from one load
            xt = _centered_pair(ring, stage, center, 0, a_op, BLOCK_N, D_PAD)
            if BLOCKS == 2:  # the pair is in registers: the stage is free
                fence_async_shared()
                mbarrier.arrive(empty.index(stage), count=1)
            su, xt_hi, xt_lo = _statistics_chunk(xt, gh_smem, gl_smem, zero)
            su, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo))
            su_run0 += su
            su, xt_hi, xt_lo = _statistics_chunk(xt * xt, gh_smem, gl_smem, zero)
            su, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo))
            if BLOCKS == 2:
                su_run1 += su
            else:
                su_run2 += su
                xt = _centered_pair(ring, stage, center, 1, a_op, BLOCK_N, D_PAD)
                fence_async_shared()
                mbarrier.arrive(empty.index(stage), count=1)
                su, xt_hi, xt_lo = _statistics_chunk(xt, gh_smem, gl_smem, zero)
                su, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo))
                su_run1 += su
                su, xt_hi, xt_lo = _statistics_chunk(xt * xt, gh_smem, gl_smem, zero)
                su, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo))
                su_run3 += su
            _pass_turn(turn, CONSUMER, PINGPONG)
            _pass_turn(gamma_free, CONSUMER, SHARED_GAMMA)

    if PINGPONG and CONSUMER == 1:
        if program_tiles % 2 == 1:  # consumer 0 has one tile more: its last statistics phase waits for a token
            turns = _take_turn(turn, turns, CONSUMER, PINGPONG)
            _pass_turn(turn, CONSUMER, PINGPONG)

    if N_TILE:
        n_sum = gl.convert_layout(gl.sum(n_run, 0), per_thread)
    else:
        n_sum = n_run
    gl.atomic_add(n_out + n_comps, n_sum.to(gl.float64), sem="relaxed")  # relaxed: see lift.commit_statistics
    _commit_chunk(su_out, su_run0, 0, K_PAD, D_PAD)
    if BLOCKS >= 2:
        _commit_chunk(su_out, su_run1, 1, K_PAD, D_PAD)
    if BLOCKS >= 4:
        _commit_chunk(su_out, su_run2, 2, K_PAD, D_PAD)
        _commit_chunk(su_out, su_run3, 3, K_PAD, D_PAD)
    gl.atomic_add(ll_out, gl.sum(ll_run, 0), sem="relaxed")


@gluon.jit
def _responsibilities(s, b_smem, sw, rows, row_ok, WEIGHTED: gl.constexpr):
    """A tile's Gamma = w exp(S + b - m) / lambda from its score S (b read per tile: held, it took K_PAD / 4
    registers), w a row's sample weight (1 unweighted, 0 past N); and m, lambda and w, its rows' ell's parts."""
    s = s + b_smem.load(gl.SliceLayout(0, s.type.layout))[None, :]
    m = gl.max(s, 1)
    p = exp_ftz(s - m[:, None])
    lam = gl.sum(p, 1)
    if WEIGHTED:
        weight = gl.load(sw + rows, mask=row_ok, other=0.0)
    else:
        weight = gl.where(row_ok, 1.0, 0.0)
    g = p * (weight / lam)[:, None]
    return g, m, lam, weight


@gluon.jit
def _lifted_transpose(ring, stage, c_t, squared, a_op: gl.constexpr, BLOCK_N: gl.constexpr):
    """At D_PAD = 32: the statistics' A operand [x - c | (x - c)^2]^T (64 lanes x BLOCK_N rows) of the stage's
    tile, from its two copies (two_pass_ws.transposed_lift)."""
    xt = transposed_lift(ring.index(stage), BLOCK_N, 32).load(a_op) - c_t
    return gl.where(squared, xt * xt, xt)


@gluon.jit
def _consume_overlapped(ring, ready, empty, w_smem, gh_all, gl_all, b_smem, center, sw, n_out, su_out, ll_out, N,
                        n_tiles, first, stride, CONSUMER: gl.constexpr, K_PAD: gl.constexpr, BLOCK_N: gl.constexpr,
                        WEIGHTED: gl.constexpr):
    """:func:`_consume` at D_PAD = 32 with the next tile's score issued before this tile's exponentials (the
    FlashAttention-3 intra-warpgroup overlap); the last look-ahead's score is discarded."""
    gl.static_assert(BLOCK_N == 64, "the score's and the statistics' accumulators share one shape")
    stages: gl.constexpr = ring.type.shape[0]
    gl.static_assert(stages >= 3, "a consumer holds its tile's stage while it reads its next tile's")
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, K_PAD, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=1)
    D_PAD: gl.constexpr = 32
    c, c_t, squared = centers(center, a_op, D_PAD)
    zero = gl.zeros([BLOCK_N, K_PAD], gl.float32, mma)
    per_thread: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    n_comps = gl.arange(0, K_PAD, layout=per_thread)
    n_run = gl.zeros([BLOCK_N, K_PAD], gl.float32, mma)
    su_run0 = gl.zeros([64, K_PAD], gl.float32, mma)
    ll_run = gl.zeros([BLOCK_N], gl.float64, gl.SliceLayout(1, mma))

    program_tiles = (n_tiles - first + stride - 1) // stride
    mbarrier.wait(ready.index(CONSUMER % stages), 0, pred=CONSUMER < program_tiles)
    s, lin_hi, lin_lo, sq_hi, sq_lo = score_of_stage(ring, CONSUMER % stages, c, w_smem, loop_variant_zero(CONSUMER),
                                                   zero, a_op, BLOCK_N)
    s, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(s, lin_hi, lin_lo, sq_hi, sq_lo))
    for j in range(CONSUMER, program_tiles, 2):
        stage = j % stages
        w0 = loop_variant_zero(j)
        gh_smem = gh_all.index(w0 + CONSUMER)
        gl_smem = gl_all.index(w0 + CONSUMER)
        rows = (first + j * stride) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
        row_ok = rows < N
        nxt = j + 2
        mbarrier.wait(ready.index(nxt % stages), (nxt // stages) & 1, pred=nxt < program_tiles)
        s_next, lin_hi, lin_lo, sq_hi, sq_lo = score_of_stage(ring, nxt % stages, c, w_smem, w0, zero, a_op, BLOCK_N)

        g, m, lam, weight = _responsibilities(s, b_smem, sw, rows, row_ok, WEIGHTED)
        n_run += g
        ll_run += gl.where(row_ok, weight * (m + gl.log(lam)), 0.0).to(gl.float64)
        g_hi = tf32_high(g)
        gh_smem.store(g_hi)
        gl_smem.store(g - g_hi)

        xt = _lifted_transpose(ring, stage, c_t, squared, a_op, BLOCK_N)
        fence_async_shared()  # Gamma's stores before wgmma reads them; the ring's loads before the next TMA
        mbarrier.arrive(empty.index(stage), count=1)
        su, xt_hi, xt_lo = _statistics_chunk(xt, gh_smem, gl_smem, zero)
        # the next tile's score was issued first, so it completes with these (wgmma groups retire in order)
        su, _, _, s, _, _, _, _ = warpgroup_mma_wait(
            num_outstanding=0, deps=(su, xt_hi, xt_lo, s_next, lin_hi, lin_lo, sq_hi, sq_lo))
        su_run0 += su

    n_sum = gl.convert_layout(gl.sum(n_run, 0), per_thread)
    gl.atomic_add(n_out + n_comps, n_sum.to(gl.float64), sem="relaxed")  # relaxed: see lift.commit_statistics
    _commit_chunk(su_out, su_run0, 0, K_PAD, D_PAD)
    gl.atomic_add(ll_out, gl.sum(ll_run, 0), sem="relaxed")


@gluon.jit
def _one_pass_kernel_ws(
    x_desc, center, W, b, n_out, su_out, ll_out,
    N, n_tiles,
    K_PAD: gl.constexpr, D_PAD: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    GAMMA_BUFFERS: gl.constexpr, PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
    sw=None, WEIGHTED: gl.constexpr = False,  # sw (N,) float32: the sample weights, read only when WEIGHTED
    OVERLAP: gl.constexpr = False,  # _consume_overlapped (launch_meta sets it only where overlaps() says)
):
    BLOCKS: gl.constexpr = D_PAD // 32  # 32-column blocks of X: TMA's box is at most one 128-byte swizzle wide
    PAIRS: gl.constexpr = (BLOCKS + 1) // 2  # ring slots a stage takes: two 32-column blocks each (at d_pad = 32,
    # the one block twice)
    ring_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    ring = gl.allocate_shared_memory(gl.float32, [STAGES * PAIRS, 2 * BLOCK_N, 32], ring_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # the tensor cores' token
    gamma_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # the shared Gamma's
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
        mbarrier.init(gamma_free.index(i), count=1)

    # W^T by 32-column block, each lane half split into TF32 halves: w_smem 4 blk + (hi, lo) of x - c's lanes,
    # then 4 blk + 2 + (hi, lo) of (x - c)^2's
    lanes_fast: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    kk = gl.arange(0, K_PAD, layout=gl.SliceLayout(1, lanes_fast))
    lanes = gl.arange(0, 32, layout=gl.SliceLayout(0, lanes_fast))
    w_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    w_smem = gl.allocate_shared_memory(gl.float32, [4 * BLOCKS, K_PAD, 32], w_layout)
    for blk in gl.static_range(BLOCKS):
        for half in gl.static_range(2):
            w = gl.load(W + (half * D_PAD + blk * 32 + lanes)[None, :] * K_PAD + kk[:, None])
            w_hi = tf32_high(w)
            w_smem.index(4 * blk + 2 * half).store(w_hi)
            w_smem.index(4 * blk + 2 * half + 1).store(w - w_hi)
    g_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2,
                                                  transposed=True)  # Gamma rows-contiguous: K-major as wgmma's B
    # Gamma's high and low halves in two allocations: in one, the compiler's shared-memory hazard analysis took the
    # store of one half for a conflict with the other and put a warpgroup barrier between them (sm_90 SASS)
    gh_all = gl.allocate_shared_memory(gl.float32, [GAMMA_BUFFERS, BLOCK_N, K_PAD], g_layout)
    gl_all = gl.allocate_shared_memory(gl.float32, [GAMMA_BUFFERS, BLOCK_N, K_PAD], g_layout)
    # b in shared memory, read per tile: from global memory ptxas hoisted K_PAD / 4 addresses out of the loop
    b_smem = gl.allocate_shared_memory(gl.float32, [K_PAD], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    b_smem.store(gl.load(b + gl.arange(0, K_PAD, layout=gl.BlockedLayout([1], [32], [4], [0]))))
    fence_async_shared()

    first = gl.program_id(0)
    stride = gl.num_programs(0)
    if OVERLAP:
        gl.static_assert(D_PAD == 32 and not PINGPONG and GAMMA_BUFFERS == 2, "overlapped: D_PAD 32, a Gamma each")
        gl.warp_specialize([
            (_consume_overlapped, (ring, ready, empty, w_smem, gh_all, gl_all, b_smem, center, sw, n_out, su_out,
                                   ll_out, N, n_tiles, first, stride, 0, K_PAD, BLOCK_N, WEIGHTED)),
            (_consume_overlapped, (ring, ready, empty, w_smem, gh_all, gl_all, b_smem, center, sw, n_out, su_out,
                                   ll_out, N, n_tiles, first, stride, 1, K_PAD, BLOCK_N, WEIGHTED)),
            (row_tile_loader, (x_desc, ring, ready, empty, first, n_tiles, stride, BLOCKS)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])
        return
    gl.warp_specialize([
        (_consume, (ring, ready, empty, turn, gamma_free, w_smem, gh_all, gl_all, b_smem, center, sw, n_out,
                    su_out, ll_out, N, n_tiles, first, stride, 0, K_PAD, D_PAD, BLOCK_N, PINGPONG, WEIGHTED)),
        (_consume, (ring, ready, empty, turn, gamma_free, w_smem, gh_all, gl_all, b_smem, center, sw, n_out,
                    su_out, ll_out, N, n_tiles, first, stride, 1, K_PAD, D_PAD, BLOCK_N, PINGPONG, WEIGHTED)),
        (row_tile_loader, (x_desc, ring, ready, empty, first, n_tiles, stride, BLOCKS)),
    ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


def shared_bytes(k_pad: int, d_pad: int, gamma_buffers: int, stages: int) -> int:
    """Shared memory: W's halves, Gamma's halves (a buffer per consumer, or one shared), the ring and b; the
    compiler's scratch is SCRATCH_MARGIN."""
    f32 = 4
    ring_words = 2 * BLOCK_N * BOX_COLUMNS * max(1, d_pad // (2 * BOX_COLUMNS))
    words = 4 * k_pad * d_pad + gamma_buffers * 2 * BLOCK_N * k_pad + stages * ring_words + k_pad
    return words * f32 + 8 * (2 * stages + 4)


def shared_plan(k_pad: int, d_pad: int = 32, max_stages: int = MAX_STAGES) -> dict:
    """Gamma buffers and ring stages: a buffer per consumer where that leaves a ring of MIN_STAGES, else one
    shared buffer (K_pad = 128: W and two buffers take 192 KB); then the deepest ring up to ``max_stages``."""
    gamma_buffers = CONSUMERS
    if shared_bytes(k_pad, d_pad, gamma_buffers, MIN_STAGES) + SCRATCH_MARGIN > SHARED_LIMIT:
        gamma_buffers = 1
    stages = max_stages
    while stages > MIN_STAGES and shared_bytes(k_pad, d_pad, gamma_buffers, stages) + SCRATCH_MARGIN > SHARED_LIMIT:
        stages -= 1
    return dict(GAMMA_BUFFERS=gamma_buffers, STAGES=stages)


def refusal(X, W, precision: str = "tf32x3") -> str | None:
    """Why this kernel cannot take the sweep (None when it can): tf32x3, d a multiple of 4 (TMA's 16-byte row
    stride, rows contiguous), (d_pad, K_pad) in K_PADS, a Hopper GPU."""
    d, d_pad, k_pad = X.shape[1], W.shape[0] // 2, W.shape[1]
    if (off := hopper_kernels_switched_off()) is not None:
        return off
    if precision != "tf32x3":
        return f"the warp-specialized one-pass kernel computes tf32x3 only; got precision {precision!r}"
    if d % 4 or X.stride(1) != 1 or X.stride(0) % 4 or k_pad not in K_PADS.get(d_pad, ()):
        return (f"the warp-specialized one-pass kernel takes d a multiple of 4 (rows contiguous) and K_pad per d_pad "
                f"in {K_PADS}; got d = {d} (d_pad {d_pad}), K_pad = {k_pad}")
    if not X.is_cuda or torch.cuda.get_device_capability(X.device)[0] != 9:
        return f"the warp-specialized one-pass kernel needs a Hopper GPU (sm_90); X is on {X.device}"
    return None


def overlaps(k_pad: int, d_pad: int, pingpong: bool = False) -> bool:
    """Whether :func:`_consume_overlapped` takes the consumers' tiles: d_pad 32, K_pad in OVERLAP_K_PADS, and not
    the ping-pong schedule (which orders the two consumers' products instead)."""
    return d_pad == 32 and k_pad in OVERLAP_K_PADS and not pingpong


def launch_meta(k_pad: int, d_pad: int = 32, pingpong: bool = False, overlap: bool = False) -> dict:
    """Compile-time parameters and launch options (what the launch uses and harness.studies.resources compiles);
    ``overlap``: the overlapped consumers where :func:`overlaps` says they run, else as without."""
    overlap = overlap and overlaps(k_pad, d_pad, pingpong)
    plan = shared_plan(k_pad, d_pad, OVERLAP_MAX_STAGES if overlap else MAX_STAGES)
    extra = dict(OVERLAP=True) if overlap else {}  # absent, the kernel compiles as before the option
    return dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=BLOCK_N, **plan, PINGPONG=pingpong, **extra,
                CONSUMER_REGS=CONSUMER_REGISTERS, LOADER_REGS=LOADER_REGISTERS,
                num_warps=4, maxnreg=LAUNCH_REGISTERS)


def x_layout():
    return gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)


def program_count(n_tiles: int, device: torch.device, sum_tiles: int = SUM_TILES) -> int:
    """One program per SM, times the smallest whole factor that leaves each consumer at most ``sum_tiles``
    row tiles (turbo_gmm.launch.sum_bounded; 0: one per SM)."""
    return sum_bounded(max(1, min(n_tiles, sm_count(device.index or 0))), n_tiles, sum_tiles, CONSUMERS)


def one_pass_statistics_ws(X, center, W, b, out, pingpong: bool = False, sum_tiles: int = SUM_TILES,
                           sample_weight=None, overlap: bool = False):
    """:func:`turbo_gmm.diag.one_pass.one_pass_statistics` under tf32x3 where :func:`refusal` is None: adds one
    E-step's n, [s | u], ell (float64) into ``out`` and returns it; ``sample_weight`` weights every statistic."""
    why = refusal(X, W)
    if why:
        raise ValueError(why)
    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    n, su, ll = out
    x_desc = TensorDescriptor(X, [N, d], [X.stride(0), 1], [BLOCK_N, BOX_COLUMNS], x_layout())
    n_tiles = triton.cdiv(N, BLOCK_N)
    programs = program_count(n_tiles, X.device, sum_tiles)
    meta = launch_meta(k_pad, d_pad, pingpong, overlap)
    _one_pass_kernel_ws[(programs,)](x_desc, center, W, b, n, su, ll, N, n_tiles, **meta,
                                     **weight_arguments(sample_weight))
    return n, su, ll

