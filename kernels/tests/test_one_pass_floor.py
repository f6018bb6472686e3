"""Algorithm 2's shared-memory floor: refused before compiling where wgmma's operands cannot fit,
in agreement with where the one-pass kernel launched (or did not) on the H200."""
import pytest


def test_one_pass_shared_memory_floor_refuses_what_did_not_compile_on_the_h200():
    """The three (K, d) where the compiler took minutes to fail or timed out on the H200 are refused before
    compiling; under ieee (FMA units, no operand pinned in shared memory) none is."""
    from triton.runtime.errors import OutOfResources

    from turbo_gmm.diag.one_pass import check_shared_memory

    h200_limit = 232448  # the H200's shared memory a block, as the compiler reports it
    check_shared_memory(128, 32, "tf32x3", h200_limit)
    for K, dim in [(512, 128), (1024, 64), (1024, 128)]:
        with pytest.raises(OutOfResources, match="two_pass"):
            check_shared_memory(K, dim, "tf32x3", h200_limit)
    check_shared_memory(1024, 128, "ieee", h200_limit)


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a Hopper GPU: the floor is wgmma's")
def test_one_pass_past_the_floor_is_refused_before_compiling():
    import torch

    import turbo_gmm
    from turbo_gmm.diag.one_pass import StateDoesNotFit

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the floor applies to wgmma (sm_90+)")
    K, d = 1024, 128
    X = torch.randn(4096, d, device="cuda")
    init = (torch.full((K,), 1.0 / K), X[:K].clone(), torch.ones(K, d))
    with pytest.raises(StateDoesNotFit):
        turbo_gmm.fit(X, init, n_iter=1, algorithm="one_pass")
