"""IBM's Flash-GMM diagonal E-step kernel exactly as released (bf16 dot operands).

Their ``flash_gmm_diag_h100.py`` imported unchanged from the checkout (``make
baselines``, or ``options.src``), driven by the same loop, M-step and autotune
handling as :mod:`arms.flash_gmm`. As released it casts every ``tl.dot`` operand
to bf16 and counts the rows past each pass-2 slab's end twice, so its weights sum
to 1 + overlap/N > 1 at every shape and the gate rejects it: that is the result
this arm exists to record (README, "Flash-GMM"). Full covariances: their
``flash_gmm_full_h100.py`` as released (bf16 operands), the same M-step as :mod:`arms.flash_gmm`'s.
"""
from __future__ import annotations

from typing import Mapping

import torch

from turbo_gmm.records import Init
from arms.flash_gmm import (COVARIANCE_TYPES, MEMORY, RELEASED, check_available,  # noqa: F401  (the contract)
                            prepare_variant)


def available(opts: Mapping | None = None) -> str | None:
    return check_available(opts)


def prepare(X: torch.Tensor, init: Init, n_iter: int, opts: dict):
    return prepare_variant(X, init, n_iter, opts, RELEASED)
