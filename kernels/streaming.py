"""Out-of-core E-steps: a host array (or np.memmap) streamed through the device in row chunks.

The E-step statistics are sums over rows (:mod:`kernels.estep`), so X never has
to be on the device at once: each chunk's float64 statistics are added on the
device and one M-step follows the last chunk -- the same iteration as in memory.

On CUDA the copy is double-buffered: two pinned host buffers, two device
buffers, a copy stream and events. While the kernels run on chunk i (compute
stream) host threads fill the other pinned buffer with chunk i+1 (dtype conversion
and memmap page-in included) and the copy stream moves it to the device, so the
kernels wait on the bus only when it is slower than they are. Device memory for
X is therefore 2 x rows_per_chunk x d x 4 bytes whatever N is.

Elsewhere (CPU fallback, Triton interpreter) the chunks are host views,
converted only when the dtype differs.

    python -m kernels.streaming --N 200000000 --d 32 --K 32 --max-device-bytes 3200000000
benchmarks it (GPU): host-to-device bandwidth, then streamed and in-memory ms/iteration.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from kernels.estep import BlockStatistics, Statistics

CPU_BLOCK_BYTES = 256 << 20  # torch fallback: temporaries per block when no budget is given
FILL_THREADS = max(1, min(8, os.cpu_count() or 1))  # host threads filling a pinned buffer


def rows_per_chunk(max_device_bytes: int, d: int, K: int, backend: str) -> int:
    """Rows per chunk so that the chunk buffers (and, for the torch fallback, the
    (rows, K) float64 score blocks) fit in ``max_device_bytes``. Triton: two
    float32 buffers plus the two-pass row normalizer, 8d + 4 bytes a row."""
    per_row = 8 * d + 4 if backend == "triton" else 16 * d + 24 * K
    rows = int(max_device_bytes) // per_row
    if rows < 1:
        raise ValueError(f"max_device_bytes={max_device_bytes} cannot hold one row of d={d} "
                         f"(needs {per_row} bytes a row for the {backend} backend)")
    return rows


def chunk_bounds(N: int, rows: int) -> list[tuple[int, int]]:
    return [(r0, min(N, r0 + rows)) for r0 in range(0, N, rows)]


def device_chunks(X: np.ndarray, rows: int, device: torch.device, dtype: torch.dtype = torch.float32):
    """Yield consecutive row blocks of the host array X as contiguous ``dtype``
    tensors on ``device``. A yielded CUDA chunk is valid until the next one is
    requested: use it (launch the kernels) before advancing the generator."""
    if device.type == "cuda":
        yield from _double_buffered(X, rows, device, dtype)
        return
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        yield torch.from_numpy(np.require(X[r0:r1], np_dtype, ["C", "W"]))  # torch wants writable memory


def _fill(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor) -> None:
    """dst[...] = src (with dtype conversion) in row slices on several threads: one
    thread's memcpy or memmap page-in is slower than the bus it feeds (NumPy releases
    the GIL while copying)."""
    step = -(-dst.shape[0] // FILL_THREADS)
    for f in [pool.submit(np.copyto, dst[a : a + step], src[a : a + step]) for a in range(0, dst.shape[0], step)]:
        f.result()


def _double_buffered(X: np.ndarray, rows: int, device: torch.device, dtype: torch.dtype):
    with ThreadPoolExecutor(FILL_THREADS) as pool:
        yield from _double_buffered_with(X, rows, device, dtype, pool)


def _double_buffered_with(X, rows, device, dtype, pool):
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
        _fill(pinned[b][: r1 - r0].numpy(), X[r0:r1], pool)
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
                        dtype: torch.dtype = torch.float32) -> Statistics:
    """Statistics of all rows of the host array X, summed in float64 over chunks of ``rows``."""
    total = None
    for chunk in device_chunks(X, rows, device, dtype):
        st = block(chunk, *params)
        total = st if total is None else total.__iadd__(st)
    return total


def host_column_mean(X: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """float64 column mean of a host array in chunks (no full-size float64 copy)."""
    s = np.zeros(X.shape[1], np.float64)
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        s += X[r0:r1].sum(0, dtype=np.float64)
    return s / X.shape[0]


def _benchmark(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m kernels.streaming")
    p.add_argument("--N", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--K", type=int, required=True)
    p.add_argument("--max-device-bytes", type=int, required=True)
    p.add_argument("--n-iter", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("the streaming benchmark needs a CUDA GPU")
    from kernels.datasets import generate_rows

    dev = torch.device("cuda")
    X = np.empty((a.N, a.d), np.float32)
    step = max(1, (1 << 26) // a.d)
    for r0 in range(0, a.N, step):  # generated on the GPU in slices, kept on the host
        X[r0 : r0 + step] = generate_rows(a.K, a.d, a.seed, r0, min(a.N, r0 + step), dev).cpu().numpy()
    X -= host_column_mean(X).astype(np.float32)
    buf = torch.empty(min(a.N * a.d, 1 << 28), dtype=torch.float32, pin_memory=True)
    dst = torch.empty_like(buf, device=dev)
    dst.copy_(buf, non_blocking=True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        dst.copy_(buf, non_blocking=True)
    torch.cuda.synchronize()
    h2d = 5 * buf.numel() * 4 / (time.perf_counter() - t) / 1e9
    print(f"X {a.N}x{a.d} float32 = {X.nbytes / 1e9:.2f} GB on the host, budget {a.max_device_bytes / 1e9:.2f} GB "
          f"({X.nbytes / a.max_device_bytes:.1f}x), pinned H2D {h2d:.1f} GB/s -> {1e3 * X.nbytes / 1e9 / h2d:.1f} ms/pass")
    runs = [("streamed", a.max_device_bytes)]
    if X.nbytes * 3 < torch.cuda.mem_get_info()[0]:
        runs.append(("in-memory", None))
    for name, budget in runs:
        _time_iterations(X, a, name, budget)


def _time_iterations(X, a, name, budget):
    """ms per EM iteration (E-step over every chunk + M-step), each iteration timed on its
    own after one untimed (compiling) iteration: the estimator's per-fit host work
    (validation, the column-mean pass, initialization) stays out of the figure."""
    from kernels.estep import mstep_diag
    from kernels.estimator import _FitData

    dev = torch.device("cuda")
    data = _FitData(X, a.K, "triton", dev, budget, "auto", "tf32x3")
    rows = np.sort(np.random.default_rng(a.seed).choice(X.shape[0], a.K, replace=False))
    m = torch.as_tensor(X[rows], dtype=torch.float64, device=dev)
    w = torch.full((a.K,), 1.0 / a.K, dtype=torch.float64, device=dev)
    v = torch.as_tensor(X[: 1 << 16].var(0, dtype=np.float64), device=dev).expand(a.K, -1).contiguous()
    ms = []
    for i in range(1 + a.n_iter):
        torch.cuda.synchronize()
        t = time.perf_counter()
        w, m, v, _ = mstep_diag(data.statistics(w, m, v), X.shape[0], data.center, 1e-6)
        torch.cuda.synchronize()
        if i:
            ms.append(1e3 * (time.perf_counter() - t))
    chunks = f", chunks of {data.rows} rows" if data.streamed else ""
    print(f"{name:9s}: {min(ms):8.2f} ms/iter min, {np.median(ms):8.2f} median "
          f"({X.nbytes / 1e9 / (min(ms) / 1e3):.1f} GB/s of X){chunks}")


if __name__ == "__main__":
    _benchmark()
