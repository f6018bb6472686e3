"""Runtime loop bounds in Triton's CPU interpreter (kernels/_interpreter.py).

Without the patch, ``persistent_sum`` fails under TRITON_INTERPRET=1 with NumPy >= 2.4:
InterpreterError: TypeError('only 0-dimensional arrays can be converted to Python scalars');
NumPy 1.25 to 2.3 only warn, and the filter below makes that warning an error here.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from turbo_gmm import _interpreter as interpreter_compat
from turbo_gmm.tests.conftest import DEVICE

INTERPRETED = bool(triton.knobs.runtime.interpret)
pytestmark = pytest.mark.filterwarnings("error:Conversion of an array with ndim > 0:DeprecationWarning")


@triton.jit
def persistent_sum(X, out, N, n_tiles, num_programs, BLOCK: tl.constexpr):
    """Both loop shapes of our kernels: a grid-stride loop over row tiles with
    runtime bounds (one_pass, two_pass pass 2) and a loop to a runtime bound with
    a constexpr step (two_pass pass 1)."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(pid, n_tiles, num_programs):
        rows = tile * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(X + rows, mask=rows < N, other=0.0)
    for r0 in range(0, N, BLOCK * tl.num_programs(0)):
        acc += 0.0 * r0
    tl.atomic_add(out, tl.sum(acc, 0))


@pytest.mark.parametrize("N, programs", [(1, 1), (100, 3), (1000, 7)])
def test_runtime_range_bounds_run(N, programs):
    interpreter_compat.install()
    X = torch.arange(N, dtype=torch.float32, device=DEVICE)
    out = torch.zeros(1, dtype=torch.float32, device=DEVICE)
    block = 16
    persistent_sum[(programs,)](X, out, N, triton.cdiv(N, block), programs, BLOCK=block)
    assert out.item() == pytest.approx(N * (N - 1) / 2)


@pytest.mark.skipif(not INTERPRETED, reason="the patch only applies in Triton's interpreter")
def test_patch_is_installed_once_and_undone_after_each_launch():
    from triton.runtime import interpreter

    assert interpreter_compat.install() and interpreter_compat.install()
    patched = interpreter._patch_lang_tensor
    assert interpreter_compat.install() and interpreter._patch_lang_tensor is patched  # not wrapped twice
    before = tl.tensor.__dict__.get("__index__")
    persistent_sum[(2,)](torch.ones(20), torch.zeros(1), 20, 2, 2, BLOCK=16)
    assert tl.tensor.__dict__.get("__index__") is before


@pytest.mark.skipif(not INTERPRETED, reason="the patch only applies in Triton's interpreter")
def test_index_converts_one_element_arrays_and_refuses_blocks():
    from triton.runtime.interpreter import TensorHandle

    one = tl.tensor(TensorHandle(np.array([7], dtype=np.int32), tl.int32), tl.int32)
    assert interpreter_compat._index(one) == 7
    block = tl.tensor(TensorHandle(np.arange(4, dtype=np.int32), tl.int32), tl.block_type(tl.int32, [4]))
    with pytest.raises(TypeError):
        interpreter_compat._index(block)
