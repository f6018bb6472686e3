"""Each library arm, on the CPU, against the float64 NumPy EM oracle (kernels/diag/reference.py).

Same X, same shared init, same number of iterations: the per-point log-likelihood
of the returned parameters (re-scored in float64) must agree within 1e-4 relative
and the parameters themselves within float32 tolerances that one missing EM
iteration would break (checked below, so the test can fail). The data are drawn
from fewer components than are fitted so that EM is still moving at the last
iteration. Step counts are checked by counting calls into each library's own
E-step and M-step. A test is skipped only when its library is not installed.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from turbo_gmm.records import Fit, to_numpy
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.diag import reference

REPO = Path(__file__).resolve().parents[2]
LIBRARY_ARMS = ["pytorch", "sklearn", "gmmx", "torchgmm", "pomegranate"]
N_ITER = 10
REG_COVAR = 1e-6
# (N, components the data are drawn from, components fitted, d)
SHAPES = [(1023, 2, 7, 5), (1023, 1, 3, 33)]
LL_RTOL = 1e-4
WEIGHTS_ATOL, MEANS_ATOL, VARIANCES_RTOL = 1e-4, 1e-3, 1e-3


def load_arm(name: str):
    arm = importlib.import_module(f"arms.{name}")
    reason = arm.available()
    if reason:
        pytest.skip(f"arms.{name} unavailable: {reason}")
    return arm


def problem_data(N, K_gen, K, d):
    X = make_dataset(N, K_gen, d, seed=0).X
    return X, shared_init(X, K, seed=0)


def param_mismatches(got, want, second_error=lambda v, v_ref: np.abs(v / v_ref - 1).max(),
                     second="variances") -> list[str]:
    """Which of (weights, means, variances) differ beyond the float32 tolerances; ``second_error`` and ``second``
    judge and name the third parameter (test_full_arms: covariance matrices)."""
    (w, m, v), (w_ref, m_ref, v_ref) = got, want
    out = []
    if np.abs(w - w_ref).max() > WEIGHTS_ATOL:
        out.append(f"weights off by {np.abs(w - w_ref).max():.2e}")
    if np.abs(m - m_ref).max() > MEANS_ATOL:
        out.append(f"means off by {np.abs(m - m_ref).max():.2e}")
    if second_error(v, v_ref) > VARIANCES_RTOL:
        out.append(f"{second} off by {second_error(v, v_ref):.2e} relative")
    return out


def check_against_reference(X, init, fit, reg_covar):
    got = tuple(to_numpy(a) for a in (fit.weights, fit.means, fit.variances))
    K, d = init.means.shape
    assert got[0].shape == (K,) and got[1].shape == (K, d) and got[2].shape == (K, d)
    want, _ = reference.em(X.numpy(), init.weights, init.means, init.variances, N_ITER, reg_covar)
    ll = reference.mean_log_likelihood(X.numpy(), *got)
    ll_ref = reference.mean_log_likelihood(X.numpy(), *want)
    assert abs(ll - ll_ref) <= LL_RTOL * abs(ll_ref), (ll, ll_ref)
    assert not param_mismatches(got, want)


def test_tolerances_detect_one_missing_iteration():
    """Guard: the parameter tolerances above are tight enough to see N_ITER - 1 iterations."""
    for N, K_gen, K, d in SHAPES:
        X, init = problem_data(N, K_gen, K, d)
        args = (X.numpy(), init.weights, init.means, init.variances)
        full, _ = reference.em(*args, N_ITER, REG_COVAR)
        short, _ = reference.em(*args, N_ITER - 1, REG_COVAR)
        assert param_mismatches(short, full), (N, K_gen, K, d)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "N{}_Kgen{}_K{}_d{}".format(*s))
@pytest.mark.parametrize("name", LIBRARY_ARMS)
def test_arm_matches_float64_reference(name, shape):
    arm = load_arm(name)
    X, init = problem_data(*shape)
    run = arm.prepare(X, init, N_ITER, {"reg_covar": REG_COVAR, "numerics": "fp32"})
    first, second = run(), run()
    assert first.n_iter in (None, N_ITER)
    reg = first.info.get("reg_covar", REG_COVAR)  # pomegranate cannot take a floor: it runs with 0
    check_against_reference(X, init, first, reg)
    # every call restarts from the init: a second call gives the same fit
    for a, b in zip((first.weights, first.means, first.variances), (second.weights, second.means, second.variances)):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-6, atol=1e-7)


def count_calls(monkeypatch, cls, method: str) -> list:
    calls = []
    original = getattr(cls, method)

    def counted(self, *args, **kwargs):
        calls.append(method)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, counted)
    return calls


def steps_per_fit(monkeypatch, name, estep_owner, estep, mstep_owner, mstep):
    arm = load_arm(name)
    X, init = problem_data(1023, 2, 7, 5)
    run = arm.prepare(X, init, N_ITER, {"reg_covar": REG_COVAR, "numerics": "fp32"})
    e_calls = count_calls(monkeypatch, estep_owner, estep)
    m_calls = count_calls(monkeypatch, mstep_owner, mstep)
    run()
    return len(e_calls), len(m_calls)


def test_sklearn_runs_one_extra_estep(monkeypatch):
    pytest.importorskip("sklearn")
    from sklearn.mixture import GaussianMixture

    steps = steps_per_fit(monkeypatch, "sklearn", GaussianMixture, "_e_step", GaussianMixture, "_m_step")
    assert steps == (N_ITER + 1, N_ITER)  # fit_predict's label E-step, documented in the arm


def test_torchgmm_runs_exactly_n_iter_steps(monkeypatch):
    pytest.importorskip("torchgmm")
    from torchgmm.bayes.gmm.lightning_module import GaussianMixtureLightningModule as M

    steps = steps_per_fit(monkeypatch, "torchgmm", M, "nonparametric_training_step", M, "nonparametric_training_epoch_end")
    assert steps == (N_ITER, N_ITER)


def test_pomegranate_runs_exactly_n_iter_steps(monkeypatch):
    pytest.importorskip("pomegranate")
    from pomegranate.gmm import GeneralMixtureModel as G

    assert steps_per_fit(monkeypatch, "pomegranate", G, "summarize", G, "from_summaries") == (N_ITER, N_ITER)


def test_gmmx_reports_its_early_stop_on_nan():
    """gmmx's loop exits on a NaN log-likelihood and calls it converged: the arm must
    pass gmmx's own count on, so the harness can reject the row."""
    arm = load_arm("gmmx")
    X, init = problem_data(1023, 2, 3, 5)
    means = init.means.copy()
    means[0] = 1e4  # component 0 gets no responsibility; with reg 0 its variance becomes 0
    init = type(init)(init.weights, means, init.variances)
    fit = arm.prepare(X, init, N_ITER, {"reg_covar": 0.0, "numerics": "fp32"})()
    assert fit.n_iter < N_ITER
    assert not np.isfinite(to_numpy(fit.variances)).all()


ARRAY_API_SCRIPT = """
import json, sys
import numpy as np
import torch
torch.backends.cuda.matmul.allow_tf32 = False
from arms import sklearn as arm
from turbo_gmm.records import to_numpy
from turbo_gmm.datasets import make_dataset, shared_init
N, K_gen, K, d, n_iter, reg, device, out = json.loads(sys.argv[1])
X = make_dataset(N, K_gen, d, seed=0, device=device).X
fit = arm.prepare(X, shared_init(X, K, seed=0), n_iter, {"reg_covar": reg, "numerics": "fp32", "array_api": True})()
assert isinstance(fit.means, torch.Tensor) and fit.means.device == X.device, fit.means
np.savez(out, weights=to_numpy(fit.weights), means=to_numpy(fit.means), variances=to_numpy(fit.variances))
print(json.dumps({"n_iter": fit.n_iter, "device": fit.info["device"]}))
"""


def sklearn_array_api_fit(tmp_path, shape, device):
    """Run the arm's array-API path in a fresh interpreter: SCIPY_ARRAY_API=1 only
    works when set before scipy's first import, which this test session may have done."""
    load_arm("sklearn")
    out = tmp_path / "fit.npz"
    env = dict(os.environ, SCIPY_ARRAY_API="1", PYTHONPATH=str(REPO))
    args = json.dumps([*shape, N_ITER, REG_COVAR, device, str(out)])
    proc = subprocess.run([sys.executable, "-c", ARRAY_API_SCRIPT, args],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"n_iter": N_ITER, "device": f"{device} (array API)"}
    f = np.load(out)
    return Fit(f["weights"], f["means"], f["variances"], n_iter=report["n_iter"])


def test_sklearn_array_api_path_on_cpu_torch(tmp_path):
    """The GPU code path (array-API dispatch with torch tensors), run on torch CPU tensors."""
    fit = sklearn_array_api_fit(tmp_path, SHAPES[0], "cpu")
    check_against_reference(*problem_data(*SHAPES[0]), fit, REG_COVAR)


# ---- on the GPU (the lead runs these on the H200: pytest -m gpu arms/tests/test_library_arms.py)
GPU_SHAPE = (20011, 2, 7, 33)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("name", ["pytorch", "gmmx", "torchgmm", "pomegranate"])
def test_gpu_arm_matches_float64_reference(name):
    torch.backends.cuda.matmul.allow_tf32 = False  # as the worker sets it
    arm = load_arm(name)
    X, init = problem_data(*GPU_SHAPE)
    fit = arm.prepare(X.cuda(), init, N_ITER, {"reg_covar": REG_COVAR, "numerics": "fp32"})()
    assert fit.n_iter in (None, N_ITER)
    assert "cpu" not in str(fit.info["device"]), fit.info
    check_against_reference(X, init, fit, fit.info.get("reg_covar", REG_COVAR))


@pytest.mark.gpu
@needs_cuda
def test_gpu_sklearn_array_api_matches_float64_reference(tmp_path):
    fit = sklearn_array_api_fit(tmp_path, GPU_SHAPE, "cuda")
    check_against_reference(*problem_data(*GPU_SHAPE), fit, REG_COVAR)
