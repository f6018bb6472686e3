"""Fused k-means kernels: Lloyd's assignment with the new centers' sums, and the k-means++ D^2 potentials.

One persistent launch reads each row tile once:

* :class:`Assigner` (Lloyd): the score ``||y_k||^2 - 2 (x - c).y_k`` (y = mu - c) against every center tile as
  tensor-core products (tf32x3, single TF32, or fp32 "ieee"), the best two scores in registers; rows whose two
  best lie within the products' error bound (:func:`score_slack`) are rescored in float64 distances, so the
  labels are those of a float64 Lloyd (ties to the lower index). Labels are written in place and changes counted;
  the sums of x and the counts (weighted by ``sample_weight``) are contracted from the tile's one-hot on the
  tensor cores (exact in TF32: two products carry float32), held in float32 for at most FLUSH_ROWS rows and added
  in float64 per program (no atomics: deterministic).
* :func:`candidate_potentials`, :func:`fold_nearest`, :func:`fold_stored` (k-means++ and k-means||): float64
  sums of ``min(closest_i, ||x_i - y_t||^2)`` in the direct form (no cancellation), as scikit-learn's cumulative
  sums need; the candidates' distances are kept where that is cheaper than reading X again to fold the chosen
  one; :func:`fold_nearest` folds any number of rows (a k-means|| round's candidates) in one pass over X;
  :class:`SeedingSteps` folds the previous seed in the potentials' own pass (a k-means++ step in one pass).

CUDA, or CPU tensors under TRITON_INTERPRET=1; float32 contiguous X with d <= MAX_FEATURES (:func:`supported`)."""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..launch import pow2_at_least_16, program_count
from ..tf32x3 import dot, tf32_high
from .kmeans_update import SegmentSums

MAX_FEATURES = 256  # d_pad of the row tile held in registers
BIG_SCORE = tl.constexpr(3.0e38)  # the padded centers' bias: never the minimum (constexpr: compiled Triton reads no plain globals)
ASSIGN_PROGRAMS_PER_SM = 1  # 255 registers x 8 warps (sm_90 compile): one program fills an SM
POTENTIAL_PROGRAMS_PER_SM = 4
ASSIGN_WARPS = 8
POTENTIAL_WARPS = 4
POTENTIAL_TILE_ELEMENTS = 4096  # rows x d_pad of one k-means++ row tile (float64 in registers)
STORED_DISTANCE_RATIO = 2  # k-means++ stores its candidates' distances up to twice X's bytes
FOLD_BLOCK = 1024
# Row counts are masks' bounds only: not specialized on (their divisibility by 16), a new N reuses the compiled kernel
ROW_COUNTS = ["N", "n_tiles"]


def supported(X: torch.Tensor) -> bool:
    """Whether the fused kernels take X: float32, contiguous, d <= MAX_FEATURES, on CUDA (or the interpreter)."""
    interpreted = os.environ.get("TRITON_INTERPRET", "0") == "1"
    return (X.dtype == torch.float32 and X.is_contiguous() and X.ndim == 2 and X.shape[1] <= MAX_FEATURES
            and (X.is_cuda or (interpreted and X.device.type == "cpu")))


@triton.jit
def _operands(a, PRECISION: tl.constexpr):
    """A score operand as (first, second): TF32 halves under tf32x3, (TF32-rounded a, unused) under tf32, (a, a)
    under ieee. Rounding the single TF32 operand here (not in the tensor core) makes the interpreter's float32
    product the GPU's exactly, so the error bound is tested on the CPU too."""
    if PRECISION == "tf32x3":
        high = tf32_high(a)
        return high, a - high
    elif PRECISION == "tf32":
        return tf32_high(a), a
    else:
        return a, a


@triton.jit
def _score_dot(xa, xb, wa, wb, acc, PRECISION: tl.constexpr):
    if PRECISION == "tf32x3":
        return dot(xa, xb, wa, wb, acc, PRECISION)
    elif PRECISION == "tf32":
        return tl.dot(xa, wa, acc, input_precision="tf32")
    else:
        return tl.dot(xa, wa, acc, input_precision="ieee")


@triton.jit(do_not_specialize=ROW_COUNTS + ["K"])
def _lloyd_kernel(
    X, sw, center, W, bias, C, labels, sums, counts, changed,
    # X (N, d) f32; sw (N,) f32 sample weights (read when WEIGHTED); center (D_PAD,) f32 = c; W (D_PAD, K_PAD) f32 =
    # -2 (mu - c)^T; bias (K_PAD,) f32 = ||mu - c||^2 (BIG past K); C (K_PAD, D_PAD) f64 = mu; labels (N,) i64 in/out;
    # sums (P, K_PAD, D_PAD), counts (P, K_PAD) f64 zeroed by the caller: per program, sum w x and sum w;
    # changed (P,) i64
    N, d, K, n_tiles, radius, radius_unit, square_unit,  # radius (1,) f32 on the device: max_k ||mu_k - c||
    K_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr, UPDATE: tl.constexpr, WEIGHTED: tl.constexpr, REGISTER_SUMS: tl.constexpr,
    FLUSH_TILES: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, D_PAD)
    col_ok = cols < d
    c = tl.load(center + cols)
    R = tl.load(radius)
    radius_coef = radius_unit * R  # score_slack's coefficients at R, without a host read of it
    square_coef = square_unit * R * R
    n_changed = tl.zeros((BLOCK_M,), tl.int32)
    k_all = tl.arange(0, K_PAD)
    k_block = tl.arange(0, BLOCK_K)
    if REGISTER_SUMS:
        acc = tl.zeros((K_PAD, D_PAD), tl.float32)
        n_acc = tl.zeros((K_PAD,), tl.float32)
        pending = 0
    for t in range(pid, n_tiles, tl.num_programs(0)):
        rows = tl.arange(0, BLOCK_M).to(tl.int64) + t * BLOCK_M  # t * BLOCK_M < N fits int32; rows * d may not
        row_ok = rows < N
        ok = row_ok[:, None] & col_ok[None, :]
        x = tl.load(X + rows[:, None] * d + cols[None, :], mask=ok, other=0.0)
        # the previous labels, read before anything of this tile is stored: the store below may be issued by other
        # threads than this load's, which nothing orders after it in the same statement's neighbourhood
        old = tl.load(labels + rows, mask=row_ok, other=0)
        xc = tl.where(ok, x - c[None, :], 0.0)
        xa, xb = _operands(xc, PRECISION)
        # every score within `slack` of the computed best may be the exact best (turbo_gmm.init.kmeans.score_slack)
        slack = 2.0 * radius_coef * tl.sqrt(tl.sum(xc * xc, 1)) + 2.0 * square_coef
        best = tl.full((BLOCK_M,), BIG_SCORE, tl.float32)
        second = tl.full((BLOCK_M,), BIG_SCORE, tl.float32)
        third = tl.full((BLOCK_M,), BIG_SCORE, tl.float32)  # its index is not needed: 3 in the slack rescores all
        best_k = tl.zeros((BLOCK_M,), tl.int32)
        second_k = tl.zeros((BLOCK_M,), tl.int32)
        for k0 in range(0, K_PAD, BLOCK_K):
            kk = k0 + k_block
            w = tl.load(W + cols[:, None] * K_PAD + kk[None, :])
            wa, wb = _operands(w, PRECISION)
            s = _score_dot(xa, xb, wa, wb, tl.zeros((BLOCK_M, BLOCK_K), tl.float32), PRECISION)
            s += tl.load(bias + kk)[None, :]
            # the block's three best scores (first two with their indices), merged into the running three
            # (one reduction gives a minimum and its index: tl.argmin alone would be a second pass over s)
            m1, a1 = tl.min(s, 1, return_indices=True, return_indices_tie_break_left=True)
            rest = tl.where(k_block[None, :] == a1[:, None], BIG_SCORE, s)
            m2, a2 = tl.min(rest, 1, return_indices=True, return_indices_tie_break_left=True)
            m3 = tl.min(tl.where(k_block[None, :] == a2[:, None], BIG_SCORE, rest), 1)
            a1 += k0
            a2 += k0
            lower = m1 < best  # the block's best displaces the running one (ties keep the lower index)
            third = tl.where(lower, tl.where(best <= m2, tl.minimum(second, m2), tl.minimum(best, m3)),
                             tl.where(second <= m1, tl.minimum(third, m1), tl.minimum(second, m2)))
            keep_old = best <= m2
            second_k = tl.where(lower, tl.where(keep_old, best_k, a2), tl.where(m1 < second, a1, second_k))
            second = tl.where(lower, tl.where(keep_old, best, m2), tl.minimum(m1, second))
            best_k = tl.where(lower, a1, best_k)
            best = tl.minimum(m1, best)
        # rescore in float64 where the computed scores cannot decide: two within the slack by their distances,
        # three or more (rare) against every center; exact ties go to the lower index, as NumPy's argmin
        crowded = row_ok & (third - best <= slack)
        tied = row_ok & (second - best <= slack) & ~crowded
        if tl.max(tied.to(tl.int32), 0) > 0:
            x64 = x.to(tl.float64)
            mu = tl.load(C + best_k[:, None] * D_PAD + cols[None, :], mask=tied[:, None], other=0.0)
            d_best = tl.sum((x64 - mu) * (x64 - mu), 1)
            mu = tl.load(C + second_k[:, None] * D_PAD + cols[None, :], mask=tied[:, None], other=0.0)
            d_second = tl.sum((x64 - mu) * (x64 - mu), 1)
            swap = tied & ((d_second < d_best) | ((d_second == d_best) & (second_k < best_k)))
            best_k = tl.where(swap, second_k, best_k)
        if tl.max(crowded.to(tl.int32), 0) > 0:
            x64 = x.to(tl.float64)
            exact = tl.full((BLOCK_M,), float("inf"), tl.float64)
            exact_k = best_k
            for k in range(0, K):
                mu = tl.load(C + k * D_PAD + cols)
                dk = tl.sum((x64 - mu[None, :]) * (x64 - mu[None, :]), 1)
                closer = dk < exact
                exact = tl.where(closer, dk, exact)
                exact_k = tl.where(closer, k, exact_k)
            best_k = tl.where(crowded, exact_k, best_k)
        n_changed += ((old != best_k.to(tl.int64)) & row_ok).to(tl.int32)
        tl.store(labels + rows, best_k.to(tl.int64), mask=row_ok)
        if UPDATE:
            if WEIGHTED:
                weight = tl.load(sw + rows, mask=row_ok, other=0.0)
                xw = x * weight[:, None]
            else:
                weight = tl.where(row_ok, 1.0, 0.0)
                xw = x  # x itself, not x - c: its float32 digits are exact in the two products below
            x_hi = tf32_high(xw)
            x_lo = xw - x_hi  # the one-hot is exact in TF32: two products carry xw's float32 digits
            if REGISTER_SUMS:
                onehot_t = ((k_all[:, None] == best_k[None, :]) & row_ok[None, :]).to(tl.float32)
                acc = tl.dot(onehot_t, x_lo, acc, input_precision="tf32")
                acc = tl.dot(onehot_t, x_hi, acc, input_precision="tf32")
                n_acc += tl.sum(onehot_t * weight[None, :], 1)
                pending += 1
                if pending == FLUSH_TILES:  # float32 sums of at most FLUSH_TILES tiles, then float64
                    at = sums + (pid * K_PAD + k_all[:, None]) * D_PAD + cols[None, :]
                    tl.store(at, tl.load(at) + acc.to(tl.float64))
                    at_n = counts + pid * K_PAD + k_all
                    tl.store(at_n, tl.load(at_n) + n_acc.to(tl.float64))
                    acc = tl.zeros((K_PAD, D_PAD), tl.float32)
                    n_acc = tl.zeros((K_PAD,), tl.float32)
                    pending = 0
            else:
                for k0 in range(0, K_PAD, BLOCK_K):
                    kk = k0 + k_block
                    onehot_t = ((kk[:, None] == best_k[None, :]) & row_ok[None, :]).to(tl.float32)
                    if tl.max(tl.max(onehot_t, 1), 0) > 0:  # a block no row chose adds nothing
                        part = tl.dot(onehot_t, x_lo, input_precision="tf32")
                        part = tl.dot(onehot_t, x_hi, part, input_precision="tf32")
                        at = sums + (pid * K_PAD + kk[:, None]) * D_PAD + cols[None, :]
                        tl.store(at, tl.load(at) + part.to(tl.float64))
                        at_n = counts + pid * K_PAD + kk
                        tl.store(at_n, tl.load(at_n) + tl.sum(onehot_t * weight[None, :], 1).to(tl.float64))
    if UPDATE:
        if REGISTER_SUMS:
            at = sums + (pid * K_PAD + k_all[:, None]) * D_PAD + cols[None, :]
            tl.store(at, tl.load(at) + acc.to(tl.float64))
            at_n = counts + pid * K_PAD + k_all
            tl.store(at_n, tl.load(at_n) + n_acc.to(tl.float64))
    tl.store(changed + pid, tl.sum(n_changed, 0).to(tl.int64))


# Relative error of one computed score x'.W + b against ||x - mu||^2 - ||x - c||^2 in exact arithmetic, per unit
# of sum_j |x'_j| |W_j|: the operands' rounding (TF32 to nearest: 2^-11 each; under tf32x3 the dropped low product
# and the low halves truncated to TF32 by the tensor cores: 5 * 2^-22), float32 accumulation over PRODUCTS * D_PAD + 4
# terms at two units each (the tensor cores' adds may truncate), x - c and -2 (mu - c) rounded to float32.
OPERAND_ERROR = {"tf32": 2.0 * 2.0**-11 + 2.0**-22, "tf32x3": 5.0 * 2.0**-22, "ieee": 0.0}
PRODUCTS = {"tf32": 1, "tf32x3": 3, "ieee": 1}
SLACK_MARGIN = 1.25  # on top of the first-order bound: its second-order terms and the norms' own rounding


def score_slack(precision: str, d_pad: int, center_radius: float) -> tuple[float, float]:
    """(radius_coef, square_coef): the kernel's computed score of any center is within radius_coef * ||x - c|| +
    square_coef of its exact value (so two scores closer than twice that are rescored in float64).
    ``center_radius``: max_k ||mu_k - c||. With |W_j| = 2 |mu_j - c_j|, sum_j |x'_j| |W_j| <= 2 ||x'|| R; the bias
    ||mu - c||^2 <= R^2 is rounded once and the sum |score| <= R^2 + 2 ||x'|| R once more."""
    u = 2.0**-24
    accumulate = 2.0 * (PRODUCTS[precision] * d_pad + 4) * u
    relative = OPERAND_ERROR[precision] + accumulate + 2.0 * u
    radius_coef = SLACK_MARGIN * (2.0 * relative + 4.0 * u) * center_radius
    square_coef = SLACK_MARGIN * 3.0 * u * center_radius * center_radius
    return radius_coef, square_coef


ASSIGN_PRECISIONS = ("tf32x3", "tf32", "ieee")
UPDATES = ("onehot", "sorted")
FLUSH_ROWS = 1024  # rows whose float32 sums one program holds before adding them in float64
REGISTER_SUMS_ELEMENTS = 8192  # K_pad x d_pad sums held in registers (32 a thread at 8 warps), else per tile


class Assigner:
    """Lloyd's assignment of X (N, d) float32 with the per-cluster sums and counts, one launch per call.

    Labels are those of distances in float64: scores come from tensor-core products (``precision``), and every row
    whose best two scores lie within the products' error bound (:func:`score_slack`) is rescored in float64.
    ``sample_weight`` (N,) weights the sums and counts. ``update``: "onehot" contracts each tile's one-hot with its
    rows in the assignment's pass; "sorted" sums the labelled rows afterwards by a sorted segment reduction
    (:class:`turbo_gmm.init.kmeans_update.SegmentSums`: a second read of X, no (K x rows) product)."""

    def __init__(self, X: torch.Tensor, center: torch.Tensor, n_clusters: int, precision: str = "tf32x3",
                 sample_weight: torch.Tensor | None = None, programs_per_sm: float = ASSIGN_PROGRAMS_PER_SM,
                 num_warps: int = ASSIGN_WARPS, update: str = "onehot"):
        if precision not in ASSIGN_PRECISIONS:
            raise ValueError(f"precision must be one of {ASSIGN_PRECISIONS}, got {precision!r}")
        if update not in UPDATES:
            raise ValueError(f"update must be one of {UPDATES}, got {update!r}")
        N, d = X.shape
        self.X, self.K, self.precision, self.num_warps = X, n_clusters, precision, num_warps
        self.k_pad, self.d_pad = pow2_at_least_16(n_clusters), pow2_at_least_16(d)
        self.register_sums = self.k_pad * self.d_pad <= REGISTER_SUMS_ELEMENTS
        self.block_m = 64 if self.register_sums or self.d_pad > 64 else 128
        self.block_k = min(64 if self.d_pad <= 64 else 32, self.k_pad)  # tf32x3 at d_pad 128: 262 KB of shared at 64
        self.flush_tiles = max(1, FLUSH_ROWS // self.block_m)
        self.n_tiles = triton.cdiv(N, self.block_m)
        self.programs = program_count(self.n_tiles, X.device, programs_per_sm)
        self.sample_weight = None if sample_weight is None else sample_weight.to(X.device, torch.float32).contiguous()
        self.center = torch.zeros(self.d_pad, dtype=torch.float32, device=X.device)
        self.center[:d] = center.float()
        self.W = torch.zeros((self.d_pad, self.k_pad), dtype=torch.float32, device=X.device)
        self.bias = torch.full((self.k_pad,), BIG_SCORE.value, dtype=torch.float32, device=X.device)
        self.C = torch.zeros((self.k_pad, self.d_pad), dtype=torch.float64, device=X.device)
        self.slack_units = score_slack(precision, self.d_pad, 1.0)  # the kernel scales them by its radius
        self.segment_sums = SegmentSums(X, n_clusters, self.sample_weight) if update == "sorted" else None

    def __call__(self, centers: torch.Tensor, labels: torch.Tensor, update: bool = True):
        """Labels in place for ``centers`` (K, d) float64; (sums (K, d), counts (K,), labels changed) in float64,
        sums None without update."""
        K, d, dev = self.K, self.X.shape[1], self.X.device
        y = centers.double() - self.center[:d].double()  # mu - c, c as the kernel subtracts it
        self.W[:d, :K] = (-2.0 * y).T.float()
        self.bias[:K] = (y * y).sum(1).float()
        self.C[:K, :d] = centers
        radius = y.square().sum(1).max().sqrt().float().reshape(1)
        P = self.programs
        onehot = update and self.segment_sums is None  # the kernel's own update
        sums = torch.zeros((P if onehot else 1, self.k_pad, self.d_pad), dtype=torch.float64, device=dev)
        counts = torch.zeros((P if onehot else 1, self.k_pad), dtype=torch.float64, device=dev)
        changed = torch.empty(P, dtype=torch.int64, device=dev)
        weighted = self.sample_weight is not None
        _lloyd_kernel[(P,)](self.X, self.sample_weight if weighted else self.X, self.center, self.W, self.bias, self.C,
                            labels, sums, counts, changed, self.X.shape[0], d, K, self.n_tiles, radius,
                            *self.slack_units, K_PAD=self.k_pad, D_PAD=self.d_pad, BLOCK_M=self.block_m,
                            BLOCK_K=self.block_k, PRECISION=self.precision, UPDATE=onehot, WEIGHTED=weighted,
                            REGISTER_SUMS=self.register_sums, FLUSH_TILES=self.flush_tiles, num_warps=self.num_warps)
        if update and not onehot:
            return (*self.segment_sums(labels), changed.sum())
        if not update:
            return None, None, changed.sum()
        n = counts.sum(0)[:K]
        return sums.sum(0)[:K, :d], n, changed.sum()


@triton.jit(do_not_specialize=ROW_COUNTS)
def _potentials_kernel(
    X, fold, candidates, closest, tile_pots, dist,  # X (N, d) f32; fold (1,) i64: a row folded into closest first
    N, d, n_tiles,                                  # (read when FOLD); candidates (T_PAD, D_PAD) f32 rows; closest (N,)
    T: tl.constexpr, T_PAD: tl.constexpr,           # f64, stored folded when FOLD; tile_pots (n_tiles, T_PAD) f64: per
    D_PAD: tl.constexpr, BLOCK_M: tl.constexpr,     # row tile, sum_i min(closest_i, |x_i - y_t|^2); dist (T, N) f64:
    FOLD: tl.constexpr, STORE: tl.constexpr,        # |x_i - y_t|^2, written when STORE
):
    """The candidates' k-means++ potentials per row tile in one pass over X; with FOLD, the previous step's seed is
    folded into closest in the same pass (a whole step in one pass)."""
    pid = tl.program_id(0)
    cols = tl.arange(0, D_PAD)
    col_ok = cols < d
    slots = tl.arange(0, T_PAD)
    if FOLD:
        seed = tl.load(X + tl.load(fold) * d + cols, mask=col_ok, other=0.0).to(tl.float64)
    for t in range(pid, n_tiles, tl.num_programs(0)):
        rows = tl.arange(0, BLOCK_M).to(tl.int64) + t * BLOCK_M  # t * BLOCK_M < N fits int32; rows * d may not
        row_ok = rows < N
        x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        x = x.to(tl.float64)
        near = tl.load(closest + rows, mask=row_ok, other=0.0)
        if FOLD:
            diff = x - seed[None, :]
            near = tl.minimum(near, tl.sum(diff * diff, 1))
            tl.store(closest + rows, near, mask=row_ok)
        pots = tl.zeros((T_PAD,), tl.float64)
        for j in tl.static_range(T):
            y = tl.load(candidates + j * D_PAD + cols).to(tl.float64)
            diff = x - y[None, :]
            dj = tl.sum(diff * diff, 1)
            if STORE:
                tl.store(dist + j * N + rows, dj, mask=row_ok)
            pots += tl.where(slots == j, tl.sum(tl.where(row_ok, tl.minimum(dj, near), 0.0), 0), 0.0)
        tl.store(tile_pots + t * T_PAD + slots, pots)


def _tile_potentials(X: torch.Tensor, candidates: torch.Tensor, closest: torch.Tensor, tile_pots: torch.Tensor,
                     fold: torch.Tensor | None = None, dist: torch.Tensor | None = None) -> torch.Tensor:
    """Launch :func:`_potentials_kernel` over tiles of :func:`_potential_block_rows`; (T,) float64 potentials.
    ``tile_pots`` (n_tiles, T_PAD) float64 receives the per-tile sums."""
    N, d = X.shape
    T = candidates.shape[0]
    n_tiles, t_pad = tile_pots.shape
    d_pad = pow2_at_least_16(d)
    P = program_count(n_tiles, X.device, POTENTIAL_PROGRAMS_PER_SM)
    _potentials_kernel[(P,)](X, X if fold is None else fold, padded_rows(X, candidates, t_pad), closest, tile_pots,
                             closest if dist is None else dist, N, d, n_tiles, T=T, T_PAD=t_pad, D_PAD=d_pad,
                             BLOCK_M=_potential_block_rows(d_pad), FOLD=fold is not None, STORE=dist is not None,
                             num_warps=POTENTIAL_WARPS)
    return tile_pots.sum(0)[:T]


@triton.jit(do_not_specialize=["N"])
def _fold_stored_kernel(dist, best, closest, N, BLOCK: tl.constexpr):
    """closest_i <- min(closest_i, dist[best, i]), best (1,) i64 on the device (no host read)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row_ok = rows < N
    j = tl.load(best)
    near = tl.load(closest + rows, mask=row_ok, other=0.0)
    tl.store(closest + rows, tl.minimum(near, tl.load(dist + j * N + rows, mask=row_ok, other=0.0)), mask=row_ok)


@triton.jit(do_not_specialize=["N", "n_points"])
def _fold_kernel(X, points, closest, N, d, n_points, BLOCK_M: tl.constexpr, D_PAD: tl.constexpr):
    """closest_i <- min(closest_i, min_j |x_i - points_j|^2), points (n_points, D_PAD) f32: X read once."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, D_PAD)
    row_ok = rows < N
    x = tl.load(X + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & (cols < d)[None, :], other=0.0)
    x = x.to(tl.float64)
    near = tl.load(closest + rows, mask=row_ok, other=0.0)
    for j in range(0, n_points):
        diff = x - tl.load(points + j * D_PAD + cols).to(tl.float64)[None, :]
        near = tl.minimum(near, tl.sum(diff * diff, 1))
    tl.store(closest + rows, near, mask=row_ok)


def _potential_block_rows(d_pad: int) -> int:
    return max(16, POTENTIAL_TILE_ELEMENTS // d_pad)


def padded_rows(X: torch.Tensor, rows: torch.Tensor, n_rows: int | None = None) -> torch.Tensor:
    """X[rows] as a zero-padded (n_rows or len(rows), d_pad) float32 block (a device gather, no host sync)."""
    out = torch.zeros((n_rows or rows.shape[0], pow2_at_least_16(X.shape[1])), dtype=torch.float32, device=X.device)
    out[: rows.shape[0], : X.shape[1]] = X[rows]
    return out


def candidate_potentials(X: torch.Tensor, candidates: torch.Tensor, closest: torch.Tensor,
                         dist: torch.Tensor | None = None) -> torch.Tensor:
    """(T,) float64: for each candidate row index, sum_i min(closest_i, ||x_i - X[cand]||^2). ``dist`` (T, N)
    float64, if given, receives every ||x_i - X[cand]||^2 (:func:`fold_stored` then folds one without reading X)."""
    n_tiles = triton.cdiv(X.shape[0], _potential_block_rows(pow2_at_least_16(X.shape[1])))
    tile_pots = torch.empty((n_tiles, pow2_at_least_16(candidates.shape[0])), dtype=torch.float64, device=X.device)
    return _tile_potentials(X, candidates, closest, tile_pots, dist=dist)


def stores_distances(X: torch.Tensor, n_candidates: int) -> bool:
    """Whether k-means++ keeps each step's candidate distances (T x N float64) to fold the chosen one: where they
    take at most STORED_DISTANCE_RATIO times X's bytes, writing them costs less than reading X again."""
    return n_candidates * 8 <= STORED_DISTANCE_RATIO * X.shape[1] * X.element_size()


def fold_stored(dist: torch.Tensor, best: torch.Tensor, closest: torch.Tensor) -> None:
    """closest <- min(closest, dist[best]) in place; best (1,) int64 on the device."""
    N = closest.shape[0]
    _fold_stored_kernel[(triton.cdiv(N, FOLD_BLOCK),)](dist, best, closest, N, BLOCK=FOLD_BLOCK, num_warps=4)


def fold_nearest(X: torch.Tensor, rows: torch.Tensor, closest: torch.Tensor) -> None:
    """closest <- min(closest, min_j ||x - X[rows_j]||^2) in place, float64 direct distances in one pass over X;
    rows: (m,) int64 on X's device."""
    N, d = X.shape
    d_pad = pow2_at_least_16(d)
    block = _potential_block_rows(d_pad)
    _fold_kernel[(triton.cdiv(N, block),)](X, padded_rows(X, rows), closest, N, d, rows.shape[0], BLOCK_M=block,
                                           D_PAD=d_pad, num_warps=POTENTIAL_WARPS)


class SeedingSteps:
    """k-means++'s greedy steps with one pass over X a step (unweighted, float64 direct distances).

    A step's pass folds the previous step's seed into ``closest`` and sums each candidate's potential per row tile;
    the chosen candidate's tile sums are then the tile masses of the next step's ``closest``, so the next draw
    searches the cumulative tile masses and rescans one tile a candidate (float64, by torch ops): no cumulative
    sum over N, no stored candidate distances, no fold pass. Every operation stays on the device (no host read):
    the steps can be captured in a CUDA graph."""

    def __init__(self, X: torch.Tensor, trials: int):
        self.X = X
        self.block = _potential_block_rows(pow2_at_least_16(X.shape[1]))
        self.n_tiles = triton.cdiv(X.shape[0], self.block)
        self.tile_pots = torch.empty((self.n_tiles, pow2_at_least_16(trials)), dtype=torch.float64, device=X.device)
        self.offsets = torch.arange(self.block, device=X.device)

    def tile_masses(self, closest: torch.Tensor) -> torch.Tensor:
        """(n_tiles,) float64: closest summed over each row tile."""
        pad = self.n_tiles * self.block - closest.shape[0]
        return torch.nn.functional.pad(closest, (0, pad)).view(self.n_tiles, self.block).sum(1)

    def draw(self, closest: torch.Tensor, fold: torch.Tensor | None, masses: torch.Tensor,
             values: torch.Tensor) -> torch.Tensor:
        """Candidate rows (T,) int64: for each value v, the first row whose cumulative mass reaches v (the last row
        past the total), the mass of a row being min(closest, its distance to X[fold]) (fold None: closest)."""
        X, N = self.X, self.X.shape[0]
        cum = torch.cumsum(masses, 0)
        tile = torch.searchsorted(cum, values).clamp_(max=self.n_tiles - 1)
        base = torch.where(tile > 0, cum[(tile - 1).clamp_(min=0)], 0.0)
        rows = tile[:, None] * self.block + self.offsets[None, :]  # (T, block)
        inside = rows < N
        at = rows.clamp(max=N - 1)
        mass = closest[at]
        if fold is not None:
            diff = X[at].double() - X[fold].double()[None]
            mass = torch.minimum(mass, diff.square().sum(2))
        within = base[:, None] + torch.cumsum(torch.where(inside, mass, 0.0), 1)
        pick = torch.searchsorted(within, values[:, None]).clamp_(max=self.block - 1)
        return rows.gather(1, pick)[:, 0].clamp_(max=N - 1)

    def potentials(self, candidates: torch.Tensor, closest: torch.Tensor, fold: torch.Tensor | None) -> torch.Tensor:
        """(T,) float64 potentials of the candidate rows after folding X[fold] into closest (in place)."""
        return _tile_potentials(self.X, candidates, closest, self.tile_pots, fold=fold)
