"""The warp-specialized pass 2 against the float64 oracle, beside the Triton pass 2 (Hopper GPU only:
Gluon has no interpreter), and what it refuses."""
import pytest
import torch

from turbo_gmm.diag import reference as ref
from turbo_gmm.launch import LaunchConfig
from turbo_gmm.tests.conftest import assert_statistics_close, problem

hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                            reason="Gluon's warpgroup MMA and TMA need a Hopper GPU (Gluon has no interpreter)")


@hopper
@pytest.mark.parametrize("block_k", [64, 32])
@pytest.mark.parametrize("N,K,d", [(1023, 64, 32), (5000, 200, 32), (64, 128, 28), (70, 512, 32), (3001, 96, 20)])
def test_ws_pass_two_matches_the_float64_oracle_as_the_triton_pass_does(N, K, d, block_k):
    """Row tiles past N and columns past d come in as TMA's zero fill; several row tiles per program
    (programs_per_sm=1) take the ring through more than one phase."""
    from turbo_gmm.diag.em import Workspace
    from turbo_gmm.diag.lift_kernel import lift_into
    from turbo_gmm.diag.two_pass import normalizer_pass, statistics_pass
    from turbo_gmm.diag.two_pass_ws import statistics_pass_ws

    X, w, m, v = problem(N, K, d)
    ws = Workspace(X, K, "two_pass")  # center zero: the statistics of X itself, as ref.estep
    params = [torch.as_tensor(a, device="cuda") for a in (w, m, v)]
    cfg = LaunchConfig(block_k=block_k, programs_per_sm=1)
    want = ref.estep(X.cpu().numpy(), w, m, v)[:3]
    for run in (statistics_pass, statistics_pass_ws):
        lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
        normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.ll)
        if run is statistics_pass:
            run(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.n, ws.su)
        else:
            run(X, ws.center, ws.W, ws.b, K, cfg, ws.L, ws.n, ws.su)
        n, su = ws.n[:K].cpu().numpy(), ws.su[:K].cpu().numpy()
        assert_statistics_close((n, su[:, :d], su[:, 32 : 32 + d]), want, X.cpu().numpy(), 2e-5)


@hopper
@pytest.mark.parametrize("N,programs_per_sm", [(2000, 2), (300_000, 0.05)], ids=["one tile per program", "deep ring"])
def test_ws_pass_two_is_as_exact_per_component_as_the_triton_pass(N, programs_per_sm):
    """Data far from the origin, centered in the kernel; each component's n, s, u against float64 statistics of
    the same lift and normalizer, relative to that component's own size (the battery's scale, N, hides small
    components). "deep ring": ~7 programs per component tile, each taking its ring through ~700 row tiles."""
    from turbo_gmm.diag.em import Workspace, data_center
    from turbo_gmm.diag.lift_kernel import lift_into
    from turbo_gmm.diag.two_pass import normalizer_pass, statistics_pass
    from turbo_gmm.diag.estep import float64_statistics
    from turbo_gmm.diag.two_pass_ws import statistics_pass_ws

    K = 80
    X, w, m, v = problem(N, K, 32)
    X, m = X + 50.0, m + 50.0
    ws = Workspace(X, K, "two_pass")
    ws.set_center(data_center(X, True))
    lift_into(*[torch.as_tensor(a, device="cuda") for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    cfg = LaunchConfig(block_k=64, programs_per_sm=programs_per_sm)
    normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.ll)
    ref64 = float64_statistics(X, ws.center, ws.W, ws.b, K, ws.L)
    n64, s64, u64, a64 = (ref64[k] for k in ("n", "s", "u", "s_scale"))
    errors = {}
    for run in (statistics_pass, statistics_pass_ws):
        ws.n.zero_()
        ws.su.zero_()
        if run is statistics_pass:
            run(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.n, ws.su)
        else:
            run(X, ws.center, ws.W, ws.b, K, cfg, ws.L, ws.n, ws.su)
        n, su = ws.n[:K], ws.su[:K]
        errors[run.__name__] = [float(e.max()) for e in ((n - n64).abs() / n64, (su[:, :32] - s64).abs() / a64,
                                                         (su[:, 32:] - u64).abs() / u64)]
    for triton_err, ws_err in zip(errors["statistics_pass"], errors["statistics_pass_ws"]):
        assert ws_err <= max(2 * triton_err, 2e-5), errors


@hopper
def test_weighted_ws_pass_two_is_the_triton_pass_and_integer_weights_repeat_rows():
    """Sample weights in {0, 1, 2, 3} (pass 1 and its normalizer unchanged: L is per row): the warp-specialized
    pass 2's n and [s | u] are the Triton pass 2's weighted ones, and the unweighted pass 2's on X with each row
    repeated that many times (its L repeated alike), to float32 rounding."""
    from turbo_gmm.diag.em import Workspace, data_center
    from turbo_gmm.diag.lift_kernel import lift_into
    from turbo_gmm.diag.two_pass import normalizer_pass, statistics_pass
    from turbo_gmm.diag.two_pass_ws import statistics_pass_ws

    N, K = 50_003, 300
    X, w, m, v = problem(N, K, 32, seed=7)
    counts = torch.randint(0, 4, (N,), generator=torch.Generator().manual_seed(1)).to(X.device)
    weights = counts.float()
    ws = Workspace(X, K, "two_pass")
    ws.set_center(data_center(X, True))
    lift_into(*[torch.as_tensor(a, device="cuda") for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    cfg = LaunchConfig(block_k=64, programs_per_sm=2)
    normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L, ws.ll)

    def pass_two(run, rows, L, sample_weight=None):
        ws.n.zero_()
        ws.su.zero_()
        if run is statistics_pass:
            run(rows, ws.center, ws.W, ws.b, K, cfg, "tf32x3", L, ws.n, ws.su, sample_weight)
        else:
            run(rows, ws.center, ws.W, ws.b, K, cfg, L, ws.n, ws.su, sample_weight)
        return ws.n.clone(), ws.su.clone()

    got = pass_two(statistics_pass_ws, X, ws.L, weights)
    triton = pass_two(statistics_pass, X, ws.L, weights)
    repeated = pass_two(statistics_pass_ws, X.repeat_interleave(counts, dim=0).contiguous(),
                        ws.L[:N].repeat_interleave(counts).contiguous())
    for want in (triton, repeated):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * float(b.abs().max()))


@pytest.mark.parametrize("d,block_k,why", [(33, 64, "d_pad = 32 with d a multiple of 4"),
                                            (30, 64, "d_pad = 32 with d a multiple of 4"),
                                            (32, 16, "d_pad = 32 with d a multiple of 4"),
                                            (32, 64, "needs a Hopper GPU")],
                         ids=["d_pad 64", "d not a multiple of 4", "16 components", "on the CPU"])
def test_what_the_ws_pass_two_refuses_is_named(d, block_k, why):
    from turbo_gmm.diag.two_pass_ws import statistics_pass_ws

    d_pad = 32 if d <= 32 else 64
    X = torch.zeros(10, d)
    W, b = torch.zeros(2 * d_pad, 64), torch.zeros(64)
    with pytest.raises(ValueError, match=why):
        statistics_pass_ws(X, torch.zeros(d_pad), W, b, 64, LaunchConfig(block_k=block_k), None, None, None)


@hopper
def test_a_fit_with_the_ws_pass_two_follows_float64_em_as_closely_as_the_triton_pass():
    """The launch-config switch through turbo_gmm.fit (graph-captured), two component tiles: ell, variances
    and means after 4 iterations against the float64 oracle, no further off than the same fit with the
    Triton pass 2. (At 160 components on 3000 rows both fits were ~3e-4 off in ell by the 4th iteration and
    the variances of near-empty components 11x off: EM amplifies tf32x3's rounding there, so this problem
    keeps ~200 rows per component.)"""
    import numpy as np

    import turbo_gmm

    X, w, m, v = problem(8000, 40, 32, seed=2)
    (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 4)
    errors = []
    for switch in (0, 1):
        cfg = LaunchConfig(block_k=32, programs_per_sm=2, warp_specialized_pass2=switch)
        r = turbo_gmm.fit(X, (w, m, v), 4, algorithm="two_pass", config=cfg)
        errors.append([float(np.max(np.abs(got.double().cpu().numpy() - want) / np.abs(want)))
                       for got, want in ((r.log_likelihoods, rlls), (r.variances, rv))]
                      + [float(np.max(np.abs(r.means.double().cpu().numpy() - rm)))])
    triton_errors, ws_errors = errors
    assert ws_errors[0] <= 1e-5 and all(np.isfinite(ws_errors)), errors
    for triton_err, ws_err in zip(triton_errors, ws_errors):
        assert ws_err <= max(2 * triton_err, 1e-6), errors


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_where_the_ws_pass_two_refuses_the_switch_falls_back_to_the_triton_pass(precision):
    """ieee anywhere, tf32x3 off Hopper (here: the interpreter on the CPU, or a d the kernel refuses): the
    Triton pass 2, the same sums as with the switch off."""
    from turbo_gmm.diag.em import Workspace
    from turbo_gmm.diag.lift_kernel import lift_into
    from turbo_gmm.diag.two_pass import normalizer_pass, statistics_pass

    K, d = 40, 30 if torch.cuda.is_available() and precision == "tf32x3" else 32
    X, w, m, v = problem(70, K, d)
    ws = Workspace(X, K, "two_pass")
    lift_into(*[torch.as_tensor(a, device=X.device) for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    out = []
    for switch in (0, 1):
        cfg = LaunchConfig(block_k=32, warp_specialized_pass2=switch)
        normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, precision, ws.L, ws.ll)
        ws.n.zero_()
        ws.su.zero_()
        statistics_pass(X, ws.center, ws.W, ws.b, K, cfg, precision, ws.L, ws.n, ws.su)
        out.append((ws.n.clone(), ws.su.clone()))
    assert ws.n[:K].sum() > 0
    for off, on in zip(*out):  # float64 atomics: the same sums up to their order on a GPU
        torch.testing.assert_close(on, off, rtol=1e-12, atol=0)


def test_the_statistics_lanes_are_a_bank_conflict_free_permutation_of_the_columns():
    """Both warp-specialized kernels load the statistics' A operand through transposed_lift: per Triton's own bank
    model (gl.bank_conflicts) the plain transpose conflicts (1 excess access a wavefront: the H200 counted 128
    excess wavefronts a row tile) and the view does not, and lane m of each copy holds column
    m % 4 + 16 (m // 4 % 2) + 4 (m // 8), as lane_columns says. Compiled for sm_90 in a child without the
    interpreter (Gluon has none); nothing runs."""
    import ast
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_ALWAYS_COMPILE": "1"}
    p = subprocess.run([sys.executable, "-m", "turbo_gmm.tests.ring_view_probe"], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2], env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert re.search(r"conflicts 1 0\b", p.stdout), p.stdout
    bases = ast.literal_eval(re.search(r"offset_bases=(\[\[.*?\]\])", p.stdout).group(1))
    lane_of_column_bit = [lane for lane, row in bases[:5]]  # offset bits 0-4: a 128-byte row's 32 columns
    assert all(row == 0 for _, row in bases[:5])
    for m in range(32):
        column = m % 4 + 16 * (m // 4 % 2) + 4 * (m // 8)
        lane = 0
        for bit in range(5):
            if column >> bit & 1:
                lane ^= lane_of_column_bit[bit]
        assert lane == m, (m, column, lane)
    assert bases[11] == [32, 0]  # the tile's second copy: lanes 32-63, the squares
