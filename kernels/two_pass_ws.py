"""Algorithm 3's two passes, warp-specialized (Gluon, Hopper only, d_pad = 32, tf32x3).

Pass 1 (`normalizer_pass_ws`, at the end): the row block's lifted TF32 halves resident in shared memory,
W^T's tiles streamed by a one-warp TMA loader, component tile k+1 scored on the tensor cores while tile
k's (m, lambda) merge runs (sm_90 compile: 0 spills, 164 KB shared, one 8 + 1-warp program per SM).

Pass 2 (`statistics_pass_ws`). Where the Triton pass 2 spends its shared-memory bandwidth (kernels/README.md, "Where pass 2's
time goes"): per 64 x 64 tile it moves ~288 KB through shared memory, of which 128 KB are the two
A operands going register -> shared -> register to reach wgmma's layout. Here a one-warp loader
partition TMA-copies each row tile of X into a ring in shared memory (twice, into the two halves of
a stage: the statistics' A operand is the 64-lane lifted tile [x - c | (x - c)^2] transposed, i.e.
two copies of the 32 columns); the compute warpgroup loads both A operands straight from that tile
into wgmma's register layout (gl.bank_conflicts offline: 0 and 1 excess wavefronts), lifts and
splits them in registers, and stores only Gamma's TF32 halves. The score takes the lift's halves
apart (x - c and (x - c)^2 against W's two halves: the same wgmma count as one K = 64 product).

Same sums as kernels.two_pass.statistics_pass under tf32x3 (three TF32 products per product,
kernels/tf32x3.py's order), the same grid (component tiles x row splits), one float64 atomic commit
per program.
"""
from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels.tf32x3 import TF32_HALF_UNIT, TF32_MASK

STAGES = 2  # row tiles in flight between the loader and the compute warpgroup
LOADER_REGISTERS = 24


@gluon.jit
def _tf32_high(x):
    return ((x.to(gl.int32, bitcast=True) + TF32_HALF_UNIT) & TF32_MASK).to(gl.float32, bitcast=True)


@gluon.jit
def _loader(x_desc, ring, ready, empty, first, n_tiles, stride):
    """Worker partition: each of this program's row tiles, twice, into the next free stage."""
    stages: gl.constexpr = ring.type.shape[0]
    block_n: gl.constexpr = x_desc.block_type.shape[0]  # a stage holds the tile twice: (2 * block_n, D_PAD)
    i = 0
    for tile in range(first, n_tiles, stride):
        stage = i % stages
        mbarrier.wait(empty.index(stage), ((i // stages) & 1) ^ 1)  # a fresh barrier passes phase 1
        mbarrier.expect(ready.index(stage), 2 * x_desc.block_type.nbytes)
        for copy in gl.static_range(2):
            tma.async_copy_global_to_shared(x_desc, [tile * block_n, 0], ready.index(stage),
                                            ring.index(stage).slice(copy * block_n, block_n))
        i += 1


@gluon.jit
def _compute(ring, ready, empty, w_smem, g_smem, center, b, L, N, d, first, n_tiles, stride, comp0,
             BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, D_PAD: gl.constexpr):
    """Default partition (one warpgroup): score, Gamma and the statistics of each row tile; returns n and
    [s | u]^T of this program's row tiles."""
    LANES: gl.constexpr = 2 * D_PAD
    stages: gl.constexpr = ring.type.shape[0]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_K, 8])
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=1)
    HALF_N: gl.constexpr = BLOCK_N // 2
    wh_lin = w_smem.index(0).permute((1, 0))  # (D_PAD, BLOCK_K) views of W^T's halves: the score's B operands
    wl_lin = w_smem.index(1).permute((1, 0))
    wh_sq = w_smem.index(2).permute((1, 0))
    wl_sq = w_smem.index(3).permute((1, 0))
    gh_smem = g_smem.index(0)
    gl_smem = g_smem.index(1)

    cols = gl.arange(0, D_PAD, layout=gl.SliceLayout(0, a_op))
    c = gl.load(center + cols)  # zero past d (Workspace.center is d_pad long)
    col_ok = (cols < d)[None, :]
    lanes = gl.arange(0, LANES, layout=gl.SliceLayout(1, a_op))
    c_t = gl.load(center + lanes % D_PAD)[:, None]
    lane_ok = ((lanes % D_PAD) < d)[:, None]
    squared = (lanes >= D_PAD)[:, None]
    comps = comp0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, mma))
    bias = gl.load(b + comps)[None, :]
    n_acc = gl.zeros([BLOCK_K], gl.float32, gl.SliceLayout(0, mma))
    su = gl.zeros([LANES, BLOCK_K], gl.float32, mma)  # [s | u]^T
    zero = gl.zeros([BLOCK_N, BLOCK_K], gl.float32, mma)

    i = 0
    for tile in range(first, n_tiles, stride):
        stage = i % stages
        rows = tile * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
        row_ok = rows < N
        Lr = gl.load(L + rows, mask=row_ok, other=0.0)[:, None]
        mbarrier.wait(ready.index(stage), (i // stages) & 1)
        both = ring.index(stage)  # (2 * BLOCK_N, D_PAD): the row tile twice, zero past N and d
        x = both.slice(0, BLOCK_N).load(a_op)  # (BLOCK_N, D_PAD)
        lifted_t = both.reshape([2, BLOCK_N, D_PAD]).permute((0, 2, 1)).reshape([LANES, BLOCK_N])

        lin = gl.where(col_ok, x - c[None, :], 0.0)
        sq = lin * lin
        lin_hi = _tf32_high(lin)
        lin_lo = lin - lin_hi
        sq_hi = _tf32_high(sq)
        sq_lo = sq - sq_hi
        s = warpgroup_mma(lin_lo, wh_lin, zero, use_acc=False, is_async=True)
        s = warpgroup_mma(lin_hi, wl_lin, s, is_async=True)
        s = warpgroup_mma(lin_hi, wh_lin, s, is_async=True)
        s = warpgroup_mma(sq_lo, wh_sq, s, is_async=True)
        s = warpgroup_mma(sq_hi, wl_sq, s, is_async=True)
        s = warpgroup_mma(sq_hi, wh_sq, s, is_async=True)
        s, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(s, lin_hi, lin_lo, sq_hi, sq_lo))

        g = gl.where(row_ok[:, None], gl.exp(s + bias - Lr), 0.0)
        n_acc += gl.sum(g, 0)
        g_hi = _tf32_high(g)
        gh_smem.store(g_hi)
        gl_smem.store(g - g_hi)
        fence_async_shared()
        for half in gl.static_range(2):  # the statistics over the tile's two halves of rows: half the registers
            xt = lifted_t.slice(half * HALF_N, HALF_N, dim=1).load(a_op)  # (LANES, HALF_N): x^T twice
            xl = gl.where(lane_ok, xt - c_t, 0.0)
            xl = gl.where(squared, xl * xl, xl)
            xt_hi = _tf32_high(xl)
            xt_lo = xl - xt_hi
            g_hi_rows = gh_smem.slice(half * HALF_N, HALF_N)
            g_lo_rows = gl_smem.slice(half * HALF_N, HALF_N)
            su = warpgroup_mma(xt_lo, g_hi_rows, su, is_async=True)
            su = warpgroup_mma(xt_hi, g_lo_rows, su, is_async=True)
            su = warpgroup_mma(xt_hi, g_hi_rows, su, is_async=True)
            su, _, _, _, _ = warpgroup_mma_wait(num_outstanding=0, deps=(su, xt_hi, xt_lo, g_hi_rows, g_lo_rows))
        fence_async_shared()  # this stage's loads before the loader's next TMA into it
        mbarrier.arrive(empty.index(stage), count=1)
        i += 1
    return n_acc, su


@gluon.jit
def _statistics_kernel_ws(
    x_desc, center, W, b, L, n_out, su_out,
    N, d, n_tiles, n_splits,
    K_PAD: gl.constexpr, D_PAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
    LOADER_REGS: gl.constexpr,
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
        w_hi = _tf32_high(w)
        w_smem.index(2 * half).store(w_hi)
        w_smem.index(2 * half + 1).store(w - w_hi)
    g_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2,
                                                  transposed=True)  # Gamma rows-contiguous: K-major as wgmma's B
    g_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_N, BLOCK_K], g_layout)
    fence_async_shared()

    split = gl.program_id(1)
    n, su = gl.warp_specialize([
        (_compute, (ring, ready, empty, w_smem, g_smem, center, b, L, N, d, split, n_tiles, n_splits, comp0,
                    BLOCK_N, BLOCK_K, D_PAD)),
        (_loader, (x_desc, ring, ready, empty, split, n_tiles, n_splits)),
    ], [1], [LOADER_REGS])

    mma: gl.constexpr = su.type.layout
    comps = comp0 + gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, mma))
    gl.atomic_add(n_out + comps, n.to(gl.float64), sem="relaxed")
    su_lanes = gl.arange(0, 2 * D_PAD, layout=gl.SliceLayout(1, mma))
    gl.atomic_add(su_out + comps[None, :] * (2 * D_PAD) + su_lanes[:, None], su.to(gl.float64), sem="relaxed")


def statistics_pass_ws(X, center, W, b, K: int, cfg, L, n, su) -> None:
    """Drop-in for :func:`kernels.two_pass.statistics_pass` under tf32x3 on Hopper at d_pad = 32 with d a
    multiple of 4 (TMA's 16-byte row stride): n, [s | u] += the statistics of Gamma = exp(S - L)."""
    from kernels.launch import program_count
    from kernels.two_pass import statistics_grid

    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    block_n, block_k = 64, cfg.block_k  # one warpgroup: wgmma's M = 64 rows (score) and 64 lanes (statistics)
    if d_pad != 32 or d % 4 or block_k not in (32, 64) or k_pad % block_k:
        raise ValueError(f"the warp-specialized pass 2 takes d_pad = 32 with d a multiple of 4 and component "
                         f"tiles of 32 or 64 dividing K_pad; got d = {d}, K_pad = {k_pad}, block_k = {block_k}")
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    x_desc = TensorDescriptor(X, [N, d], [X.stride(0), 1], [block_n, d_pad], layout)
    n_tiles = triton.cdiv(N, block_n)
    k_tiles, n_splits = statistics_grid(K, block_k, program_count(n_tiles, X.device, cfg.programs_per_sm))
    # 4 + 4 warps (the loader's warpgroup); at 128 registers per thread two programs fit an SM and the
    # compute warpgroup gets what the loader does not take: (128 * 8 - 24 * 4) / 4 = 232 (sm_90 compile:
    # no spills, 99 KB shared at 64 components, 66 KB at 32)
    _statistics_kernel_ws[(k_tiles, n_splits)](x_desc, center, W, b, L, n, su, N, d, n_tiles, n_splits,
                                               K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=block_n, BLOCK_K=block_k,
                                               STAGES=STAGES, LOADER_REGS=LOADER_REGISTERS, num_warps=4,
                                               maxnreg=128)


def main(argv=None) -> None:
    """python -m kernels.two_pass_ws [SHAPE ...]: each pass alone, the Triton kernel and the warp-specialized
    one on the same inputs (ms, best of 10 launches by CUDA events; the launch config the dispatch rule gives
    the Triton kernels), with checksums of what each wrote; one JSON line per shape."""
    import json
    import sys

    import torch

    from harness.data import make_dataset, shared_init
    from kernels.dispatch import launch_config
    from kernels.em import Workspace, data_center
    from kernels.lift_kernel import lift_into
    from kernels.measure import parse_shape, time_ms
    from kernels.two_pass import normalizer_pass, statistics_pass

    for name in (argv if argv is not None else sys.argv[1:]) or ["1M_512_32", "1M_1024_32", "1M_4096_32"]:
        N, K, d = parse_shape(name)
        X = make_dataset(N, K, d, 0, "cuda").X
        init = shared_init(X, K, 0)
        ws = Workspace(X, K, "two_pass")
        ws.set_center(data_center(X, True))
        params = [torch.as_tensor(a, device="cuda").double() for a in (init.weights, init.means, init.variances)]
        cfg = launch_config("two_pass", K, d)
        lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
        row = {"shape": name}
        for label, run in (("pass1_triton", lambda: normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L,
                                                                      ws.ll)),
                           ("pass1_ws", lambda: normalizer_pass_ws(X, ws.center, ws.W, ws.b, K, cfg, ws.L, ws.ll))):
            ws.ll.zero_()
            run()
            row[f"{label}_ll"] = float(ws.ll)
            row[f"{label}_ms"] = round(time_ms(run, 10), 4)
        for label, run in (("pass2_triton", lambda: statistics_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L,
                                                                      ws.n, ws.su)),
                           ("pass2_ws", lambda: statistics_pass_ws(X, ws.center, ws.W, ws.b, K, cfg, ws.L, ws.n,
                                                                   ws.su))):
            ws.n.zero_()
            ws.su.zero_()
            run()
            row[f"{label}_n_sum"] = float(ws.n[:K].sum())
            row[f"{label}_su_norm"] = float(ws.su[:K].norm())
            row[f"{label}_ms"] = round(time_ms(run, 10), 4)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()


@gluon.jit
def _w_loader(wt_desc, ring, ready, empty, K, K_PAD: gl.constexpr):
    """Worker partition of pass 1: each component tile of W^T's TF32 halves, the lanes of x - c and of
    (x - c)^2 apart (four boxes), into the next free stage of the ring."""
    stages: gl.constexpr = ring.type.shape[0] // 4
    block_k: gl.constexpr = wt_desc.block_type.shape[0]
    d_pad: gl.constexpr = wt_desc.block_type.shape[1]
    i = 0
    for k0 in range(0, K, block_k):
        stage = i % stages
        mbarrier.wait(empty.index(stage), ((i // stages) & 1) ^ 1)
        mbarrier.expect(ready.index(stage), 4 * wt_desc.block_type.nbytes)
        for part in gl.static_range(4):  # (high, low) x (lanes of x - c, lanes of (x - c)^2)
            tma.async_copy_global_to_shared(wt_desc, [(part // 2) * K_PAD + k0, (part % 2) * d_pad],
                                            ready.index(stage), ring.index(4 * stage + part))
        i += 1


@gluon.jit
def _score_tile(x_smem, ring, stage, zero):
    """The score of one component tile, six async TF32 products (tf32x3 on the lift's two halves)."""
    s = warpgroup_mma(x_smem.index(1), ring.index(4 * stage).permute((1, 0)), zero, use_acc=False, is_async=True)
    s = warpgroup_mma(x_smem.index(0), ring.index(4 * stage + 2).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(x_smem.index(0), ring.index(4 * stage).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(x_smem.index(3), ring.index(4 * stage + 1).permute((1, 0)), s, is_async=True)
    s = warpgroup_mma(x_smem.index(2), ring.index(4 * stage + 3).permute((1, 0)), s, is_async=True)
    return warpgroup_mma(x_smem.index(2), ring.index(4 * stage + 1).permute((1, 0)), s, is_async=True)


@gluon.jit
def _normalize(x_smem, ring, ready, empty, b, L_out, ll_out, N, K, row0, BLOCK_N: gl.constexpr,
               BLOCK_K: gl.constexpr, NUM_WARPS: gl.constexpr, SENTINEL_VALUE: gl.constexpr):
    """Default partition of pass 1: component tile k+1's score on the tensor cores while tile k's
    (m, lambda) merge runs; L = m + log(lambda) per row, ell += sum L."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NUM_WARPS, 1],
                                                  instr_shape=[16, BLOCK_K, 8])
    stages: gl.constexpr = ring.type.shape[0] // 4
    comps = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, mma))
    m = gl.full([BLOCK_N], SENTINEL_VALUE, gl.float32, gl.SliceLayout(1, mma))
    lam = gl.zeros([BLOCK_N], gl.float32, gl.SliceLayout(1, mma))
    zero = gl.zeros([BLOCK_N, BLOCK_K], gl.float32, mma)
    mbarrier.wait(ready.index(0), 0)
    prev = _score_tile(x_smem, ring, 0, zero)
    i = 1
    for k0 in range(BLOCK_K, K, BLOCK_K):
        stage = i % stages
        mbarrier.wait(ready.index(stage), (i // stages) & 1)
        nxt = _score_tile(x_smem, ring, stage, zero)
        done = warpgroup_mma_wait(num_outstanding=6, deps=(prev,))  # tile k0 - BLOCK_K scored: its stage is free
        mbarrier.arrive(empty.index((i - 1) % stages), count=1)
        s = done + gl.load(b + (k0 - BLOCK_K) + comps)[None, :]
        m_new = gl.maximum(m, gl.max(s, 1))
        lam = lam * gl.exp(m - m_new) + gl.sum(gl.exp(s - m_new[:, None]), 1)
        m = m_new
        prev = nxt
        i += 1
    done = warpgroup_mma_wait(num_outstanding=0, deps=(prev,))
    s = done + gl.load(b + (i - 1) * BLOCK_K + comps)[None, :]
    m_new = gl.maximum(m, gl.max(s, 1))
    lam = lam * gl.exp(m - m_new) + gl.sum(gl.exp(s - m_new[:, None]), 1)
    L = m_new + gl.log(lam)
    rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
    gl.store(L_out + rows, L, mask=rows < N)
    gl.atomic_add(ll_out, gl.sum(gl.where(rows < N, L, 0.0).to(gl.float64), 0), sem="relaxed")


@gluon.jit
def _normalizer_kernel_ws(
    X, center, wt_desc, b, L_out, ll_out,
    N, d, K, stride_x,
    K_PAD: gl.constexpr, D_PAD: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr,
    LOADER_REGS: gl.constexpr, SENTINEL_VALUE: gl.constexpr, NUM_WARPS: gl.constexpr,
):
    """Pass 1, warp-specialized: the row block's lifted TF32 halves resident in shared memory (the A
    operands of every product), W^T's tiles streamed through a TMA ring by a one-warp loader."""
    x_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    rows_fast: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [NUM_WARPS, 1], [1, 0])
    row0 = gl.program_id(0) * BLOCK_N
    rows = row0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, rows_fast))
    cols = gl.arange(0, D_PAD, layout=gl.SliceLayout(0, rows_fast))
    col_ok = cols < d
    x = gl.load(X + rows.to(gl.int64)[:, None] * stride_x + cols[None, :],
                mask=(rows < N)[:, None] & col_ok[None, :], other=0.0)
    lin = gl.where(col_ok[None, :], x - gl.load(center + cols)[None, :], 0.0)
    sq = lin * lin
    x_smem = gl.allocate_shared_memory(gl.float32, [4, BLOCK_N, D_PAD], x_layout)  # lin hi, lo, sq hi, lo
    lin_hi = _tf32_high(lin)
    sq_hi = _tf32_high(sq)
    x_smem.index(0).store(lin_hi)
    x_smem.index(1).store(lin - lin_hi)
    x_smem.index(2).store(sq_hi)
    x_smem.index(3).store(sq - sq_hi)
    ring = gl.allocate_shared_memory(gl.float32, [4 * STAGES, BLOCK_K, D_PAD], x_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    gl.warp_specialize([
        (_normalize, (x_smem, ring, ready, empty, b, L_out, ll_out, N, K, row0, BLOCK_N, BLOCK_K, NUM_WARPS,
                      SENTINEL_VALUE)),
        (_w_loader, (wt_desc, ring, ready, empty, K, K_PAD)),
    ], [1], [LOADER_REGS])


NORMALIZER_ROWS = 128  # two compute warpgroups of 64 rows: W^T's tiles read once per 128 rows
NORMALIZER_STAGES = 3


def normalizer_pass_ws(X, center, W, b, K: int, cfg, L, ll) -> None:
    """Drop-in for :func:`kernels.two_pass.normalizer_pass` under tf32x3 on Hopper at d_pad = 32:
    L[i] = m_i + log(lambda_i), ll += sum_i L[i]; component tiles of cfg.normalizer_block_k (or 64)."""
    from kernels import tf32x3
    from kernels.lift import SENTINEL

    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    block_k = cfg.normalizer_block_k or 64
    if d_pad != 32 or block_k not in (32, 64) or k_pad % block_k:
        raise ValueError(f"the warp-specialized pass 1 takes d_pad = 32 and component tiles of 32 or 64 dividing "
                         f"K_pad; got d_pad = {d_pad}, K_pad = {k_pad}, block_k = {block_k}")
    wt = tf32x3.split_transposed(W).view(2 * k_pad, 2 * d_pad)  # rows: [high | low] halves of W^T
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    wt_desc = TensorDescriptor(wt, [2 * k_pad, 2 * d_pad], [2 * d_pad, 1], [block_k, d_pad], layout)
    warps = NORMALIZER_ROWS // 16
    # 8 + 4 warps at 168 registers: one program per SM, the compute warps get (168 * 12 - 24 * 4) / 8 = 240
    _normalizer_kernel_ws[(triton.cdiv(N, NORMALIZER_ROWS),)](
        X, center, wt_desc, b, L, ll, N, d, K, X.stride(0), K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=NORMALIZER_ROWS,
        BLOCK_K=block_k, STAGES=NORMALIZER_STAGES, LOADER_REGS=LOADER_REGISTERS, SENTINEL_VALUE=SENTINEL,
        NUM_WARPS=warps, num_warps=warps, maxnreg=168)
