"""Every arm in conf/arm/ honours the contract of arms/__init__.py.

For each YAML: its module imports (or is reported missing as ImportError, which the
worker turns into ``unavailable: <reason>``), ``available()`` returns None or a
reason and never raises, and an arm that says it can run here runs prepare + call
on a tiny irregular shape, twice, with the options the worker would pass: the Fit
has the right shapes, finite values, positive variances, weights on the simplex (but for the rows
Flash-GMM as released counts twice, which its info records),
the requested iteration count when it reports one, a log-likelihood no worse than
the init's (EM ascends), and the second call repeats the first (each call restarts
from the init; for bf16 operands, which do not repeat past one iteration, two
one-iteration calls).
"""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from turbo_gmm.records import to_numpy
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.diag import reference

CONF = Path(__file__).resolve().parents[2] / "conf"
ARM_FILES = sorted((CONF / "arm").glob("*.yaml"))
NOT_WRITTEN_YET = {"turbo_gmm", "flash_gmm", "flash_gmm_bf16", "cuvs"}  # fused arms land in later issues
MEMORY_SOURCES = {"torch", "jax", "rss", "arm"}
N, K_GEN, K, D, N_ITER = 1023, 2, 7, 5, 3
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # where harness.worker puts X


def test_arm_configs_exist():
    assert ARM_FILES, f"no arm YAML files in {CONF / 'arm'}"


@pytest.mark.parametrize("path", ARM_FILES, ids=lambda p: p.stem)
def test_arm_contract(path):
    cfg = yaml.safe_load(path.read_text())
    assert cfg["name"] == path.stem, "an arm's name is its file name (one value in the CSV's arm column)"
    if importlib.util.find_spec(cfg["module"]) is None:
        if path.stem in NOT_WRITTEN_YET:
            pytest.skip(f"{cfg['module']}: module not written yet")
        pytest.fail(f"{path.name} names {cfg['module']}, which does not exist")
    if "kmeans" in cfg.get("protocols", ()):
        pytest.skip("a k-means arm: its contract is arms/kmeans.py's, tested in arms/tests/test_kmeans_arms.py")
    arm = importlib.import_module(cfg["module"])
    assert getattr(arm, "MEMORY", None) in MEMORY_SOURCES
    reason = arm.available()
    assert reason is None or (isinstance(reason, str) and reason.strip()), reason
    if reason:
        pytest.skip(f"{path.stem} unavailable here: {reason}")

    reg_covar = yaml.safe_load((CONF / "config.yaml").read_text())["reg_covar"]
    X = make_dataset(N, K_GEN, D, seed=0, device=DEVICE).X
    init = shared_init(X, K, seed=0)
    opts = dict(cfg.get("options") or {}, reg_covar=reg_covar, numerics=cfg["numerics"])
    run = arm.prepare(X, init, N_ITER, opts)
    first, second = run(), run()

    assert first.n_iter in (None, N_ITER)
    assert isinstance(first.info, dict)
    w, m, v = (to_numpy(a) for a in (first.weights, first.means, first.variances))
    assert m.shape == (K, D) and v.shape == (K, D)
    assert np.isfinite(m).all() and np.isfinite(v).all() and (v > 0).all()
    if w is None:
        w = init.weights  # an arm that does not return weights is scored with the init's
    else:
        assert w.shape == (K,) and np.isfinite(w).all() and (w >= 0).all()
        # Flash-GMM as released counts the rows past each pass-2 slab's end twice (arms/flash_gmm_bf16.py): its
        # weights sum to 1 + the rows its info records over N (on an H100 its autotuner's 128-row pass-2 tiles
        # overhang 64-row slabs here: 959 of 1023 rows), every other arm's to 1
        assert abs(w.sum() - 1.0 - first.info.get("double_counted_rows", 0) / N) <= 1e-4, (w.sum(), first.info)
    Xn = X.cpu().numpy()
    ll_init = reference.mean_log_likelihood(Xn, init.weights, init.means, init.variances)
    assert reference.mean_log_likelihood(Xn, w, m, v) >= ll_init
    if cfg["numerics"] == "bf16":
        # bf16 operands do not repeat past one iteration: the fp32 atomics' order moves the M-step's last bits
        # (1.7e-6 in the fp32 arm), which flip bf16 roundings of the next E-step's operands (H200 at eba613f,
        # 8 calls of flash_gmm_bf16 at N_ITER: means up to 0.037 apart). One iteration from the init has the
        # same bf16 operands in every call, so a call that restarts from the init repeats it.
        one = arm.prepare(X, init, 1, opts)
        first, second = one(), one()
    for a, b in zip((first.means, first.variances), (second.means, second.variances)):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-5, atol=1e-6)


def test_turbo_gmm_fp64_arm_runs_float64_em():
    """The fp64 arm (issue 20) is the turbo_gmm module at precision fp64: it says so in its fit's info, and
    its parameters are float64 EM's (kernels/diag/reference.py) to 1e-10, beyond what the float32 arm reaches."""
    cfg = yaml.safe_load((CONF / "arm" / "turbo_gmm_fp64.yaml").read_text())
    assert (cfg["module"], cfg["numerics"], cfg["options"]["precision"]) == ("arms.turbo_gmm", "fp64", "fp64")
    arm = importlib.import_module(cfg["module"])
    if reason := arm.available():
        pytest.skip(reason)
    X = make_dataset(N, K_GEN, D, seed=0, device=DEVICE).X
    init = shared_init(X, K, seed=0)
    fit = arm.prepare(X, init, N_ITER, dict(cfg["options"], reg_covar=1e-6, numerics=cfg["numerics"]))()
    assert fit.info["precision"] == "fp64"
    (w, m, v), _ = reference.em(X.cpu().numpy(), init.weights, init.means, init.variances, N_ITER)
    for got, want in zip((fit.weights, fit.means, fit.variances), (w, m, v)):
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
