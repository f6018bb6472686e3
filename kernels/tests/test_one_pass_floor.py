"""Algorithm 2's shared-memory floor: refused before compiling where wgmma's operands cannot fit,
in agreement with where the one-pass kernel launched (or did not) on the H200."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_one_pass_shared_memory_floor_agrees_with_the_h200_dispatch_measurement():
    """The floor refuses no (K, d) where Algorithm 2 launched on the H200, and refuses the three where the
    compiler took minutes to fail (147 s, 151 s) or timed out (900 s) in results/h200/dispatch.csv."""
    import pandas as pd
    from triton.runtime.errors import OutOfResources

    from turbo_gmm.lift import pow2_at_least_16
    from turbo_gmm.one_pass import check_shared_memory

    h200_limit = 232448  # the "Hardware limit" of the compiler's own refusals in that CSV
    d = pd.read_csv(REPO / "results" / "h200" / "dispatch.csv")
    launched = d[(d.algorithm == "one_pass") & (d.status == "ok")]
    assert len(launched) >= 15
    for K, dim in zip(launched.K, launched.d):
        check_shared_memory(pow2_at_least_16(K), pow2_at_least_16(dim), "tf32x3", h200_limit)
    for K, dim in [(512, 128), (1024, 64), (1024, 128)]:
        with pytest.raises(OutOfResources, match="two_pass"):
            check_shared_memory(K, dim, "tf32x3", h200_limit)
    check_shared_memory(1024, 128, "ieee", h200_limit)  # FMA units: no operand pinned in shared memory


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a Hopper GPU: the floor is wgmma's")
def test_one_pass_past_the_floor_is_refused_before_compiling():
    import torch

    import turbo_gmm
    from turbo_gmm.one_pass import StateDoesNotFit

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the floor applies to wgmma (sm_90+)")
    K, d = 1024, 128
    X = torch.randn(4096, d, device="cuda")
    init = (torch.full((K,), 1.0 / K), X[:K].clone(), torch.ones(K, d))
    with pytest.raises(StateDoesNotFit):
        turbo_gmm.fit(X, init, n_iter=1, algorithm="one_pass")
