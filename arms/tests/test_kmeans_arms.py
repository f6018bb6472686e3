"""Every k-means arm in conf/arm/ (``protocols: [kmeans]``) honours the contract of arms/kmeans.py.

For each: its module imports, ``available()`` returns None or a reason and never raises, and an arm that can run here
runs Lloyd from scikit-learn's k-means++ seeds on a tiny irregular shape, twice: (K, d) finite centers, the
iterations asked (or fewer at a fixed point), a float64 inertia within the gate's tolerance of the float64 Lloyd
reference from the same seeds, and the second call repeats the first (each starts from the seeds); its own fit
returns finite (K, d) centers with an inertia no worse than the seeds'. On this machine: ours in the Triton
interpreter (TRITON_INTERPRET=1, conftest.py) and scikit-learn; the GPU-only arms give their reason.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from gate.kmeans import INERTIA_TOL, inertia, lloyd_reference
from turbo_gmm.datasets import make_dataset
from turbo_gmm.records import to_numpy

CONF = Path(__file__).resolve().parents[2] / "conf"
KMEANS_ARM_FILES = sorted(p for p in (CONF / "arm").glob("*.yaml")
                          if "kmeans" in yaml.safe_load(p.read_text()).get("protocols", ()))
MEMORY_SOURCES = {"torch", "jax", "rss", "arm"}
N, COMPONENTS, K, D, N_ITER, SEED = 1023, 2, 7, 5, 4, 0
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_the_kmeans_arms_are_there():
    assert {p.stem for p in KMEANS_ARM_FILES} == {"kmeans_turbo_gmm", "kmeans_sklearn", "kmeans_flash_kmeans",
                                                   "kmeans_cuvs", "kmeans_faiss"}


@pytest.mark.parametrize("path", KMEANS_ARM_FILES, ids=lambda p: p.stem)
def test_kmeans_arm_contract(path):
    from sklearn.cluster import kmeans_plusplus

    cfg = yaml.safe_load(path.read_text())
    assert cfg["name"] == path.stem and set(cfg["kmeans"]) == {"warmups", "reps", "e2e_reps", "timeout_s"}
    arm = importlib.import_module(cfg["module"])
    assert getattr(arm, "MEMORY", None) in MEMORY_SOURCES
    assert callable(arm.prepare_lloyd) and callable(arm.prepare_fit)
    reason = arm.available()
    assert reason is None or (isinstance(reason, str) and reason.strip()), reason
    if reason:
        pytest.skip(f"{path.stem} unavailable here: {reason}")

    X = make_dataset(N, COMPONENTS, D, SEED, DEVICE).X
    X_host = X.cpu().numpy()
    _, rows = kmeans_plusplus(X_host, K, random_state=np.random.RandomState(SEED))
    seeds = X[torch.as_tensor(rows, device=X.device)]
    opts = dict(cfg.get("options") or {}, numerics=cfg["numerics"], seed=SEED)
    run = arm.prepare_lloyd(X, X_host, seeds.clone(), N_ITER, opts)
    first, second = run(), run()
    ref = lloyd_reference(X, seeds, N_ITER)
    for fit in (first, second):
        centers = to_numpy(fit.centers)
        assert centers.shape == (K, D) and np.isfinite(centers).all() and isinstance(fit.info, dict)
        assert fit.n_iter is None or 1 <= fit.n_iter <= N_ITER
        assert inertia(X, centers) <= ref.inertia * (1 + INERTIA_TOL)
    np.testing.assert_allclose(to_numpy(first.centers), to_numpy(second.centers), rtol=1e-5, atol=1e-5)
    own = arm.prepare_fit(X, X_host, K, opts)()
    centers = to_numpy(own.centers)
    assert centers.shape == (K, D) and np.isfinite(centers).all() and (own.n_iter is None or own.n_iter >= 1)
    assert inertia(X, centers) <= inertia(X, seeds)
