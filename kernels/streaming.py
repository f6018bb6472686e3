"""Out-of-core E-steps: a host array (or np.memmap) streamed through the device in row chunks.

The statistics are sums over rows, so each chunk's float64 statistics are added on the device and one
M-step follows the last chunk: the in-memory iteration. The double-buffered transport is
:func:`turbo_gmm._data.device_chunks`: device memory for X is 2 x rows_per_chunk x d x itemsize whatever N is."""
from __future__ import annotations

import numpy as np
import torch

from ._data import FILL_THREADS, _fill, chunk_bounds, device_chunks, host_column_mean  # noqa: F401
from .diag.estep import BlockStatistics, Statistics
from ._covariance import COVARIANCES

CPU_BLOCK_BYTES = 256 << 20  # torch fallback: temporaries per block when no budget is given


def rows_per_chunk(max_device_bytes: int, d: int, K: int, backend: str, covariance_type: str = "diag",
                   itemsize: int = 4) -> int:
    """Rows per chunk so that the chunk buffers fit ``max_device_bytes``: Triton, two buffers and the two-pass
    normalizer, (2d + 1) itemsize bytes a row; torch, the family's float64 temporaries."""
    if backend == "triton":
        per_row = (2 * d + 1) * itemsize
    else:
        per_row = COVARIANCES[covariance_type].bytes_per_row(K, d)
    rows = int(max_device_bytes) // per_row
    if rows < 1:
        raise ValueError(f"max_device_bytes={max_device_bytes} cannot hold one row of d={d} "
                         f"(needs {per_row} bytes a row for the {backend} backend)")
    return rows


def streamed_statistics(X: np.ndarray, block: BlockStatistics, params, rows: int, device: torch.device,
                        dtype: torch.dtype = torch.float32, origin: np.ndarray | None = None,
                        sample_weight: np.ndarray | None = None) -> Statistics:
    """Statistics of all rows of the host array X (minus ``origin``), summed in float64 over chunks of ``rows``,
    each chunk with its sample weights."""
    total = None
    for (r0, r1), chunk in zip(chunk_bounds(X.shape[0], rows), device_chunks(X, rows, device, dtype, origin)):
        if sample_weight is None:
            st = block(chunk, *params)
        else:
            st = block(chunk, *params, sample_weight=torch.as_tensor(sample_weight[r0:r1]).to(chunk.device))
        total = st if total is None else total.__iadd__(st)
    return total
