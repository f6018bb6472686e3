"""Triton 3.6's CPU interpreter on NumPy >= 2.4: runtime loop bounds (internal).

The interpreter holds scalars as shape-(1,) NumPy arrays and patches ``tl.tensor.__index__`` to
``int(self.handle.data)``, which NumPy 2.4 rejects, so every kernel whose ``range`` has a runtime bound
fails. :func:`install` applies upstream's fix (triton-lang/triton#9172, ``int(...squeeze())``) to the
interpreter's patching only; compiled kernels are untouched, and an interpreter that converts correctly
gets the identical conversion."""
from __future__ import annotations

import functools
import os

_MARK = "_turbo_gmm_index_fix"


def _index(self) -> int:
    # squeeze() makes the (1,) array 0-d, which int() accepts on every NumPy;
    # a block tensor (size > 1) still raises TypeError, as before.
    return int(self.handle.data.squeeze())


def install() -> bool:
    """Patch the interpreter's ``tl.tensor.__index__`` when kernels run in the
    interpreter. Idempotent; True when the patch is in place."""
    import triton

    if not triton.knobs.runtime.interpret:
        return False
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:  # a Triton whose interpreter no longer has this hook
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        # recorded in the same scope, so it is undone (before the original's) after each launch
        scope.set_attr(tensor, "__index__", _index)

    setattr(patch_lang_tensor, _MARK, True)
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def interpreter_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"
