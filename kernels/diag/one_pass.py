"""Algorithm 2: one sweep of the component axis, X read once.

A persistent launch: each program keeps the padded component axis on chip (W, b and the accumulators n,
[s | u]) and strides over row tiles. Per tile: load X once, form [x - c | (x - c)^2] in registers, one
tl.dot for the score, the row normalizer (m, lambda) within the tile, Gamma = exp(S - m) / lambda from the
same exponentials, and the statistics by a second product into float32 running sums over at most
LaunchConfig.sum_tiles tiles; one atomic commit a program. Under tf32x3 operands are split once; under
fp64 everything is float64."""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from .. import _interpreter as interpreter_compat, tf32x3
from ..launch import LaunchConfig, program_count, sum_bounded, weight_arguments
from .lift import (accumulate_statistics, commit_statistics, gathers_rows, lifted_score, split_rows, split_weights,
    statistics_accumulators)

interpreter_compat.install()  # runtime range() bounds in the interpreter on NumPy >= 2.4


# the grid's size (num_programs) is not specialized on (== 1, divisible by 16): it varies with N by whole waves
# (launch.sum_bounded), and one compile serves every N
@triton.jit(do_not_specialize=["num_programs"])
def _one_pass_kernel(
    X, center, W, b,  # X (N, d) f32 (or f64 under fp64); center (D_PAD,), W (2*D_PAD, K_PAD), b (K_PAD,) f32 (f64: fp64)
    n_out, su_out, ll_out,  # f64 accumulators: (K_PAD,), (K_PAD, 2*D_PAD), (1,)
    N, d, stride_x, stride_wl, stride_wk, n_tiles, num_programs,  # stride_wl, stride_wk: W's (turbo_gmm.diag.lift.weight_tile)
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr, GATHER: tl.constexpr,
    sw=None, WEIGHTED: tl.constexpr = False,  # sw (N,): the sample weights, read only when WEIGHTED
):
    pid = tl.program_id(0)
    kk = tl.arange(0, K_PAD)
    # At d_pad >= 64 the lift's halves x - c and (x - c)^2 are contracted one at a time against W's halves
    # (and (x - c)^2 squared again after the exponentials rather than held across them): the widest operand
    # live at once halves, which removed the spills at d_pad >= 64 (1.6x faster); at d_pad <= 32 one 2*d_pad-wide
    # product is faster.
    HALVES: tl.constexpr = D_PAD >= 64
    wm_hi, wm_lo, wq_hi, wq_lo = split_weights(W, kk, stride_wl, stride_wk, K_PAD, D_PAD, PRECISION, HALVES)
    s_sum, u_sum = statistics_accumulators(D_PAD, K_PAD, HALVES, PRECISION)
    bias = tl.load(b + kk)  # its dtype (float64 under fp64) is the score's and the sums'
    n_sum = tl.zeros([K_PAD], dtype=bias.dtype)
    ll_acc = tl.zeros([BLOCK_N], dtype=tl.float64)
    for tile in range(pid, n_tiles, num_programs):
        rows = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        x_hi, x_lo, q_hi, q_lo, row_ok = split_rows(X, center, rows, N, d, stride_x, D_PAD, PRECISION, HALVES,
                                                    GATHER)
        s = lifted_score(x_hi, x_lo, q_hi, q_lo, wm_hi, wm_lo, wq_hi, wq_lo, tl.zeros([BLOCK_N, K_PAD], bias.dtype),
                         PRECISION, HALVES)
        s += bias[None, :]
        m = tl.max(s, 1)
        p = tl.exp(s - m[:, None])
        lam = tl.sum(p, 1)
        inv = tl.where(row_ok, 1.0 / lam, 0.0)
        ell = tl.where(row_ok, m + tl.log(lam), 0.0)
        if WEIGHTED:  # a row's weight scales its responsibilities and its ell
            wr = tl.load(sw + rows, mask=row_ok, other=0.0)
            inv *= wr
            ell *= wr
        g = p * inv[:, None]
        n_sum += tl.sum(g, 0)
        g_hi, g_lo = tf32x3.split(g, PRECISION)
        s_sum, u_sum = accumulate_statistics(x_hi, x_lo, g_hi, g_lo, s_sum, u_sum, PRECISION, HALVES)
        ll_acc += ell.to(tl.float64)
    commit_statistics(n_out, su_out, kk, n_sum, s_sum, u_sum, D_PAD, HALVES)
    tl.atomic_add(ll_out, tl.sum(ll_acc, 0), sem="relaxed")


def one_pass_statistics(X: torch.Tensor, center: torch.Tensor, W: torch.Tensor, b: torch.Tensor,
                        cfg: LaunchConfig, precision: str, out=None, sample_weight=None):
    """Statistics of one E-step by Algorithm 2: float64 n (k_pad,), su = [s | u] (k_pad, 2 d_pad), ll (1,).

    X (N, d) contiguous float32 (or float64 under fp64); center, W, b from :func:`turbo_gmm.diag.lift.lift`.
    ``out`` reuses zeroed buffers; ``sample_weight`` (N,) weights every statistic."""
    if kernel_name(X, W, cfg, precision) == "one_pass_ws":
        from . import one_pass_ws  # Gluon: Hopper only

        out = out if out is not None else _zeros(W.shape[1], W.shape[0] // 2, X.device)
        return one_pass_ws.one_pass_statistics_ws(X, center, W, b, out, sum_tiles=cfg.sum_tiles,
                                                  sample_weight=sample_weight, overlap=bool(cfg.one_pass_overlap))
    N, d = X.shape
    d_pad, k_pad = W.shape[0] // 2, W.shape[1]
    if X.is_cuda and (limit := _wgmma_shared_memory_limit(X.device.index or 0)) is not None:
        check_shared_memory(k_pad, d_pad, precision, limit)
    n, su, ll = out if out is not None else _zeros(k_pad, d_pad, X.device)
    meta = launch_meta(cfg, k_pad, d_pad, precision)
    n_tiles = triton.cdiv(N, meta["BLOCK_N"])
    P = sum_bounded(program_count(n_tiles, X.device, cfg.programs_per_sm), n_tiles, cfg.sum_tiles)
    _one_pass_kernel[(P,)](X, center, W, b, n, su, ll, N, d, X.stride(0), *W.stride(), n_tiles, P, **meta,
                           **weight_arguments(sample_weight))
    return n, su, ll


def kernel_name(X: torch.Tensor, W: torch.Tensor, cfg: LaunchConfig, precision: str) -> str:
    """"one_pass_ws" where the config routes the sweep to the warp-specialized kernel and it takes it, else
    "one_pass"."""
    if cfg.warp_specialized_one_pass and X.shape[0] >= cfg.warp_specialized_one_pass_rows:
        from . import one_pass_ws  # Gluon: Hopper only

        if one_pass_ws.refusal(X, W, precision) is None:
            return "one_pass_ws"
    return "one_pass"


def shared_memory_floor(k_pad: int, d_pad: int, precision: str) -> int:
    """Shared memory Algorithm 2 needs on Hopper whatever the tile: wgmma reads W from shared memory for the whole
    sweep (twice under tf32x3). ieee and fp64 read operands from registers: no floor."""
    return {"tf32x3": 2, "tf32": 1}.get(precision, 0) * 2 * d_pad * k_pad * 4


def check_shared_memory(k_pad: int, d_pad: int, precision: str, limit: int) -> None:
    """Refuse at once what the compiler refuses only after minutes (or never, timing out)."""
    need = shared_memory_floor(k_pad, d_pad, precision)
    if need > limit:
        raise StateDoesNotFit(need, limit, "shared memory")


class StateDoesNotFit(OutOfResources):
    """Triton's OutOfResources (so callers and the harness classify it as the compiler's refusal),
    with the reason and the way out instead of its advice to shrink the tiles, which cannot help."""

    def __str__(self) -> str:
        return (f"out of resource: shared memory, Required: {self.required}, Hardware limit: {self.limit}: "
                "Algorithm 2 keeps the lifted parameters W (2*d_pad x K_pad float32, twice for tf32x3) in shared "
                "memory for the whole sweep, whatever the tile; algorithm='two_pass' runs at any K")


@functools.lru_cache(maxsize=None)
def _wgmma_shared_memory_limit(device_index: int) -> int | None:
    """The per-program shared-memory limit the Triton compiler checks against (232448 B on the H200),
    on GPUs whose dots are wgmma (sm_90+); None elsewhere. Once per device: the launch path calls it."""
    if torch.cuda.get_device_capability(device_index)[0] < 9:
        return None
    return triton.runtime.driver.active.utils.get_device_properties(device_index)["max_shared_mem"]


def launch_meta(cfg: LaunchConfig, k_pad: int, d_pad: int, precision: str) -> dict:
    """The kernel's compile-time parameters and launch options for these padded sizes
    (what it runs with, and what harness.studies.resources compiles offline)."""
    return dict(K_PAD=k_pad, D_PAD=d_pad, BLOCK_N=cfg.block_n, PRECISION=precision, GATHER=gathers_rows(precision),
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, **cfg.register_cap())


def _zeros(k_pad, d_pad, device):
    f64 = torch.float64
    return (torch.zeros(k_pad, dtype=f64, device=device), torch.zeros(k_pad, 2 * d_pad, dtype=f64, device=device),
            torch.zeros(1, dtype=f64, device=device))
