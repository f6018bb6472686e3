"""Seeded test problems and one kernel E-step as float64 NumPy, for the kernel tests and the exactness
battery (harness/studies/exactness.py) alike."""
from __future__ import annotations

import numpy as np
import torch

from .datasets import make_dataset, shared_init
from .diag.em import Workspace, estep_statistics
from .launch import LaunchConfig


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
    ws = Workspace(X, K, algorithm, precision)  # center zero: statistics of X itself
    n, su, ll = estep_statistics(X, *t, ws, algorithm, precision, cfg or LaunchConfig(block_n=32, block_k=16))
    n, su, d_pad = n.cpu().numpy(), su.cpu().numpy(), ws.d_pad
    return n[:K], su[:K, :d], su[:K, d_pad : d_pad + d], float(ll.cpu()[0]), (n[K:], su[K:])


PER_TILE_SLICE_ROWS = 1 << 20  # Algorithm 3's per-tile reference in row slices: <= 32768 splits (gridDim.y <= 65535)


class LiftedStatistics:
    """One problem's lift (and Algorithm 3's normalizer) and its statistics by the kernel under any launch config.
    :meth:`per_tile` commits every row tile alone in float64 (same responsibilities, no accumulation across
    tiles); :attr:`float64` is ``diag.estep.float64_statistics`` of the same lift."""

    def __init__(self, X, params, center, algorithm: str, cfg: LaunchConfig):
        from .diag.estep import float64_statistics
        from .diag.lift_kernel import lift_into
        from .diag.two_pass import normalizer_pass

        self.X, self.algorithm, self.cfg = X, algorithm, cfg
        self.K = params[1].shape[0]
        self.ws = ws = Workspace(X, self.K, algorithm)
        ws.set_center(center)
        lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
        if algorithm == "two_pass":
            normalizer_pass(X, ws.center, ws.W, ws.b, self.K, cfg, "tf32x3", ws.L, ws.ll)
        self.float64 = float64_statistics(X, ws.center, ws.W, ws.b, self.K, ws.L)
        self._per_tile = {}  # per kernel config: computed by the first errors() that needs it

    def kernel(self, cfg: LaunchConfig | None = None, rows=slice(None)) -> str:
        """The statistics kernel ``cfg`` (default: this problem's) runs on the rows ``rows``
        (turbo_gmm.diag.em.statistics_kernel)."""
        from .diag.em import statistics_kernel

        return statistics_kernel(self.X[rows], self.ws, self.algorithm, "tf32x3", cfg or self.cfg)

    def __call__(self, cfg: LaunchConfig | None = None, rows=slice(None), clear: bool = True):
        """float64 n (K,), s, u (K, d) of the rows ``rows`` by the statistics kernel under ``cfg``."""
        from .diag.one_pass import one_pass_statistics
        from .diag.two_pass import statistics_pass

        cfg = cfg or self.cfg
        ws, K, d = self.ws, self.K, self.X.shape[1]
        if clear:
            ws.n.zero_()
            ws.su.zero_()
        if self.algorithm == "one_pass":
            one_pass_statistics(self.X[rows], ws.center, ws.W, ws.b, cfg, "tf32x3", out=(ws.n, ws.su, ws.ll))
        else:
            statistics_pass(self.X[rows], ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L[rows], ws.n, ws.su)
        return ws.n[:K].clone(), ws.su[:K, :d].clone(), ws.su[:K, ws.d_pad : ws.d_pad + d].clone()

    def per_tile(self, cfg: LaunchConfig | None = None):
        """n, s, u by the same kernel committing every row tile alone (``sum_tiles = 1``)."""
        import dataclasses

        cfg = dataclasses.replace(cfg or self.cfg, sum_tiles=1)
        if self.algorithm == "one_pass":
            return self(cfg)
        N = self.X.shape[0]
        for r0 in range(0, N, PER_TILE_SLICE_ROWS):
            out = self(cfg, slice(r0, min(N, r0 + PER_TILE_SLICE_ROWS)), clear=r0 == 0)
        return out

    def errors(self, got, cfg: LaunchConfig | None = None) -> dict:
        """Per-component errors of ``got`` = (n, s, u) against both references:
        {"per_tile": {n, s, u}, "float64": {n, s, u}}."""
        import dataclasses

        from .diag.estep import per_component_errors

        key = dataclasses.replace(cfg or self.cfg, sum_tiles=1)
        if key not in self._per_tile:
            self._per_tile[key] = dict(zip("nsu", self.per_tile(key)))
        return {"per_tile": per_component_errors(*got, {**self.float64, **self._per_tile[key]}),
                "float64": per_component_errors(*got, self.float64)}
