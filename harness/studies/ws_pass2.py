"""Algorithm 3's pass 2: the Triton kernel against the warp-specialized one, on the same lift and normalizer.

    python -m harness.studies.ws_pass2 [SHAPE ...]     (Hopper GPU; default 1M_512_32 1M_1024_32 1M_4096_32)

For each shape the dispatch rule's launch config runs pass 2 with and without
``warp_specialized_pass2`` (kernels/diag/two_pass_ws.py), and the warp-specialized one also at
2 programs per SM: ms (best of 10 launches by CUDA events) and each one's worst
per-component error against float64 statistics (:func:`turbo_gmm.diag.estep.float64_statistics`)
of the first, a middle and the last component tile; one JSON line per shape.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from harness.studies.measure import parse_shape, time_ms
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.dispatch import launch_config
from turbo_gmm.diag.em import Workspace, data_center
from turbo_gmm.diag.lift_kernel import lift_into
from turbo_gmm.diag.two_pass import normalizer_pass, statistics_pass
from turbo_gmm.diag.estep import float64_statistics
from turbo_gmm.diag.two_pass_ws import D_PAD, statistics_pass_ws

DEFAULT_SHAPES = ["1M_512_32", "1M_1024_32", "1M_4096_32"]


def compare(name: str) -> dict:
    """Times and errors of the three pass-2 launches at one shape N_K_d (d_pad = 32, K >= 128)."""
    N, K, d = parse_shape(name)
    X = make_dataset(N, K, d, 0, "cuda").X
    init = shared_init(X, K, 0)
    ws = Workspace(X, K, "two_pass")
    ws.set_center(data_center(X, True))
    params = [torch.as_tensor(a, device="cuda").double() for a in (init.weights, init.means, init.variances)]
    cfg = launch_config("two_pass", K, d)
    lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.ll)
    comps = torch.cat([torch.arange(0, 64), torch.arange(K // 2, K // 2 + 64), torch.arange(K - 64, K)]).cuda()
    ref64 = float64_statistics(X, ws.center, ws.W, ws.b, K, ws.L, comps)
    n64, s64, u64, a64 = (ref64[k] for k in ("n", "s", "u", "s_scale"))
    row = {"shape": name, "programs_per_sm": cfg.programs_per_sm, "n_min": float(n64.min())}
    triton_cfg = dataclasses.replace(cfg, warp_specialized_pass2=0)
    runs = {"triton": lambda: statistics_pass(X, ws.center, ws.W, ws.b, K, triton_cfg, "tf32x3", ws.L, ws.n,
                                              ws.su),
            "ws": lambda: statistics_pass_ws(X, ws.center, ws.W, ws.b, K, cfg, ws.L, ws.n, ws.su),
            "ws_2_per_sm": lambda: statistics_pass_ws(X, ws.center, ws.W, ws.b, K,
                                                      dataclasses.replace(cfg, programs_per_sm=2), ws.L, ws.n, ws.su)}
    n_all = {}
    for label, run in runs.items():
        ws.n.zero_()
        ws.su.zero_()
        run()
        n, su = ws.n[:K].clone(), ws.su[:K].clone()
        n_all[label] = n
        row[f"{label}_nonfinite"] = int((~torch.isfinite(n)).sum() + (~torch.isfinite(su)).sum())
        row[f"{label}_n_err"] = float(((n[comps] - n64).abs() / n64).max())
        row[f"{label}_s_err"] = float(((su[comps, :d] - s64).abs() / a64).max())
        row[f"{label}_u_err"] = float(((su[comps, D_PAD : D_PAD + d] - u64).abs() / u64).max())
        row[f"{label}_ms"] = round(time_ms(run, 10), 4)
    row["ws_vs_triton_n_all"] = float(((n_all["ws"] - n_all["triton"]).abs() / n_all["triton"]).max())
    return row


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES, help="N_K_d with K/M suffixes (1M_512_32)")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a Hopper GPU (the warp-specialized kernel is sm_90 only)")
    for name in a.shapes:
        print(json.dumps(compare(name)), flush=True)


if __name__ == "__main__":
    main()
