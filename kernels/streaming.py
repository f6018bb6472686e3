"""Out-of-core E-steps: a host array (or np.memmap) streamed through the device in row chunks.

The E-step statistics are sums over rows (:mod:`turbo_gmm.estep`), so X never has
to be on the device at once: each chunk's float64 statistics are added on the
device and one M-step follows the last chunk -- the same iteration as in memory.

On CUDA the copy is double-buffered: two pinned host buffers, two device
buffers, a copy stream and events. While the kernels run on chunk i (compute
stream) host threads fill the other pinned buffer with chunk i+1 (dtype conversion
and memmap page-in included) and the copy stream moves it to the device, so the
kernels wait on the bus only when it is slower than they are. Device memory for
X is therefore 2 x rows_per_chunk x d x 4 bytes whatever N is.

Elsewhere (CPU fallback, Triton interpreter) the chunks are host views,
converted only when the dtype differs. Its benchmark is harness/studies/streaming_bench.py.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .estep import BlockStatistics, Statistics
from .estep_full import COVARIANCE_TYPES, bytes_per_row

CPU_BLOCK_BYTES = 256 << 20  # torch fallback: temporaries per block when no budget is given
FILL_THREADS = max(1, min(8, os.cpu_count() or 1))  # host threads filling a pinned buffer


def rows_per_chunk(max_device_bytes: int, d: int, K: int, backend: str, covariance_type: str = "diag",
                   itemsize: int = 4) -> int:
    """Rows per chunk so that the chunk buffers (and, for the torch fallback, the
    (rows, K) float64 score blocks, (rows, K, d) for full and tied) fit in ``max_device_bytes``.
    Triton: two buffers of ``itemsize``-byte entries (4: float32; 8: float64 chunks for the fp64
    kernels) plus the two-pass row normalizer of that size, (2d + 1) * itemsize bytes a row."""
    if backend == "triton":
        per_row = (2 * d + 1) * itemsize
    elif covariance_type in COVARIANCE_TYPES:
        per_row = bytes_per_row(covariance_type, K, d)
    else:
        per_row = 16 * d + 24 * K
    rows = int(max_device_bytes) // per_row
    if rows < 1:
        raise ValueError(f"max_device_bytes={max_device_bytes} cannot hold one row of d={d} "
                         f"(needs {per_row} bytes a row for the {backend} backend)")
    return rows


def chunk_bounds(N: int, rows: int) -> list[tuple[int, int]]:
    return [(r0, min(N, r0 + rows)) for r0 in range(0, N, rows)]


def device_chunks(X: np.ndarray, rows: int, device: torch.device, dtype: torch.dtype = torch.float32,
                  origin: np.ndarray | None = None):
    """Yield consecutive row blocks of the host array X (minus ``origin`` (d,), subtracted in X's
    dtype before the conversion, when given) as contiguous ``dtype`` tensors on ``device``. A yielded
    CUDA chunk is valid until the next one is requested: use it (launch the kernels) before advancing
    the generator."""
    if device.type == "cuda":
        yield from _double_buffered(X, rows, device, dtype, origin)
        return
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        x = X[r0:r1] if origin is None else X[r0:r1] - origin
        yield torch.from_numpy(np.require(x, np_dtype, ["C", "W"]))  # torch wants writable memory


def _fill(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor, origin: np.ndarray | None = None) -> None:
    """dst[...] = src (- origin) (with dtype conversion) in row slices on several threads: one
    thread's memcpy or memmap page-in is slower than the bus it feeds (NumPy releases
    the GIL while copying)."""
    step = -(-dst.shape[0] // FILL_THREADS)
    if origin is None:
        jobs = [pool.submit(np.copyto, dst[a : a + step], src[a : a + step]) for a in range(0, dst.shape[0], step)]
    else:
        jobs = [pool.submit(np.subtract, src[a : a + step], origin, out=dst[a : a + step], casting="same_kind")
                for a in range(0, dst.shape[0], step)]
    for f in jobs:
        f.result()


def _double_buffered(X: np.ndarray, rows: int, device: torch.device, dtype: torch.dtype, origin=None):
    with ThreadPoolExecutor(FILL_THREADS) as pool:
        yield from _double_buffered_with(X, rows, device, dtype, pool, origin)


def _double_buffered_with(X, rows, device, dtype, pool, origin=None):
    bounds = chunk_bounds(X.shape[0], rows)
    rows = min(rows, X.shape[0])
    d = X.shape[1]
    pinned = [torch.empty((rows, d), dtype=dtype, pin_memory=True) for _ in range(2)]
    staged = [torch.empty((rows, d), dtype=dtype, device=device) for _ in range(2)]
    copy_stream = torch.cuda.Stream(device)
    compute = torch.cuda.current_stream(device)
    copied = [torch.cuda.Event() for _ in range(2)]  # H2D out of pinned[b] into staged[b] done
    consumed = [torch.cuda.Event() for _ in range(2)]  # kernels reading staged[b] done

    def issue(i):
        b, (r0, r1) = i % 2, bounds[i]
        copied[b].synchronize()  # the host may overwrite pinned[b] only after its last copy left
        _fill(pinned[b][: r1 - r0].numpy(), X[r0:r1], pool, origin)
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(consumed[b])  # chunk i-2's kernels are done with staged[b]
            staged[b][: r1 - r0].copy_(pinned[b][: r1 - r0], non_blocking=True)
            copied[b].record(copy_stream)

    try:
        issue(0)
        for i, (r0, r1) in enumerate(bounds):
            b = i % 2
            compute.wait_event(copied[b])
            yield staged[b][: r1 - r0]
            consumed[b].record(compute)
            if i + 1 < len(bounds):
                issue(i + 1)  # host fill + copy of chunk i+1 overlap the kernels just launched on chunk i
    finally:  # the buffers are freed on return (or on an error): no copy or kernel may still use them
        copy_stream.synchronize()
        compute.synchronize()


def streamed_statistics(X: np.ndarray, block: BlockStatistics, params, rows: int, device: torch.device,
                        dtype: torch.dtype = torch.float32, origin: np.ndarray | None = None,
                        sample_weight: np.ndarray | None = None) -> Statistics:
    """Statistics of all rows of the host array X (of X - ``origin`` when given), summed in float64
    over chunks of ``rows``; ``sample_weight`` (N,): each chunk's weights go beside it (``block`` is
    turbo_gmm.estep's or turbo_gmm.estep_full's)."""
    total = None
    for (r0, r1), chunk in zip(chunk_bounds(X.shape[0], rows), device_chunks(X, rows, device, dtype, origin)):
        if sample_weight is None:
            st = block(chunk, *params)
        else:
            st = block(chunk, *params, sample_weight=torch.as_tensor(sample_weight[r0:r1]).to(chunk.device))
        total = st if total is None else total.__iadd__(st)
    return total


def host_column_mean(X: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """float64 column mean of a host array in chunks (no full-size float64 copy)."""
    s = np.zeros(X.shape[1], np.float64)
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        s += X[r0:r1].sum(0, dtype=np.float64)
    return s / X.shape[0]
