"""turbo_gmm._data: device arrays read where they are, through DLPack.

The GPU image's failure (torch 2.11 refusing the read-only flag of JAX's DLPack 1.x capsules,
2026-12-01) is reproduced on CPU: a producer that honours the protocol (a read-only versioned
capsule when the consumer allows DLPack 1.x, the legacy capsule otherwise) and torch's import
refusing a capsule whose DLManagedTensorVersioned flags say read-only, as 2.11 does (this
machine's torch accepts it)."""
import ctypes

import numpy as np
import pytest
import torch

from turbo_gmm._data import tensor_from_dlpack

VERSIONED = b"dltensor_versioned"
READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
FLAGS_OFFSET = 24  # DLManagedTensorVersioned: version (2 x uint32), manager_ctx, deleter, then uint64 flags

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _read_only(capsule) -> bool:
    """Whether a DLPack capsule is a versioned one flagged read-only."""
    if _get_name(capsule) != VERSIONED:
        return False
    return bool(ctypes.c_uint64.from_address(_get_pointer(capsule, VERSIONED) + FLAGS_OFFSET).value & READ_ONLY)


class ReadOnlyProducer:
    """An immutable array's DLPack export, as JAX's: DLPack 1.x capsules flagged read-only, legacy ones
    (no flags) of the same memory when the consumer asks without ``max_version``."""

    def __init__(self, array: np.ndarray):
        self.array, self.requests = array, []
        self.view = array.view()
        self.view.flags.writeable = False

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.requests.append(max_version)
        if max_version is not None and max_version >= (1, 0):
            return self.view.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)
        return self.array.__dlpack__(stream=stream)


@pytest.fixture
def torch_refusing_read_only(monkeypatch):
    """torch 2.11's import: a TypeError for a read-only versioned capsule."""
    real = torch._C._from_dlpack

    def refuse(capsule):
        if _read_only(capsule):
            raise TypeError("the read only flag is not supported, should always be False")
        return real(capsule)
    monkeypatch.setattr(torch._C, "_from_dlpack", refuse)


def _producer():
    return ReadOnlyProducer(np.arange(12, dtype=np.float32).reshape(4, 3))


def test_the_producer_exports_read_only_versioned_capsules():
    """The fixture's premise: a DLPack 1.x request gets the read-only flag, a legacy one none."""
    p = _producer()
    assert _read_only(p.__dlpack__(max_version=(1, 0))) and not _read_only(p.__dlpack__())


def test_read_only_dlpack_is_viewed_without_a_copy(torch_refusing_read_only):
    """Where torch refuses the read-only capsule (the GPU image's TypeError), the legacy capsule of the
    same memory is taken: a view of the producer's buffer, not a copy."""
    p = _producer()
    with pytest.raises(TypeError, match="read only"):
        torch.from_dlpack(p)
    t = tensor_from_dlpack(p)
    assert t.data_ptr() == p.array.ctypes.data and t.dtype == torch.float32
    np.testing.assert_array_equal(t.numpy(), p.array)
    assert p.requests[-1] is None and (1, 0) <= p.requests[0]  # DLPack 1.x first, then the legacy capsule


def test_dlpack_that_torch_accepts_is_torchs_own_import():
    p = _producer()
    t = tensor_from_dlpack(p)
    assert t.data_ptr() == p.array.ctypes.data
    np.testing.assert_array_equal(t.numpy(), p.array)


def test_jax_arrays_are_viewed_without_a_copy(torch_refusing_read_only):
    """A JAX array (on this machine's CPU backend; on the GPU image a CUDA one, read the same way)."""
    jnp = pytest.importorskip("jax.numpy")
    X = jnp.arange(12.0, dtype=jnp.float32).reshape(4, 3)
    t = tensor_from_dlpack(X)
    assert t.data_ptr() == X.unsafe_buffer_pointer()
    np.testing.assert_array_equal(t.cpu().numpy(), np.asarray(X))
