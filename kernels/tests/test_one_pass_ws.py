"""The warp-specialized one-pass kernel (kernels/diag/one_pass_ws.py) against float64 statistics of the same lift,
beside the Triton one-pass kernel (Hopper GPU only: Gluon has no interpreter), and what it refuses (CPU)."""
import numpy as np
import pytest
import torch

from turbo_gmm.diag import reference as ref
from turbo_gmm.launch import LaunchConfig
from turbo_gmm.tests.conftest import problem

hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                            reason="Gluon's warpgroup MMA, TMA and setmaxnreg need a Hopper GPU (no interpreter)")


def _lifted_workspace(X, w, m, v):
    """A workspace holding the lift of (w, m, v) about X's column mean (the kernels' default center)."""
    from turbo_gmm.diag.em import Workspace, data_center
    from turbo_gmm.diag.lift_kernel import lift_into

    ws = Workspace(X, len(w), "one_pass")
    ws.set_center(data_center(X, True))
    lift_into(*[torch.as_tensor(a, device=X.device) for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    return ws


def _errors(sums, reference, K, d) -> dict:
    """turbo_gmm.diag.estep.per_component_errors of a sweep's (n, [s | u], ell), each component's scale floored at one
    row's worth (1: the small problems here leave components with almost no mass), and ell's relative error."""
    from turbo_gmm.diag.estep import per_component_errors

    n, su, ll = sums
    d_pad = su.shape[1] // 2
    floored = {**reference, **{k: reference[k].clamp_min(1.0) for k in ("n_scale", "s_scale", "u_scale")}}
    errors = per_component_errors(n[:K], su[:K, :d], su[:K, d_pad : d_pad + d], floored)
    return {**errors, "ll": abs(float(ll[0]) - float(reference["ll"])) / abs(float(reference["ll"]))}


def _sweep(ws, run):
    ws.n.zero_()
    ws.su.zero_()
    ws.ll.zero_()
    run()
    return ws.n.clone(), ws.su.clone(), ws.ll.clone()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("N,K,d", [(1023, 7, 32), (100_003, 33, 32), (5000, 100, 32), (64, 16, 32), (3001, 64, 28),
                                   (70, 128, 20), (600_000, 64, 32), (100_003, 16, 128), (5000, 20, 100),
                                   (70_001, 33, 64), (3001, 16, 48), (300_000, 64, 64), (64, 32, 128)],
                         ids=["1023x7", "100003x33", "5000x100", "one tile", "d=28", "70x128 d=20", "deep ring",
                              "d=128", "d=100", "d=64 K_pad 64", "d=48", "deep ring d=64", "one tile d=128"])
def test_statistics_of_one_estep_are_as_exact_per_component_as_the_triton_kernels(N, K, d):
    """n, s, u per component and ell against float64 statistics of the same lift, relative to each component's
    own size: within 2e-6, or within twice the Triton kernel's error where that is larger (the score's tf32x3
    rounding, which both kernels share, sets a floor). Irregular N: row tiles past N come in as TMA's zero fill;
    K_pad 16, 64 and 128 (one Gamma buffer shared by the two consumers); d < d_pad: columns past d zero-filled
    (at d = 100 the fourth 32-column block in part, at d = 48 the second); d_pad 64 and 128: the score by
    32-column blocks and the statistics in chunks of 64 lanes; "one tile": the second consumer has no tile;
    "deep ring": ~70 tiles per program. Both schedules."""
    import dataclasses

    from turbo_gmm.dispatch import launch_config
    from turbo_gmm.diag.estep import float64_statistics
    from turbo_gmm.diag.one_pass import one_pass_statistics
    from turbo_gmm.diag.one_pass_ws import one_pass_statistics_ws

    X, w, m, v = problem(N, K, d, seed=1)
    ws = _lifted_workspace(X, w, m, v)
    reference = float64_statistics(X, ws.center, ws.W, ws.b, K)
    out = (ws.n, ws.su, ws.ll)
    triton_cfg = dataclasses.replace(launch_config("one_pass", K, d), warp_specialized_one_pass=0)
    triton = _errors(_sweep(ws, lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, triton_cfg, "tf32x3", out=out)),
                     reference, K, d)
    for pingpong in (False, True):
        n, su, ll = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, pingpong=pingpong))
        got = _errors((n, su, ll), reference, K, d)
        for key in ("n", "s", "u", "ll"):
            assert got[key] <= max(2 * triton[key], 2e-6), (pingpong, key, got, triton)
    assert torch.all(n[K:] == 0) and torch.all(su[K:] == 0), "padded components must stay empty"
    assert float(n[:K].sum()) == pytest.approx(N, rel=1e-6)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [32, 128])
def test_weighted_sums_are_the_triton_kernels_and_integer_weights_repeat_rows(d):
    """Sample weights in {0, 1, 2, 3}: the warp-specialized kernel's n, [s | u] and ell are those of the unweighted
    kernel on X with each row repeated that many times (0: dropped), to float32 rounding, and the Triton kernel's
    weighted ones as closely as the two kernels' unweighted sums agree, at d = 32 also to float32 rounding (at
    d = 128 their scores' tf32x3 rounding, summed in different orders, moved one n_k by 5e-5 relative on the
    H100); all-one weights give the unweighted sums."""
    import dataclasses

    from turbo_gmm.dispatch import launch_config
    from turbo_gmm.diag.one_pass import one_pass_statistics
    from turbo_gmm.diag.one_pass_ws import one_pass_statistics_ws

    N, K = 100_003, 33 if d == 32 else 16
    X, w, m, v = problem(N, K, d, seed=6)
    counts = torch.randint(0, 4, (N,), generator=torch.Generator().manual_seed(0)).to(X.device)
    weights = counts.float()
    ws = _lifted_workspace(X, w, m, v)
    out = (ws.n, ws.su, ws.ll)
    triton_cfg = dataclasses.replace(launch_config("one_pass", K, d), warp_specialized_one_pass=0)
    got = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, sample_weight=weights))
    triton = _sweep(ws, lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, triton_cfg, "tf32x3", out=out,
                                                    sample_weight=weights))
    X_rep = X.repeat_interleave(counts, dim=0).contiguous()
    repeated = _sweep(ws, lambda: one_pass_statistics_ws(X_rep, ws.center, ws.W, ws.b, out))
    for a, b in zip(got, repeated):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * float(b.abs().max()))
    plain = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out))
    plain_triton = _sweep(ws, lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, triton_cfg, "tf32x3", out=out))
    for a, b, a0, b0 in zip(got, triton, plain, plain_triton):
        gap = float((a - b).abs().max())
        assert gap <= 4 * float((a0 - b0).abs().max()) + 1e-6 * float(b.abs().max()), (gap, a0, b0)
        if d == 32:  # where the two kernels sum the score alike, to float32 rounding
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * float(b.abs().max()))
    ones = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out,
                                                     sample_weight=torch.ones_like(weights)))
    for a, b in zip(ones, plain):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-9)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("pingpong", [True, False], ids=["ping-pong", "free-running"])
def test_both_schedules_give_the_same_sums(pingpong):
    """The token only orders the consumers' products; each consumer's sums are the same either way (one
    float64 commit per consumer: equal up to the order of the atomics)."""
    from turbo_gmm.diag.one_pass_ws import one_pass_statistics_ws

    X, w, m, v = problem(50_000, 40, 32, seed=4)
    ws = _lifted_workspace(X, w, m, v)
    out = (ws.n, ws.su, ws.ll)
    base = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, pingpong=True))
    other = _sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, pingpong=pingpong))
    for a, b in zip(base, other):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-9)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("K,d", [(40, 32), (16, 128)])
def test_a_graph_captured_fit_follows_the_triton_kernels_fit(K, d):
    """turbo_gmm.fit through the LaunchConfig switch (10 iterations, graph-captured) against the same fit with the
    Triton one-pass kernel and against float64 EM: ell, variances and means no further from float64 EM than
    twice the Triton fit's distance (or 1e-6), and at d = 32 the two fits within 1e-5 of each other in ell per
    point."""
    import dataclasses

    import turbo_gmm
    from turbo_gmm.dispatch import launch_config

    X, w, m, v = problem(8000, K, d, seed=2)
    (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 10)
    fits, errors = [], []
    for switch in (0, 1):
        cfg = dataclasses.replace(launch_config("one_pass", K, d), warp_specialized_one_pass=switch,
                                  warp_specialized_one_pass_rows=0)
        r = turbo_gmm.fit(X, (w, m, v), 10, algorithm="one_pass", config=cfg)
        assert r.kernel == ("one_pass_ws" if switch else "one_pass")
        fits.append(r)
        errors.append([float(np.max(np.abs(got.double().cpu().numpy() - want) / np.abs(want)))
                       for got, want in ((r.log_likelihoods, rlls), (r.variances, rv))]
                      + [float(np.max(np.abs(r.means.double().cpu().numpy() - rm)))])
    triton_errors, ws_errors = errors
    assert all(np.isfinite(ws_errors)), errors
    for triton_err, ws_err in zip(triton_errors, ws_errors):
        assert ws_err <= max(2 * triton_err, 1e-6), errors
    if d == 32:  # at d = 128 this problem's lift bound reaches 4e3 log-density units (Float32LiftWarning): the two
        # fits, each as close to float64 EM as above, drifted 0.02 apart in ell per point (H100, 2026-12-05)
        ell_gap = (fits[1].log_likelihoods - fits[0].log_likelihoods).abs().max() / X.shape[0]
        assert float(ell_gap) <= 1e-5, float(ell_gap)


@pytest.mark.parametrize("d,K,precision,why", [
    (66, 64, "tf32x3", "d_pad 128"),
    (30, 64, "tf32x3", "d a multiple of 4"),
    (16, 64, "tf32x3", "d_pad 16"),
    (32, 200, "tf32x3", "K_pad = 256"),
    (64, 128, "tf32x3", "K_pad = 128"),
    (32, 64, "ieee", "tf32x3 only"),
    (32, 64, "tf32x3", "needs a Hopper GPU"),
], ids=["K_pad 64 at d_pad 128", "d not a multiple of 4", "d_pad 16", "K_pad 256", "K_pad 128 at d_pad 64", "ieee",
        "on the CPU"])
def test_what_the_ws_kernel_refuses_is_named(d, K, precision, why):
    from turbo_gmm.diag.lift import pow2_at_least_16
    from turbo_gmm.diag.one_pass_ws import one_pass_statistics_ws, refusal

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
    from turbo_gmm.diag.one_pass_ws import refusal

    X = torch.zeros(10, 33)[:, :32]
    assert "d a multiple of 4" in refusal(X, torch.zeros(64, 64))


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_where_the_ws_kernel_refuses_the_switch_falls_back_to_the_triton_kernel(precision):
    """ieee anywhere, tf32x3 off Hopper (the interpreter on the CPU) or at a d it refuses (d = 30 on a GPU):
    the Triton kernel runs, the same sums as with the switch off."""
    from turbo_gmm.diag.one_pass import one_pass_statistics

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


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("N,K,weighted", [(50_000, 20, False), (64, 16, False), (1023, 7, True), (600_000, 32, False),
                                          (100_003, 33, False)],
                         ids=["50000x20", "one tile", "weighted", "deep ring", "K_pad 64: not overlapped"])
def test_the_overlapped_consumers_give_the_default_consumers_sums(N, K, weighted):
    """A consumer's next score issued before this tile's exponentials changes when the products run, not what
    they add: the default consumers' sums (one float64 commit per consumer: equal up to the atomics' order).
    "one tile": the second consumer has none (its look-ahead reads a stage nothing loads, and is discarded);
    "deep ring": ~70 tiles per program through the six-stage ring; at K_pad 64 the option leaves the default."""
    from turbo_gmm.diag.one_pass_ws import one_pass_statistics_ws

    X, w, m, v = problem(N, K, 32, seed=5)
    ws = _lifted_workspace(X, w, m, v)
    out = (ws.n, ws.su, ws.ll)
    weights = torch.rand(N, device=X.device, dtype=torch.float32) if weighted else None
    base, other = (_sweep(ws, lambda: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, sample_weight=weights,
                                                             overlap=overlap)) for overlap in (False, True))
    for a, b in zip(base, other):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-9)


def test_the_overlapped_consumers_take_d_pad_32_at_k_pad_16_and_32():
    """Where _consume_overlapped compiles without spills (d_pad 32, K_pad 16 and 32; at 64 its look-ahead's
    operands spilled 393 SASS loads and stores), with six ring stages under the H200's limit; never with the
    ping-pong schedule; elsewhere the option compiles the kernel as without it."""
    from turbo_gmm.diag import one_pass_ws as ows

    assert [(k, d) for d, ks in ows.K_PADS.items() for k in ks if ows.overlaps(k, d)] == [(16, 32), (32, 32)]
    assert not ows.overlaps(32, 32, pingpong=True)
    for k in ows.OVERLAP_K_PADS:
        meta = ows.launch_meta(k, 32, overlap=True)
        assert meta["OVERLAP"] and meta["STAGES"] == ows.OVERLAP_MAX_STAGES == 6 and meta["GAMMA_BUFFERS"] == 2
        assert ows.shared_bytes(k, 32, 2, meta["STAGES"]) + ows.SCRATCH_MARGIN <= ows.SHARED_LIMIT
    assert ows.launch_meta(64, 32, overlap=True) == ows.launch_meta(64, 32)
    assert ows.launch_meta(16, 32, pingpong=True, overlap=True) == ows.launch_meta(16, 32, pingpong=True)


def test_shared_memory_plan_fits_the_h200_at_every_k_pad():
    """Each consumer gets its own Gamma buffer where a ring of two stages still fits, one shared buffer at
    (K_pad, d_pad) = (128, 32); the plan leaves the compiler's scratch margin under the H200's per-program limit."""
    from turbo_gmm.diag import one_pass_ws as ows

    plans = {(k, d): ows.shared_plan(k, d) for d, ks in ows.K_PADS.items() for k in ks}
    assert [k for k, p in plans.items() if p["GAMMA_BUFFERS"] == 1] == [(128, 32)]
    for (k, d), p in plans.items():
        assert ows.MIN_STAGES <= p["STAGES"] <= ows.MAX_STAGES
        assert ows.shared_bytes(k, d, p["GAMMA_BUFFERS"], p["STAGES"]) + ows.SCRATCH_MARGIN <= ows.SHARED_LIMIT
    assert ows.shared_bytes(128, 32, ows.CONSUMERS, ows.MIN_STAGES) + ows.SCRATCH_MARGIN > ows.SHARED_LIMIT


def test_register_split_fills_the_multiprocessor():
    """setmaxnreg's split: the launch's registers a thread times the 12 warps, and the loader's warpgroup plus the
    two consumers' after setmaxnreg, within the multiprocessor's 65536; 168 at launch, 240 a consumer."""
    from turbo_gmm.diag import one_pass_ws as ows

    assert (ows.LAUNCH_REGISTERS, ows.CONSUMER_REGISTERS) == (168, 240)
    assert 128 * (ows.CONSUMERS + 1) * ows.LAUNCH_REGISTERS <= ows.REGISTERS
    assert 128 * (ows.CONSUMERS * ows.CONSUMER_REGISTERS + ows.LOADER_REGISTERS) <= ows.REGISTERS
    assert ows.LAUNCH_REGISTERS % 8 == 0 and ows.CONSUMER_REGISTERS % 8 == 0


@pytest.mark.parametrize("module", ["one_pass_ws", "two_pass_ws"])
def test_the_hopper_switch_turns_each_ws_kernel_off_and_says_so(module, monkeypatch):
    """TURBO_GMM_HOPPER_KERNELS=0 is the first refusal of both warp-specialized kernels (even where they would run),
    and unset or 1 leaves their own refusals in place."""
    import importlib

    from turbo_gmm.launch import HOPPER_KERNELS_SWITCH, LaunchConfig

    refusal = importlib.import_module(f"turbo_gmm.diag.{module}").refusal
    X, W = torch.zeros(10, 32), torch.zeros(64, 64)
    args = (X, W, "tf32x3") if module == "one_pass_ws" else (X, W, LaunchConfig(block_k=64))
    monkeypatch.setenv(HOPPER_KERNELS_SWITCH, "0")
    assert HOPPER_KERNELS_SWITCH in refusal(*args)
    monkeypatch.setenv(HOPPER_KERNELS_SWITCH, "1")
    assert HOPPER_KERNELS_SWITCH not in refusal(*args) and "Hopper GPU" in refusal(*args)
