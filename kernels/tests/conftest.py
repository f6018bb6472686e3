"""Shared fixtures: the device the kernels run on, a statistics runner (kernels/testing.py) and tolerances."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from turbo_gmm.diag import reference as ref
from turbo_gmm.testing import kernel_statistics, problem  # noqa: F401 (shared with the exactness battery)

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


def per_component_scales(X, weights, means, variances):
    """Each component's own size (turbo_gmm.diag.estep.SCALES) from float64 responsibilities: n_k for n_k,
    sum_i Gamma_ik |x_i| for s_k (s cancels, its terms do not), u_k for u_k; floored at float64's
    smallest normal number times N (max|x|, max|x|^2), below which a responsibility has no relative digits."""
    X = np.asarray(X, np.float64)
    S = ref.log_prob(X, weights, means, variances)
    G = np.exp(S - ref.logsumexp_rows(S)[:, None])
    floor, xmax = X.shape[0] * np.finfo(np.float64).tiny, float(np.abs(X).max())
    return (np.maximum(G.sum(0), floor), np.maximum(G.T @ np.abs(X), floor * xmax),
            np.maximum(G.T @ (X * X), floor * xmax**2))


def assert_per_component_close(got, want, scales, rtol):
    """(n, s, u) against a reference, every entry relative to its component's :func:`per_component_scales`
    (where a scale is 0, only an exact match passes)."""
    for g, w, scale, what in zip(got, want, scales, "nsu"):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.isfinite(g).all(), f"{what}: non-finite values"
        diff = np.abs(g - w)
        with np.errstate(divide="ignore", invalid="ignore"):  # a scale of 0 (no mass, x = 0) allows only 0
            err = float(np.where(diff == 0, 0.0, diff / scale).max())
        assert err <= rtol, f"{what}: max per-component error {err:.3g}, allowed {rtol:g}"


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
