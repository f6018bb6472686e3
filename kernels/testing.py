"""Seeded test problems and one kernel E-step as float64 NumPy: what checking the kernels against a reference needs.

Shared by the kernel tests (kernels/tests) and the exactness battery
(harness/studies/exactness.py), which measure the same E-step against the same
references (kernels/reference.py), so both stand on this module rather than one on the other.
"""
from __future__ import annotations

import numpy as np
import torch

from kernels.datasets import make_dataset, shared_init
from kernels.em import Workspace, estep_statistics
from kernels.launch import LaunchConfig


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def problem(N, K, d, seed=0, device=None):
    """Seeded data and a perturbed shared init (so responsibilities are not trivial).
    K may exceed N: the components beyond N get random means."""
    device = device or default_device()
    Kd = min(K, N)
    X = make_dataset(N, Kd, d, seed, device).X
    init = shared_init(X, Kd, seed)
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 2.0, (K, d)).astype(np.float32)
    means[:Kd] = init.means
    var = (np.maximum(init.variances[0], 0.5) * rng.uniform(0.5, 2.0, (K, d))).astype(np.float32)
    w = rng.uniform(0.5, 1.5, K)
    return X, (w / w.sum()).astype(np.float32), means, var


def kernel_statistics(algorithm, X, weights, means, variances, precision, cfg=None):
    """(n, s, u, ell, (padded n, padded [s|u])) in float64 NumPy from one kernel
    E-step on uncentered X."""
    K, d = means.shape
    t = [torch.as_tensor(a, device=X.device) for a in (weights, means, variances)]
    ws = Workspace(X, K, algorithm)  # center zero: statistics of X itself
    n, su, ll = estep_statistics(X, *t, ws, algorithm, precision, cfg or LaunchConfig(block_n=32, block_k=16))
    n, su, d_pad = n.cpu().numpy(), su.cpu().numpy(), ws.d_pad
    return n[:K], su[:K, :d], su[:K, d_pad : d_pad + d], float(ll.cpu()[0]), (n[K:], su[K:])
