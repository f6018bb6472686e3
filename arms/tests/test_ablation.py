"""The ablation ladder (paper §5.4): the four rungs compute the same E-step.

Every rung's (n, s, u, ll) at the same parameters agrees with rung A1 to 5e-6
relative (the paper's bound: the ladder varies dataflow, not arithmetic), and A1
itself agrees with the float64 oracle, so the agreement is not a shared mistake.
"""
import numpy as np
import pytest
import torch

from arms import ablation_a1, ablation_a2, ablation_a3, ablation_a4
from turbo_gmm.diag import reference as ref
from arms.ablation_fused_score import fused_score
from turbo_gmm.launch import LaunchConfig
from turbo_gmm.diag.lift import lift, pow2_at_least_16
from turbo_gmm.tests.conftest import assert_statistics_close, problem

RUNGS = {"A1": ablation_a1, "A2": ablation_a2, "A3": ablation_a3, "A4": ablation_a4}
LADDER_RTOL = 5e-6


def rung_statistics(module, X, w, m, v):
    t = [torch.as_tensor(a, device=X.device).double() for a in (w, m, v)]
    n, s, u, ll = module.statistics(X, *t)
    return [np.asarray(a.detach().cpu().double().numpy()) for a in (n, s, u)] + [float(ll)]


@pytest.mark.parametrize("N,K,d", [(1023, 7, 5), (257, 3, 33), (300, 37, 6)])
def test_all_rungs_agree_on_n_s_u_ll(N, K, d):
    X, w, m, v = problem(N, K, d, seed=3)
    Xn = X.cpu().numpy()
    got = {name: rung_statistics(mod, X, w, m, v) for name, mod in RUNGS.items()}
    base = got["A1"]
    rn, rs, ru, rll = ref.estep(Xn, w, m, v)
    assert_statistics_close(base[:3], (rn, rs, ru), Xn, LADDER_RTOL)
    assert abs(base[3] - rll) <= LADDER_RTOL * abs(rll)
    for name in ("A2", "A3", "A4"):
        assert_statistics_close(got[name][:3], base[:3], Xn, LADDER_RTOL)
        assert abs(got[name][3] - base[3]) <= LADDER_RTOL * abs(base[3]), (name, got[name][3], base[3])


def test_fused_score_matches_float64_score_over_component_tiles():
    """K = 37 over 16-wide component tiles and 16-row tiles with a partial last tile."""
    X, w, m, v = problem(203, 37, 6, seed=1)
    K, d = m.shape
    t = [torch.as_tensor(a, device=X.device).double() for a in (w, m, v)]
    W, b = lift(*t, pow2_at_least_16(K), pow2_at_least_16(d))
    center = torch.zeros(pow2_at_least_16(d), dtype=torch.float32, device=X.device)
    S = fused_score(X, center, W, b, K, "ieee", LaunchConfig(block_n=16, block_k=16)).cpu().numpy()
    want = ref.log_prob(X.cpu().numpy(), w, m, v)
    assert S.shape == (203, 37)
    np.testing.assert_allclose(S, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


def test_fused_score_rejects_a_lift_that_does_not_fit():
    X = problem(50, 3, 20, seed=0)[0]
    _, w, m, v = problem(50, 3, 5, seed=0)
    W, b = lift(*[torch.as_tensor(a, device=X.device).double() for a in (w, m, v)], 16, 16)  # d_pad 16 < d 20
    with pytest.raises(ValueError, match="do not fit"):
        fused_score(X, torch.zeros(16, device=X.device), W, b, 3)


def test_a2_never_forms_the_squared_data_temporary(monkeypatch):
    """The one memory difference between A1 and A2: no N x d X*X array in A2."""
    X, w, m, v = problem(1023, 3, 5, seed=2)
    monkeypatch.setattr(ablation_a1, "U_ROWS_PER_CHUNK", 256)
    seen = []
    real_mul = torch.Tensor.__mul__

    def spy(a, b):
        out = real_mul(a, b)
        if isinstance(b, torch.Tensor) and a.shape[1:] == X.shape[1:]:
            seen.append(tuple(out.shape))
        return out

    monkeypatch.setattr(torch.Tensor, "__mul__", spy)
    params = [torch.as_tensor(a, device=X.device).double() for a in (w, m, v)]
    ablation_a1.statistics(X, *params)
    assert (1023, 5) in seen  # A1 does form it (so the spy works)
    seen.clear()
    ablation_a2.statistics(X, *params)
    assert seen and max(r for r, _ in seen) <= 256  # only bounded row chunks were squared
