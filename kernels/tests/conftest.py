"""Shared fixtures: the device the kernels run on, a statistics runner (kernels/testing.py) and tolerances."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kernels.testing import kernel_statistics, problem  # noqa: F401 (shared with the exactness battery)

REPOSITORY = Path(__file__).resolve().parents[2]
ISOLATED_TIMEOUT_S = 600

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
PRECISIONS = ["ieee", "tf32x3"]
ALGORITHMS = ["one_pass", "two_pass"]


def assert_close_rel(got, want, rtol, what, scale=None):
    """max |got - want| <= rtol * scale; scale defaults to max |want|. Sums that
    cancel (s of centered data) pass the scale of their terms instead."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want).max() if scale is None else scale, 1e-300)
    err = np.abs(got - want).max() / scale
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    assert err <= rtol, f"{what}: max error {err:.3g} relative to {scale:.3g}, allowed {rtol:g}"


def assert_statistics_close(got, want, X, rtol):
    """(n, s, u) against a reference, each relative to the size of its terms:
    N for n, N*max|x| for s, N*max|x|^2 for u."""
    N, xmax = X.shape[0], float(np.abs(np.asarray(X)).max())
    for g, w, scale, what in zip(got, want, (N, N * xmax, N * xmax**2), "nsu"):
        assert_close_rel(g, w, rtol, what, scale)


@pytest.fixture(params=PRECISIONS)
def precision(request):
    return request.param


def run_isolated(source: str) -> str:
    """The stdout of Python ``source`` run in a child interpreter from the repository root, asserting it
    exits 0 (its stderr's tail in the message). For tests that may end in a CUDA device-side assert: an
    assert poisons its process's CUDA context, and on 2026-12-01 one failed every later test of the run."""
    done = subprocess.run([sys.executable, "-c", source], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=ISOLATED_TIMEOUT_S)
    assert done.returncode == 0, f"child exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout
