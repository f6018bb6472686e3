"""The warp-specialized pass 2 against the float64 oracle, beside the Triton pass 2 (Hopper GPU only:
Gluon has no interpreter), and what it refuses."""
import pytest
import torch

from kernels import reference as ref
from kernels.launch import LaunchConfig
from kernels.tests.conftest import assert_statistics_close, problem

hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                            reason="Gluon's warpgroup MMA and TMA need a Hopper GPU (Gluon has no interpreter)")


@hopper
@pytest.mark.parametrize("block_k", [64, 32])
@pytest.mark.parametrize("N,K,d", [(1023, 64, 32), (5000, 200, 32), (64, 128, 28), (70, 512, 32), (3001, 96, 20)])
def test_ws_pass_two_matches_the_float64_oracle_as_the_triton_pass_does(N, K, d, block_k):
    """Row tiles past N and columns past d come in as TMA's zero fill; several row tiles per program
    (programs_per_sm=1) take the ring through more than one phase."""
    from kernels.em import Workspace
    from kernels.lift_kernel import lift_into
    from kernels.two_pass import normalizer_pass, statistics_pass
    from kernels.two_pass_ws import statistics_pass_ws

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
@pytest.mark.parametrize("block_k", [64, 32])
@pytest.mark.parametrize("N,K,d", [(1023, 64, 32), (5000, 200, 32), (64, 128, 17), (130, 4096, 32)])
def test_ws_pass_one_matches_float64_log_sum_exp_as_the_triton_pass_does(N, K, d, block_k):
    """L from either pass 1 against float64 log-sum-exp of the same lifted scores; ell is their sum."""
    import numpy as np

    from kernels.em import Workspace
    from kernels.lift_kernel import lift_into
    from kernels.two_pass import normalizer_pass
    from kernels.two_pass_ws import normalizer_pass_ws

    X, w, m, v = problem(N, K, d)
    ws = Workspace(X, K, "two_pass")
    lift_into(*[torch.as_tensor(a, device="cuda") for a in (w, m, v)], ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    x = np.zeros((N, 32))
    x[:, :d] = X.double().cpu().numpy()
    S = np.concatenate([x, x * x], 1) @ ws.W.double().cpu().numpy() + ws.b.double().cpu().numpy()
    want = np.logaddexp.reduce(S[:, :K], axis=1)
    cfg = LaunchConfig(normalizer_block_k=block_k)
    for ws_kernel in (False, True):
        L, ll = torch.empty(N, device="cuda"), torch.zeros(1, dtype=torch.float64, device="cuda")
        if ws_kernel:
            normalizer_pass_ws(X, ws.center, ws.W, ws.b, K, cfg, L, ll)
        else:
            normalizer_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", L, ll)
        got = L.double().cpu().numpy()
        assert np.max(np.abs(got - want)) <= 2e-5 * np.abs(want).max(), ws_kernel  # as the Triton pass 1's test
        assert abs(float(ll) - want.sum()) <= 2e-5 * np.abs(want).sum(), ws_kernel


@hopper
def test_ws_pass_two_takes_the_in_kernel_center():
    """Data far from the origin, centered in the kernel: the same statistics about the center as the
    Triton pass 2."""
    from kernels.em import Workspace, data_center
    from kernels.lift_kernel import lift_into
    from kernels.two_pass import normalizer_pass, statistics_pass
    from kernels.two_pass_ws import statistics_pass_ws

    X, w, m, v = problem(2000, 80, 32)
    X = X + 50.0
    m = m + 50.0
    ws = Workspace(X, 80, "two_pass")
    ws.set_center(data_center(X, True))
    params = [torch.as_tensor(a, device="cuda") for a in (w, m, v)]
    cfg = LaunchConfig(block_k=64, programs_per_sm=2)
    out = []
    for ws_kernel in (False, True):
        lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
        normalizer_pass(X, ws.center, ws.W, ws.b, 80, cfg, "tf32x3", ws.L, ws.ll)
        if ws_kernel:
            statistics_pass_ws(X, ws.center, ws.W, ws.b, 80, cfg, ws.L, ws.n, ws.su)
        else:
            statistics_pass(X, ws.center, ws.W, ws.b, 80, cfg, "tf32x3", ws.L, ws.n, ws.su)
        out.append((ws.n[:80].clone(), ws.su[:80].clone()))
    (n3, su3), (nw, suw) = out
    torch.testing.assert_close(nw, n3, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(suw, su3, rtol=1e-5, atol=1e-5 * float(su3.abs().max()))


@pytest.mark.parametrize("d,block_k", [(33, 64), (30, 64), (32, 16)], ids=["d_pad 64", "d not a multiple of 4", "16 components"])
def test_what_the_ws_pass_two_refuses_is_named(d, block_k):
    from kernels.two_pass_ws import statistics_pass_ws

    d_pad = 32 if d <= 32 else 64
    X = torch.zeros(10, d)
    W, b = torch.zeros(2 * d_pad, 64), torch.zeros(64)
    with pytest.raises(ValueError, match="d_pad = 32 with d a multiple of 4"):
        statistics_pass_ws(X, torch.zeros(d_pad), W, b, 64, LaunchConfig(block_k=block_k), None, None, None)


@hopper
def test_a_fit_with_the_ws_pass_two_follows_float64_em():
    """The launch-config switches: kernels.fit with both passes warp-specialized (graph-captured) against
    the float64 oracle."""
    import numpy as np

    import kernels

    X, w, m, v = problem(3000, 160, 32, seed=2)
    cfg = LaunchConfig(block_k=64, programs_per_sm=2, warp_specialized_pass1=1, warp_specialized_pass2=1)
    r = kernels.fit(X, (w, m, v), 4, algorithm="two_pass", config=cfg)
    (rw, rm, rv), rlls = ref.em(X.cpu().numpy(), w, m, v, 4)
    np.testing.assert_allclose(r.log_likelihoods.cpu().numpy(), rlls, rtol=1e-6)
    np.testing.assert_allclose(r.means.cpu().numpy(), rm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r.variances.cpu().numpy(), rv, rtol=1e-4)


def test_the_ws_switches_are_refused_outside_tf32x3():
    from kernels.two_pass import normalizer_pass, statistics_pass

    X, W = torch.zeros(10, 32), torch.zeros(64, 64)
    with pytest.raises(ValueError, match="pass 2 is tf32x3 only"):
        statistics_pass(X, None, W, None, 64, LaunchConfig(warp_specialized_pass2=1), "ieee", None, None, None)
    with pytest.raises(ValueError, match="pass 1 is tf32x3 only"):
        normalizer_pass(X, None, W, None, 64, LaunchConfig(warp_specialized_pass1=1), "ieee", None, None)
