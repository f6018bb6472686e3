"""Triton 3.6's CPU interpreter on NumPy >= 2.4: runtime loop bounds.

The interpreter holds every scalar (kernel arguments, ``tl.program_id``,
``tl.num_programs``) as a one-element NumPy array of shape (1,), and makes a
loop such as ``for tile in range(pid, n_tiles, num_programs)`` work by patching
``tl.tensor.__index__`` to ``int(self.handle.data)``
(triton/runtime/interpreter.py:888, ``_patch_lang_tensor``). NumPy 1.25
deprecated int() of an array with ndim > 0 and NumPy 2.4 made it a TypeError
("only 0-dimensional arrays can be converted to Python scalars"), so every
kernel whose ``range`` has a runtime bound fails in the interpreter.

No way of writing the loop avoids it without changing the compiled kernel:
Python's ``range`` (and the interpreter's ``tl.range``) call ``__index__`` on any
tensor bound, and a ``while`` loop compiles to ``scf.while`` instead of
``scf.for`` (no software pipelining). Upstream fixed the line itself
(triton-lang/triton#9171, PR #9172: ``int(self.handle.data.squeeze())``);
:func:`install` applies that same line on top of ``_patch_lang_tensor`` until our
pinned Triton carries it. It touches only the interpreter's patching: compiled
(GPU) kernels never call ``_patch_lang_tensor``, and nothing is done unless
``TRITON_INTERPRET`` is on. With an interpreter that already converts correctly
the override is the identical conversion, so it is harmless there.
"""
from __future__ import annotations

import functools

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
