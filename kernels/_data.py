"""Data in and out (internal): torch tensors, DLPack and CUDA-array-interface arrays, host arrays; validation,
sample weights, and host arrays streamed to the device in chunks.

Device arrays (torch CUDA, CuPy, JAX) are read where they are (no copy) and results go back in the caller's
framework (:func:`output_like`); host arrays are validated by scikit-learn and copied once (:func:`upload`)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch.utils.dlpack import DLDeviceType

from ._column_sums import column_sums, non_finite_message
from ._interpreter import interpreter_mode
from .diag.precision import keep_column_extremes
from .dispatch import FP64

UPLOAD_CHUNK_BYTES = 64 << 20  # each of the two pinned buffers of an upload
DLPACK_CPU = 1  # DLDeviceType kDLCPU
FILL_THREADS = max(1, min(8, os.cpu_count() or 1))  # host threads filling a pinned buffer
MAX_UNCENTERED_OFFSET = 10.0  # |column mean| / column std allowed with center=False


def device_tensor(X):
    """X as a torch tensor when it is one (any device) or an array in device memory; None for host arrays, which
    take scikit-learn's validation."""
    if isinstance(X, torch.Tensor):
        return X.detach()
    if isinstance(X, np.ndarray):
        return None
    # DLPack first: torch.as_tensor on an array that also has __cuda_array_interface__ (a JAX CUDA array) goes
    # through its DLPack 1.x capsule, which torch 2.11 refuses as read-only
    if hasattr(X, "__dlpack__") and hasattr(X, "__dlpack_device__"):
        if int(X.__dlpack_device__()[0]) != DLPACK_CPU:
            return tensor_from_dlpack(X)
        return None
    if hasattr(X, "__cuda_array_interface__"):
        return torch.as_tensor(X, device="cuda")
    return None


def tensor_from_dlpack(X) -> torch.Tensor:
    """A torch tensor viewing the memory of the DLPack producer X (no copy): through the legacy capsule, since torch
    2.11 refuses a DLPack 1.x capsule flagged read-only (a JAX array's), on the consumer's stream."""
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
    """A function giving a result back in X's framework and on X's device (NumPy for host input)."""
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
    """The host array X (minus ``origin``, subtracted in X's dtype before the conversion) as one C-contiguous
    ``dtype`` tensor on ``device``: on CUDA through :func:`device_chunks` (pinned, double-buffered), on the CPU a
    view where X already is one."""
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


# ---------------------------------------------------------------- validation (the kernels' entry points)
def check_data(X: torch.Tensor, precision: str = "tf32x3") -> None:
    """Reject what the kernels cannot take, naming the problem. float64 X only under fp64: the other
    precisions compute in float32 and would round it."""
    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have shape (N, d) with N, d >= 1, got {tuple(X.shape)}")
    if X.dtype not in ((torch.float32, torch.float64) if precision == FP64 else (torch.float32,)):
        raise TypeError(f"X must be float32 (or float64 with precision='fp64'), got {X.dtype} with precision {precision!r}")
    if not X.is_contiguous():
        raise ValueError("X must be contiguous (call .contiguous())")
    want = "cpu" if interpreter_mode() else "cuda"
    if X.device.type != want:
        raise ValueError(f"X must be on {want} (TRITON_INTERPRET={int(interpreter_mode())}), got {X.device}")


def column_moments(X: torch.Tensor):
    """(mean, std) per column in float64 on X's device after checking every entry is finite: one read of X
    (:func:`turbo_gmm._column_sums.column_sums`) and one host sync; the extremes are kept for the lift's bound."""
    sums = column_sums(X)
    if not sums.finite():
        raise ValueError(non_finite_message(X))
    keep_column_extremes(X, (sums.low, sums.high))
    return sums.mean, sums.std


def data_center(X: torch.Tensor, center) -> torch.Tensor:
    """The in-kernel shift (float64, (d,)) after validating X: True the column mean; False zero (refused for data far
    from the origin, which the lift cannot score); a tensor as given."""
    if isinstance(center, torch.Tensor):
        return center.to(device=X.device, dtype=torch.float64)
    mean, std = column_moments(X)
    if center:
        return mean
    ratio = float((mean.abs() / std.clamp_min(1e-30)).max())
    if ratio > MAX_UNCENTERED_OFFSET:
        raise ValueError(
            f"X is far from the origin (max |mean|/std = {ratio:.3g} > {MAX_UNCENTERED_OFFSET}): the lifted score "
            "S = [X|X*X] W + b cancels terms of size |x|^2/V and loses about one digit per decade of offset; "
            "pass center=True (the default) or center X yourself")
    return torch.zeros_like(mean)


UNIT_MEAN_RTOL = 1e-6  # weights of X's dtype at mean 1 within this are taken as they are (float32 rounding: 6e-8)


def unit_mean_weights(w: torch.Tensor):
    """(w N / sum w, sum w / N) in float64: the weights at mean 1 and the scale back to the caller's units. Divided
    by the largest weight first, so neither 1e-300 nor 1e300 loses anything: the fit depends on the weights only up
    to their scale."""
    w = w.double()
    top = w.max()
    v = w / top
    total = v.sum()
    N = w.shape[0]
    return v * (N / total), float(top) * (float(total) / N)


def normalized_sample_weight(X: torch.Tensor, sample_weight):
    """(weights, scale): sample_weight checked as scikit-learn checks it, normalized to mean 1 in float64 and only
    then stored in X's dtype (1e-40 would leave float32's range first); ``scale`` = sum w / N. (None, 1.0) without
    weights; weights already of X's dtype, contiguous and at mean 1 are used as they are (a cached graph replays)."""
    if sample_weight is None:
        return None, 1.0
    if not isinstance(sample_weight, torch.Tensor):  # lists and arrays in float64 (torch would take a list as float32)
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
    w = torch.as_tensor(sample_weight, device=X.device)
    if w.ndim != 1 or w.shape[0] != X.shape[0]:
        raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {tuple(w.shape)}")
    if not w.is_floating_point():
        w = w.double()
    # one host read for the checks and the float64 sum, no float64 copy of weights that may be used as they are
    finite, negative, positive, total = torch.stack([torch.isfinite(w).all(), (w < 0).any(), (w > 0).any(),
                                                     w.sum(dtype=torch.float64)]).tolist()
    if not finite:
        raise ValueError("sample_weight has non-finite entries")
    if negative:
        raise ValueError("sample_weight must be >= 0")
    if not positive:
        raise ValueError("sample_weight must have at least one positive entry")
    N = X.shape[0]
    if w.dtype == X.dtype and w.is_contiguous() and abs(total - N) <= UNIT_MEAN_RTOL * N:
        return w, 1.0  # the caller's own units: nothing to give back
    unit, scale = unit_mean_weights(w)
    return unit.to(X.dtype).contiguous(), scale


def check_sample_weight(X: torch.Tensor, sample_weight):
    """sample_weight as an (N,) tensor of X's dtype on X's device at mean 1 (None stays None): the weights of
    :func:`normalized_sample_weight`."""
    return normalized_sample_weight(X, sample_weight)[0]


def total_weight(X: torch.Tensor, sample_weight) -> float:
    """The M-step's divisor of n_k: N, or the sum of the sample weights (one host read)."""
    return float(X.shape[0]) if sample_weight is None else float(sample_weight.double().sum())


# ---------------------------------------------------------------- host arrays streamed to the device
def chunk_bounds(N: int, rows: int) -> list[tuple[int, int]]:
    return [(r0, min(N, r0 + rows)) for r0 in range(0, N, rows)]


def device_chunks(X: np.ndarray, rows: int, device: torch.device, dtype: torch.dtype = torch.float32,
                  origin: np.ndarray | None = None):
    """Yield consecutive row blocks of the host array X (minus ``origin``) as contiguous ``dtype`` tensors on
    ``device``; a CUDA chunk is valid until the next is requested."""
    if device.type == "cuda":
        yield from _double_buffered(X, rows, device, dtype, origin)
        return
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        x = X[r0:r1] if origin is None else X[r0:r1] - origin
        yield torch.from_numpy(np.require(x, np_dtype, ["C", "W"]))  # torch wants writable memory


def _fill(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor, origin: np.ndarray | None = None) -> None:
    """dst[...] = src (- origin) in row slices on several threads: one thread's copy is slower than the bus."""
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


def host_column_mean(X: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """float64 column mean of a host array in chunks (no full-size float64 copy)."""
    s = np.zeros(X.shape[1], np.float64)
    for r0, r1 in chunk_bounds(X.shape[0], rows):
        s += X[r0:r1].sum(0, dtype=np.float64)
    return s / X.shape[0]


def checked_sample_weight(sample_weight, N, K):
    """sample_weight as float64 NumPy (N,) after scikit-learn's checks, with at least K positive, normalized to mean
    1 (:func:`unit_mean_weights`) before anything sees them: unit weights stay 1, scikit-learn's unweighted EM."""
    from sklearn.utils.validation import _check_sample_weight

    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    sw = _check_sample_weight(sample_weight, np.empty((N, 0)), dtype=np.float64, ensure_non_negative=True)
    if np.count_nonzero(sw) < K:
        raise ValueError(f"Expected n_samples with positive sample_weight >= n_components but got n_components = "
                         f"{K}, {np.count_nonzero(sw)} positive weights")
    return unit_mean_weights(torch.from_numpy(sw))[0].numpy()


def host_or_device(X):
    """(X, tensor): ``tensor`` is X on a device (read in place), None for a host array; a CPU tensor is a host array
    (its NumPy view)."""
    tensor = device_tensor(X)
    if tensor is not None and tensor.device.type == "cpu":
        X, tensor = tensor.resolve_conj().resolve_neg().numpy(), None
    return X, tensor


def training_input(estimator, X, tensor, *, min_samples: int, ensure_all_finite: bool = True):
    """A host X through scikit-learn's ``validate_data`` (float64 or float32), returned; a device array (``tensor``)
    checked in place, ``n_features_in_`` set from it and any ``feature_names_in_`` dropped, X returned as given."""
    from sklearn.utils.validation import validate_data

    if tensor is None:
        return validate_data(estimator, X, dtype=[np.float64, np.float32], ensure_min_samples=min_samples,
                             ensure_all_finite=ensure_all_finite)
    check_device_array(tensor, min_samples=min_samples, contiguous=True)
    estimator.n_features_in_ = tensor.shape[1]
    if hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_
    return X


def fitted_input(estimator, X):
    """(X, tensor, output) for a fitted estimator's predict-like method: a device array read in place (checked, its
    features against ``n_features_in_``; ``tensor`` is it), anything else through scikit-learn's ``validate_data``
    without reset (``tensor`` None); ``output`` puts results in X's framework (:func:`output_like`)."""
    from sklearn.utils.validation import check_is_fitted, validate_data

    check_is_fitted(estimator)
    output = output_like(X)
    X, tensor = host_or_device(X)
    if tensor is None:
        return validate_data(estimator, X, reset=False, dtype=[np.float64, np.float32]), None, output
    check_device_array(tensor, min_samples=1, contiguous=False)
    if tensor.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {tensor.shape[1]} features, but {type(estimator).__name__} is expecting "
                         f"{estimator.n_features_in_} features as input.")
    return tensor, tensor, output
