"""Arrays in and out of the estimator: torch tensors, DLPack and CUDA-array-interface arrays, host arrays.

Data already on a GPU (a torch CUDA tensor, a CuPy or JAX array) is read where it
is, through DLPack or ``__cuda_array_interface__`` (no copy, no host round trip),
and results go back as arrays of the caller's framework on the caller's device
(:func:`output_like`). Host arrays go through scikit-learn's validation and are
copied to the device once (:func:`upload`: pinned, double-buffered chunks).
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.dlpack import DLDeviceType

from .streaming import device_chunks

UPLOAD_CHUNK_BYTES = 64 << 20  # each of the two pinned buffers of an upload
DLPACK_CPU = 1  # DLDeviceType kDLCPU


def device_tensor(X):
    """X as a torch tensor when it is a torch tensor (any device) or an array in device memory
    (``__cuda_array_interface__``, or ``__dlpack__`` on a non-CPU device); None for host arrays
    (NumPy, lists, pandas, CPU DLPack arrays), which take scikit-learn's validation."""
    if isinstance(X, torch.Tensor):
        return X.detach()
    if isinstance(X, np.ndarray):
        return None
    # DLPack first: torch.as_tensor on an array that also has __cuda_array_interface__ (a JAX CUDA array) goes
    # through its DLPack 1.x capsule and raised torch 2.11's read-only TypeError on the H200 (2026-12-01)
    if hasattr(X, "__dlpack__") and hasattr(X, "__dlpack_device__"):
        if int(X.__dlpack_device__()[0]) != DLPACK_CPU:
            return tensor_from_dlpack(X)
        return None
    if hasattr(X, "__cuda_array_interface__"):
        return torch.as_tensor(X, device="cuda")
    return None


def tensor_from_dlpack(X) -> torch.Tensor:
    """A torch tensor viewing the memory of the DLPack producer X (no copy).

    torch.from_dlpack asks for a DLPack 1.x capsule, and torch 2.11 (the GPU image's) refuses one
    flagged read-only -- a JAX array's (TypeError "the read only flag is not supported", 2026-12-01).
    The legacy capsule (``__dlpack__`` without ``max_version``: DLPack < 1.0, no flags) of the same
    memory is the spec's export to a consumer that cannot mark tensors read-only; the estimator only
    reads X. The consumer's stream is passed as torch passes it, so the producer's pending work is
    ordered before torch reads."""
    try:
        return torch.from_dlpack(X)
    except TypeError:
        return torch.from_dlpack(X.__dlpack__(stream=_consumer_stream(X)))


def _consumer_stream(X):
    """The ``stream`` argument of ``X.__dlpack__`` for torch's current stream (the array API's
    convention: None off the GPU, 1 for CUDA's legacy default stream)."""
    kind, index = X.__dlpack_device__()
    if int(kind) not in (DLDeviceType.kDLCUDA, DLDeviceType.kDLROCM):
        return None
    stream = torch.cuda.current_stream(torch.device("cuda", int(index))).cuda_stream
    return 1 if int(kind) == DLDeviceType.kDLCUDA and stream == 0 else stream


def output_like(X):
    """A function giving a result (torch tensor or NumPy array) back in X's framework and device:
    torch tensors for torch input (on X's device), the array namespace's ``from_dlpack`` for
    other array-API arrays (CuPy, JAX), NumPy for NumPy and other host input."""
    if isinstance(X, torch.Tensor):
        return lambda r: torch.as_tensor(r, device=X.device)
    if not isinstance(X, np.ndarray) and hasattr(X, "__array_namespace__"):
        xp = X.__array_namespace__()
        return lambda r: xp.from_dlpack(r.contiguous() if isinstance(r, torch.Tensor) else np.ascontiguousarray(r))
    return lambda r: r.cpu().numpy() if isinstance(r, torch.Tensor) else r


def check_device_array(X: torch.Tensor, *, min_samples: int, contiguous: bool) -> None:
    """scikit-learn's shape checks for a device tensor, plus the kernels' needs (real dtype,
    C-contiguous rows when ``contiguous``), each a ValueError that names the problem."""
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got a {X.ndim}D {X.device} tensor of shape {tuple(X.shape)} instead")
    if X.is_complex():
        raise ValueError("Complex data not supported")
    if X.shape[0] < min_samples:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) (shape={tuple(X.shape)}) while a minimum of "
                         f"{min_samples} is required.")
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={tuple(X.shape)}) while a minimum of 1 is required.")
    if contiguous and not X.is_contiguous():
        raise ValueError(f"X is a non-contiguous {X.device} tensor (shape {tuple(X.shape)}, strides {X.stride()}): "
                         "the kernels read C-contiguous rows; pass X.contiguous() (a copy on the device)")


def upload(X: np.ndarray, device: torch.device, origin: np.ndarray | None = None,
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The host array X (minus ``origin`` (d,) when given, subtracted in X's dtype before the
    conversion) as one C-contiguous ``dtype`` tensor on ``device`` (float32: the float32 kernels'
    input; float64 for the fp64 kernels), copied once.

    On CUDA through :func:`turbo_gmm.streaming.device_chunks`: host threads fill two pinned
    buffers (dtype conversion included) while the previous chunk crosses the bus, and each
    chunk is placed in its rows of the result. On the CPU a view when X is already a
    writable C-contiguous array of that dtype."""
    if device.type != "cuda":
        x = X if origin is None else X - origin
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        return torch.from_numpy(np.require(x, np_dtype, ["C", "W"]))  # torch wants writable memory
    out = torch.empty(X.shape, dtype=dtype, device=device)
    rows = max(1, UPLOAD_CHUNK_BYTES // (out.element_size() * X.shape[1]))
    r0 = 0
    for chunk in device_chunks(X, rows, device, dtype, origin=origin):
        out[r0 : r0 + chunk.shape[0]].copy_(chunk)
        r0 += chunk.shape[0]
    return out
