"""Lloyd's center update as a sorted segment reduction: per-cluster sums and counts of labelled rows in float64,
deterministic, with no one-hot product and no atomics.

The rows are ordered by label (a stable sort). Each chunk of ``block * tiles`` sorted rows is reduced by a
segmented scan in float64. A label whose rows all lie inside one chunk gets its sums there, stored by the one
program that holds them. The partial sums at a chunk's two ends (its head and tail segments, which other chunks
may continue) become the rows of the next level, reduced the same way until one chunk holds them all. The sort fixes
the order of every addition: the same labels give the same bits.

CUDA, or CPU tensors under TRITON_INTERPRET=1; X float32 or float64 (N, d), labels int64 in [0, K)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..launch import pow2_at_least_16

BLOCK_ROWS = 128  # rows of one scanned tile
CHUNK_TILES = 32  # tiles of one program's chunk: its head and tail are the next level's rows


@triton.jit
def _segmented_add(a, a_start, b, b_start):
    """Sum within segments: b starts a segment (b_start != 0) or adds to a's."""
    return tl.where(b_start != 0, b, a + b), a_start | b_start


@triton.jit(do_not_specialize=["N", "n_chunks"])
def _segment_sums_kernel(
    X, weight, order, keys, sums, counts, piece_key, piece_sum, piece_count,
    # X (rows, stride) f32/f64; weight (rows,) f32/f64 (read when WEIGHTED); order (N,) i64: the rows in key order
    # (read when GATHER; else row i is X's row i); keys (N,) i32 nondecreasing; sums (K, D_PAD), counts (K,) f64:
    # complete segments are stored there; piece_key (2 n_chunks,) i32, piece_sum (2 n_chunks, D_PAD), piece_count
    # f64: each chunk's head (slot 2c) and tail (2c + 1) partial sums; a chunk of one segment stores it as its head
    # and a tail of zero sums under the same key (the pieces' keys stay sorted)
    N, d, stride, n_chunks,
    D_PAD: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr, GATHER: tl.constexpr,
    WEIGHTED: tl.constexpr, SCALE: tl.constexpr,  # SCALE: sums of weight * x (rows), else of x (pieces' sums)
):
    c = tl.program_id(0)
    lo = c.to(tl.int64) * (BLOCK * TILES)
    hi = tl.minimum(lo + BLOCK * TILES, N)
    last_level = n_chunks == 1  # one chunk: its head and tail are complete too
    cols = tl.arange(0, D_PAD)
    col_ok = cols < d
    lane = tl.arange(0, BLOCK)
    carry = tl.zeros((D_PAD,), tl.float64)  # the running sums of the segment open at the previous tile's end
    carry_n = tl.sum(tl.zeros((BLOCK,), tl.float64), 0)
    n_starts = tl.sum(tl.zeros((BLOCK,), tl.int32), 0)
    for t in range(TILES):
        i = lo + t * BLOCK + lane
        ok = i < hi
        key = tl.load(keys + i, mask=ok, other=-1)
        prev = tl.load(keys + i - 1, mask=ok & (i > lo), other=-2)  # the chunk's first row starts a segment
        after = tl.load(keys + i + 1, mask=ok & (i + 1 < hi), other=-3)  # and its last row ends one
        start = (ok & (key != prev)).to(tl.int32)
        end = ok & (key != after)
        if GATHER:
            row = tl.load(order + i, mask=ok, other=0)
        else:
            row = i
        x = tl.load(X + row[:, None] * stride + cols[None, :], mask=ok[:, None] & col_ok[None, :], other=0.0)
        x = x.to(tl.float64)
        if WEIGHTED:
            w = tl.load(weight + row, mask=ok, other=0.0).to(tl.float64)
        else:
            w = tl.where(ok, 1.0, 0.0).to(tl.float64)
        if SCALE:
            x = x * w[:, None]  # float32 x float32: exact in float64
        s, _ = tl.associative_scan((x, tl.broadcast_to(start[:, None], (BLOCK, D_PAD))), 0, _segmented_add)
        n, _ = tl.associative_scan((w, start), 0, _segmented_add)
        seg = n_starts + tl.cumsum(start, 0)  # 1 on the head segment (the chunk's first)
        go_on = seg == n_starts  # rows before this tile's first start continue the carried segment
        s += tl.where(go_on[:, None], carry[None, :], 0.0)
        n += tl.where(go_on, carry_n, 0.0)
        head = end & (seg == 1)
        tail = end & (i == hi - 1)  # the chunk's last row: every chunk writes its tail slot once
        complete = end & ((~head & ~tail) | last_level)  # a segment inside the chunk holds all its label's rows
        tl.store(sums + key[:, None] * D_PAD + cols[None, :], s, mask=complete[:, None])
        tl.store(counts + key, n, mask=complete)
        head = head & ~last_level
        at = 2 * c + 0 * i
        tl.store(piece_key + at, key, mask=head)
        tl.store(piece_count + at, n, mask=head)
        tl.store(piece_sum + at[:, None] * D_PAD + cols[None, :], s, mask=head[:, None])
        tail = tail & ~last_level
        at += 1
        tl.store(piece_key + at, key, mask=tail)
        tl.store(piece_count + at, tl.where(head, 0.0, n), mask=tail)
        tl.store(piece_sum + at[:, None] * D_PAD + cols[None, :], tl.where(head[:, None], 0.0, s), mask=tail[:, None])
        carry = tl.sum(tl.where((lane == BLOCK - 1)[:, None], s, 0.0), 0)
        carry_n = tl.sum(tl.where(lane == BLOCK - 1, n, 0.0), 0)
        n_starts += tl.sum(start, 0)



class SegmentSums:
    """Per-cluster float64 sums (K, d) and counts (K,) of X's rows by label, one stable sort and a few launches
    (:mod:`this module <turbo_gmm.init.kmeans_update>`); buffers are allocated once, so a call can be captured in a
    CUDA graph. ``sample_weight`` (N,) weights both."""

    def __init__(self, X: torch.Tensor, n_clusters: int, sample_weight: torch.Tensor | None = None,
                 block: int = BLOCK_ROWS, tiles: int = CHUNK_TILES):
        N, d = X.shape
        self.X, self.K, self.block, self.tiles = X, n_clusters, block, tiles
        self.d_pad = pow2_at_least_16(d)
        self.sample_weight = sample_weight
        dev = X.device
        self.sums = torch.zeros((n_clusters, self.d_pad), dtype=torch.float64, device=dev)
        self.counts = torch.zeros(n_clusters, dtype=torch.float64, device=dev)
        self.levels = []  # per level: (rows in, chunks, piece keys, piece sums, piece counts)
        rows = N
        while True:
            chunks = triton.cdiv(rows, block * tiles)
            pieces = 2 * chunks if chunks > 1 else 0
            self.levels.append((rows, chunks, torch.empty(pieces, dtype=torch.int32, device=dev),
                                torch.empty((pieces, self.d_pad), dtype=torch.float64, device=dev),
                                torch.empty(pieces, dtype=torch.float64, device=dev)))
            if chunks == 1:
                break
            rows = pieces

    def __call__(self, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(sums (K, d), counts (K,)) float64 of the rows of each label; labels (N,) int64 in [0, K)."""
        keys, order = torch.sort(labels.to(torch.int32), stable=True)
        self.sums.zero_()
        self.counts.zero_()
        X, weight, d = self.X, self.sample_weight, self.X.shape[1]
        stride, gather, scale = X.stride(0), True, True
        for rows, chunks, piece_key, piece_sum, piece_count in self.levels:
            _segment_sums_kernel[(chunks,)](
                X, X if weight is None else weight, order, keys, self.sums, self.counts, piece_key, piece_sum,
                piece_count, rows, d, stride, chunks, D_PAD=self.d_pad, BLOCK=self.block, TILES=self.tiles,
                GATHER=gather, WEIGHTED=weight is not None, SCALE=scale, num_warps=4)
            if chunks == 1:
                break
            X, weight, keys, stride, gather, scale = piece_sum, piece_count, piece_key, self.d_pad, False, False
        return self.sums[:, :d], self.counts
