"""Exactness battery (paper §4): both algorithms at both precisions against two references.

    python -m kernels.exactness --out results/<device>/exactness.csv [--quick]

1. a 60-digit mpmath evaluation of (1)-(4) from the centered score (2) on small
   cases: K = 1, K > N, a single row, tiles that N and K do not fill;
2. the float64 materializing oracle (kernels/reference.py) swept over larger
   shapes and several tilings (rows per tile, components per tile, programs).

One CSV row per (algorithm, precision, shape, tiling, reference) with the max
relative error of n, s, u and ell. Errors of n, s, u are relative to the size of
their terms (N, N max|x|, N max|x|^2), as the kernel tests measure them, since s
of centered data cancels towards 0; ell is relative to |ell|. A configuration the
compiler refuses is a row with its status, not a crash. On a CPU the kernels run
in the Triton interpreter (TRITON_INTERPRET=1). The kernel tests import the
helpers below (problem, kernel_statistics, mp_estep).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import mpmath
import numpy as np
import torch

from harness.data import make_dataset, shared_init
from kernels import reference as ref
from kernels.dispatch import launch_config
from kernels.em import Workspace, estep_statistics
from kernels.launch import LaunchConfig

ALGORITHMS = ("one_pass", "two_pass")
PRECISIONS = ("ieee", "tf32x3")
MP_DIGITS = 60
MP_CASES = [(37, 1, 3), (6, 9, 2), (1, 3, 4), (41, 3, 5), (33, 17, 5)]  # K=1, K>N, one row, partial tiles
ORACLE_CASES = [(1023, 7, 5), (10_007, 37, 33), (100_003, 64, 32), (100_003, 200, 24), (200_003, 16, 128)]
ORACLE_TILINGS = [None, LaunchConfig(block_n=16, block_k=16, programs_per_sm=1),
                  LaunchConfig(block_n=32, block_k=32, programs_per_sm=4)]
MP_TILING = LaunchConfig(block_n=32, block_k=16)  # partial row tiles at N = 33..41, two component tiles at K = 17
QUICK_MP_CASES = [(6, 9, 2), (13, 1, 3)]
QUICK_ORACLE_CASES = [(203, 17, 5)]
QUICK_TILINGS = [LaunchConfig(block_n=16, block_k=16, programs_per_sm=1)]
COLUMNS = ["algorithm", "precision", "N", "K", "d", "tiling", "reference", "status", "max_rel_err_n",
           "max_rel_err_s", "max_rel_err_u", "max_rel_err_ll", "device", "versions", "git_commit", "timestamp"]


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


def mp_estep(X, w, m, v, digits: int = MP_DIGITS):
    """Statistics (n, s, u, ell) in `digits`-digit arithmetic from the centered score (2)."""
    with mpmath.workdps(digits):
        N, d = X.shape
        K = len(w)
        n = [mpmath.mpf(0)] * K
        s = [[mpmath.mpf(0)] * d for _ in range(K)]
        u = [[mpmath.mpf(0)] * d for _ in range(K)]
        ll = mpmath.mpf(0)
        mm = [[mpmath.mpf(float(m[k, c])) for c in range(d)] for k in range(K)]
        vv = [[mpmath.mpf(float(v[k, c])) for c in range(d)] for k in range(K)]
        const = [mpmath.log(mpmath.mpf(float(w[k]))) - d * mpmath.log(2 * mpmath.pi) / 2
                 - sum(mpmath.log(t) for t in vv[k]) / 2 for k in range(K)]
        for i in range(N):
            x = [mpmath.mpf(float(t)) for t in X[i]]
            S = [const[k] - sum((x[c] - mm[k][c]) ** 2 / vv[k][c] for c in range(d)) / 2 for k in range(K)]
            L = mpmath.log(sum(mpmath.exp(t) for t in S))
            ll += L
            for k in range(K):
                g = mpmath.exp(S[k] - L)
                n[k] += g
                for c in range(d):
                    s[k][c] += g * x[c]
                    u[k][c] += g * x[c] ** 2
        f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731
        return (f([float(t) for t in n]), f([[float(t) for t in r] for r in s]),
                f([[float(t) for t in r] for r in u]), float(ll))


def relative_errors(got, want, X: np.ndarray) -> dict:
    """Max relative error of n, s, u (to the size of their terms) and ell (to |ell|)."""
    N, xmax = X.shape[0], float(np.abs(X).max())
    out = {}
    for name, g, w, scale in zip("nsu", got[:3], want[:3], (N, N * xmax, N * xmax**2)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        out[f"max_rel_err_{name}"] = float(np.abs(g - w).max() / max(scale, 1e-300)) if np.isfinite(g).all() else float("inf")
    out["max_rel_err_ll"] = abs(got[3] - want[3]) / max(abs(want[3]), 1e-300)
    return out


def tiling_text(cfg: LaunchConfig) -> str:
    text = f"block_n={cfg.block_n};block_k={cfg.block_k};programs_per_sm={cfg.programs_per_sm};warps={cfg.num_warps};stages={cfg.num_stages}"
    return (text + (";warp_specialized_pass2=1" if cfg.warp_specialized_pass2 else "")
            + (";warp_specialized_one_pass=1" if cfg.warp_specialized_one_pass else ""))


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"


def battery(mp_cases, oracle_cases, tilings, device=None, progress=print):
    """Rows of the battery (dicts with COLUMNS, minus the provenance columns)."""
    device = device or default_device()
    jobs = [(case, "mpmath-60", [MP_TILING]) for case in mp_cases]
    jobs += [(case, "float64-oracle", tilings) for case in oracle_cases]
    rows = []
    for (N, K, d), reference, cfgs in jobs:
        X, w, m, v = problem(N, K, d, seed=7, device=device)
        Xn = X.cpu().numpy()
        want = mp_estep(Xn, w, m, v) if reference == "mpmath-60" else ref.estep(Xn, w, m, v)
        for algorithm in ALGORITHMS:
            for cfg0 in cfgs:
                cfg = cfg0 or launch_config(algorithm, K, d)
                for precision in PRECISIONS:
                    row = {"algorithm": algorithm, "precision": precision, "N": N, "K": K, "d": d,
                           "tiling": ("measured:" if cfg0 is None else "") + tiling_text(cfg), "reference": reference}
                    try:
                        got = kernel_statistics(algorithm, X, w, m, v, precision, cfg)
                        row.update(status="ok", **relative_errors(got, want, Xn))
                    except Exception as e:  # a refused launch (OutOfResources) is a result, not a crash
                        row["status"] = f"fail ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
                    progress(" ".join(f"{k}={row.get(k)}" for k in ("algorithm", "precision", "N", "K", "d", "reference",
                                                                      "status", "max_rel_err_u", "max_rel_err_ll")))
                    rows.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def write_csv(rows, out: Path, device: torch.device) -> Path:
    from harness import env

    import triton

    versions = json.dumps({"torch": torch.__version__, "triton": triton.__version__, "numpy": np.__version__,
                           "mpmath": mpmath.__version__}, sort_keys=True)
    prov = {"device": device_name(device), "versions": versions, "git_commit": env.git_commit(),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, COLUMNS)
        wr.writeheader()
        for r in rows:
            wr.writerow({c: r.get(c, prov.get(c, "")) for c in COLUMNS})
    tmp.replace(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="tiny cases only (CPU interpreter, CI)")
    a = ap.parse_args(argv)
    if a.quick:
        rows = battery(QUICK_MP_CASES, QUICK_ORACLE_CASES, QUICK_TILINGS)
    else:
        rows = battery(MP_CASES, ORACLE_CASES, ORACLE_TILINGS)
    print(write_csv(rows, a.out, default_device()))
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"{len(rows)} configurations, {len(bad)} not launched", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
