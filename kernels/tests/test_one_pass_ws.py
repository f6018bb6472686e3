"""The warp-specialized one-pass kernel (kernels/one_pass_ws.py) against float64 statistics of the same lift,
beside the Triton one-pass kernel (Hopper GPU only: Gluon has no interpreter), and what it refuses (CPU)."""
import numpy as np
import pytest
import torch

from kernels import reference as ref
from kernels.launch import LaunchConfig
from kernels.tests.conftest import problem

hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                            reason="Gluon's warpgroup MMA, TMA and setmaxnreg need a Hopper GPU (no interpreter)")


def _lifted_workspace(X, w, m, v):
    """A workspace holding the lift of (w, m, v) about X's column mean (the kernels' default center)."""
    from kernels.em import Workspace, data_center
    from kernels.lift_kernel import lift_into

    ws = Workspace(X, len(w), "one_pass")
    ws.set_center(data_center(X, True))
    lift_into(*[torch.as_tensor(a, device=X.device) for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    return ws


def _sweep(ws, run):
    ws.n.zero_()
    ws.su.zero_()
    ws.ll.zero_()
    run()
    return ws.n.clone(), ws.su.clone(), ws.ll.clone()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("running_sums", ["float32", "float64"])
@pytest.mark.parametrize("N,K,d", [(1023, 7, 32), (100_003, 33, 32), (5000, 100, 32), (64, 16, 32), (3001, 64, 28),
                                   (70, 128, 20), (600_000, 64, 32)],
                         ids=["1023x7", "100003x33", "5000x100", "one tile", "d=28", "70x128 d=20", "deep ring"])
def test_statistics_of_one_estep_are_as_exact_per_component_as_the_triton_kernels(N, K, d, running_sums):
    """n, s, u per component and ell against float64 statistics of the same lift, relative to each component's
    own size: within 2e-6, or within twice the Triton kernel's error where that is larger (the score's tf32x3
    rounding, which both kernels share, sets a floor). Irregular N: row tiles past N come in as TMA's zero fill;
    K_pad 16, 64 and 128 (one Gamma buffer shared by the two consumers); d < 32: columns past d zero-filled;
    "one tile": the second consumer has no tile and only passes the token; "deep ring": ~70 tiles per program."""
    from kernels.dispatch import launch_config
    from kernels.one_pass import one_pass_statistics
    from kernels.one_pass_ws import float64_statistics, one_pass_statistics_ws, per_component_errors

    X, w, m, v = problem(N, K, d, seed=1)
    ws = _lifted_workspace(X, w, m, v)
    reference = float64_statistics(X, ws.center, ws.W, ws.b, K)
    out = (ws.n, ws.su, ws.ll)
    triton_cfg = launch_config("one_pass", K, d)
    triton = per_component_errors(*_sweep(ws, lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, triton_cfg,
                                                                             "tf32x3", out=out)), reference)
    n, su, ll = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, running_sums=running_sums))
    got = per_component_errors(n, su, ll, reference)
    for key in ("n_err", "s_err", "u_err", "ll_err"):
        assert got[key] <= max(2 * triton[key], 2e-6), (key, got, triton)
    assert torch.all(n[K:] == 0) and torch.all(su[K:] == 0), "padded components must stay empty"
    assert float(n[:K].sum()) == pytest.approx(N, rel=1e-6)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("pingpong", [True, False], ids=["ping-pong", "free-running"])
def test_both_schedules_give_the_same_sums(pingpong):
    """The token only orders the consumers' products; each consumer's sums are the same either way (one
    float64 commit per consumer: equal up to the order of the atomics)."""
    from kernels.one_pass_ws import one_pass_statistics_ws

    X, w, m, v = problem(50_000, 40, 32, seed=4)
    ws = _lifted_workspace(X, w, m, v)
    out = (ws.n, ws.su, ws.ll)
    base = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, pingpong=True))
    other = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, pingpong=pingpong))
    for a, b in zip(base, other):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-9)


@pytest.mark.gpu
@hopper
def test_a_graph_captured_fit_follows_the_triton_kernels_fit():
    """kernels.fit through the LaunchConfig switch (10 iterations, graph-captured) against the same fit with the
    Triton one-pass kernel and against float64 EM: ell, variances and means no further from float64 EM than
    twice the Triton fit's distance (or 1e-6), and the two fits within 1e-5 of each other in ell per point."""
    import dataclasses

    import kernels
    from kernels.dispatch import launch_config

    X, w, m, v = problem(8000, 40, 32, seed=2)
    (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 10)
    fits, errors = [], []
    for switch in (0, 1):
        cfg = dataclasses.replace(launch_config("one_pass", 40, 32), warp_specialized_one_pass=switch)
        r = kernels.fit(X, (w, m, v), 10, algorithm="one_pass", config=cfg)
        fits.append(r)
        errors.append([float(np.max(np.abs(got.double().cpu().numpy() - want) / np.abs(want)))
                       for got, want in ((r.log_likelihoods, rlls), (r.variances, rv))]
                      + [float(np.max(np.abs(r.means.double().cpu().numpy() - rm)))])
    triton_errors, ws_errors = errors
    assert all(np.isfinite(ws_errors)), errors
    for triton_err, ws_err in zip(triton_errors, ws_errors):
        assert ws_err <= max(2 * triton_err, 1e-6), errors
    ell_gap = (fits[1].log_likelihoods - fits[0].log_likelihoods).abs().max() / X.shape[0]
    assert float(ell_gap) <= 1e-5, float(ell_gap)


@pytest.mark.parametrize("d,K,precision,why", [
    (33, 64, "tf32x3", "d_pad = 32 with d a multiple of 4"),
    (30, 64, "tf32x3", "d_pad = 32 with d a multiple of 4"),
    (16, 64, "tf32x3", "d_pad = 32 with d a multiple of 4"),
    (32, 200, "tf32x3", r"K_pad in \(16, 32, 64, 128\)"),
    (32, 64, "ieee", "tf32x3 only"),
    (32, 64, "tf32x3", "needs a Hopper GPU"),
], ids=["d_pad 64", "d not a multiple of 4", "d_pad 16", "K_pad 256", "ieee", "on the CPU"])
def test_what_the_ws_kernel_refuses_is_named(d, K, precision, why):
    from kernels.lift import pow2_at_least_16
    from kernels.one_pass_ws import one_pass_statistics_ws, refusal

    X = torch.zeros(10, d)
    W, b = torch.zeros(2 * pow2_at_least_16(d), pow2_at_least_16(K)), torch.zeros(pow2_at_least_16(K))
    assert refusal(X, W, precision) is not None
    if precision == "tf32x3":
        with pytest.raises(ValueError, match=why):
            one_pass_statistics_ws(X, torch.zeros(W.shape[0] // 2), W, b, None)
    else:
        assert why in refusal(X, W, precision)


def test_a_row_stride_tma_cannot_take_is_refused():
    """TMA needs rows 16-byte aligned: a view with a row stride of 33 floats is refused whatever its width."""
    from kernels.one_pass_ws import refusal

    X = torch.zeros(10, 33)[:, :32]
    assert "d a multiple of 4" in refusal(X, torch.zeros(64, 64))


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_where_the_ws_kernel_refuses_the_switch_falls_back_to_the_triton_kernel(precision):
    """ieee anywhere, tf32x3 off Hopper (the interpreter on the CPU) or at a d it refuses (d = 30 on a GPU):
    the Triton kernel runs, the same sums as with the switch off."""
    from kernels.one_pass import one_pass_statistics

    K, d = 40, 30 if torch.cuda.is_available() else 32
    X, w, m, v = problem(70, K, d)
    ws = _lifted_workspace(X, w, m, v)
    out = []
    for switch in (0, 1):
        cfg = LaunchConfig(block_n=32, num_warps=4, num_stages=1, warp_specialized_one_pass=switch)
        out.append(_sweep(ws, lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, precision,
                                                             out=(ws.n, ws.su, ws.ll))))
    assert out[0][0][:K].sum() > 0
    for off, on in zip(*out):  # float64 atomics: the same sums up to their order on a GPU
        torch.testing.assert_close(on, off, rtol=1e-12, atol=0)


def test_shared_memory_plan_fits_the_h200_at_every_k_pad():
    """Each consumer gets its own Gamma buffer where a ring of two stages still fits, one shared buffer at
    K_pad = 128; the plan leaves the compiler's scratch margin under the H200's per-program limit."""
    from kernels import one_pass_ws as ows

    plans = {k: ows.shared_plan(k) for k in ows.K_PADS}
    assert [p["GAMMA_BUFFERS"] for p in plans.values()] == [2, 2, 2, 1]
    for k, p in plans.items():
        assert ows.MIN_STAGES <= p["STAGES"] <= ows.MAX_STAGES
        assert ows.shared_bytes(k, p["GAMMA_BUFFERS"], p["STAGES"]) + ows.SCRATCH_MARGIN <= ows.SHARED_LIMIT
    assert ows.shared_bytes(128, 2, ows.MIN_STAGES) + ows.SCRATCH_MARGIN > ows.SHARED_LIMIT


def test_sm90_compile_has_the_schedule_it_claims():
    """Offline sm_90 compile (no GPU; a subprocess without the interpreter): per consumer and tile the score's
    24 HGMMA (six K = 32 products) and the statistics' 24 (three K = 64) under one wait each (4 WARPGROUP.DEPBAR
    for the two consumers), the consumers at 240 registers and the loader at 24 by setmaxnreg, no stack at
    K_pad <= 32, shared memory under the H200's limit, and float64 reductions for the commits."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from kernels.one_pass_ws import SHARED_LIMIT

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "kernels.one_pass_ws", "--resources", "--pingpong", "1",
                        "--running-sums", "float32"], cwd=Path(__file__).resolve().parents[2], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["K_pad"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert sorted(rows) == [16, 32, 64, 128]
    for k_pad, r in rows.items():
        assert "error" not in r, r
        assert r["sass"]["HGMMA"] == 96 and r["sass"]["WARPGROUP.DEPBAR"] == 4, r["sass"]
        assert ["dec", "24"] in r["setmaxnreg"] and ["inc", "240"] in r["setmaxnreg"], r["setmaxnreg"]
        assert r["shared_bytes"] <= SHARED_LIMIT and r["registers_at_launch"] <= 168
        assert any(op.startswith("REDG.E.ADD.F64") for op in r["sass"]), r["sass"]
        if k_pad <= 32:
            assert r["stack_bytes"] == 0, r
