"""Out-of-core EM on the GPU: host-to-device bandwidth, then streamed and in-memory ms per iteration.

    python -m harness.studies.streaming_bench --N 200000000 --d 32 --K 32 --max-device-bytes 3200000000

X (the seeded mixture of turbo_gmm.datasets, generated on the GPU in slices and kept
on the host) is streamed through ``max-device-bytes`` in row chunks by
:func:`turbo_gmm.streaming.streamed_statistics`, as the estimator streams it; when three
copies of X fit in free device memory, the same iterations also run with X resident.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from turbo_gmm.datasets import generate_rows
from turbo_gmm.diag.estep import BlockStatistics, mstep_diag
from turbo_gmm.streaming import host_column_mean, rows_per_chunk, streamed_statistics


def host_data(N: int, d: int, K: int, seed: int) -> np.ndarray:
    """make_dataset(N, K, d, seed)'s X on the host, generated on the GPU in slices (N x d may exceed the GPU)."""
    dev = torch.device("cuda")
    X = np.empty((N, d), np.float32)
    step = max(1, (1 << 26) // d)
    for r0 in range(0, N, step):
        X[r0 : r0 + step] = generate_rows(K, d, seed, r0, min(N, r0 + step), dev).cpu().numpy()
    X -= host_column_mean(X).astype(np.float32)
    return X


def pinned_h2d_gb_per_s(elements: int) -> float:
    """Pinned host-to-device copy rate over 5 copies of ``elements`` float32 (after one untimed)."""
    buf = torch.empty(elements, dtype=torch.float32, pin_memory=True)
    dst = torch.empty_like(buf, device="cuda")
    dst.copy_(buf, non_blocking=True)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        dst.copy_(buf, non_blocking=True)
    torch.cuda.synchronize()
    return 5 * buf.numel() * 4 / (time.perf_counter() - t) / 1e9


def time_iterations(X: np.ndarray, K: int, n_iter: int, seed: int, budget: int | None) -> tuple[list[float], str]:
    """ms of each EM iteration (E-step over every chunk + M-step) after one untimed (compiling) one, X
    streamed through ``budget`` bytes (None: X resident on the device). The per-fit host work of the
    estimator (validation, the column-mean pass, initialization) stays out of the figure."""
    dev = torch.device("cuda")
    N, d = X.shape
    center = torch.as_tensor(host_column_mean(X), device=dev)
    block = BlockStatistics(K, d, center, "triton")
    if budget is None:
        X_dev = torch.from_numpy(X).to(dev)
        statistics, how = (lambda w, m, v: block(X_dev, w, m, v)), "X on the device"
    else:
        rows = rows_per_chunk(budget, d, K, "triton")
        statistics, how = (lambda w, m, v: streamed_statistics(X, block, (w, m, v), rows, dev)), f"chunks of {rows} rows"
    init_rows = np.sort(np.random.default_rng(seed).choice(N, K, replace=False))
    m = torch.as_tensor(X[init_rows], dtype=torch.float64, device=dev)
    w = torch.full((K,), 1.0 / K, dtype=torch.float64, device=dev)
    v = torch.as_tensor(X[: 1 << 16].var(0, dtype=np.float64), device=dev).expand(K, -1).contiguous()
    ms = []
    for i in range(1 + n_iter):
        torch.cuda.synchronize()
        t = time.perf_counter()
        w, m, v, _ = mstep_diag(statistics(w, m, v), N, center, 1e-6)
        torch.cuda.synchronize()
        if i:
            ms.append(1e3 * (time.perf_counter() - t))
    return ms, how


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--N", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--K", type=int, required=True)
    p.add_argument("--max-device-bytes", type=int, required=True)
    p.add_argument("--n-iter", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("the streaming benchmark needs a CUDA GPU")
    X = host_data(a.N, a.d, a.K, a.seed)
    h2d = pinned_h2d_gb_per_s(min(a.N * a.d, 1 << 28))
    print(f"X {a.N}x{a.d} float32 = {X.nbytes / 1e9:.2f} GB on the host, budget {a.max_device_bytes / 1e9:.2f} GB "
          f"({X.nbytes / a.max_device_bytes:.1f}x), pinned H2D {h2d:.1f} GB/s -> {1e3 * X.nbytes / 1e9 / h2d:.1f} ms/pass")
    runs = [("streamed", a.max_device_bytes)]
    if X.nbytes * 3 < torch.cuda.mem_get_info()[0]:
        runs.append(("in-memory", None))
    for name, budget in runs:
        ms, how = time_iterations(X, a.K, a.n_iter, a.seed, budget)
        print(f"{name:9s}: {min(ms):8.2f} ms/iter min, {np.median(ms):8.2f} median "
              f"({X.nbytes / 1e9 / (min(ms) / 1e3):.1f} GB/s of X), {how}")


if __name__ == "__main__":
    main()
