"""harness.studies.kernel_profile: kernel times summed per iteration, the cell composed by Hydra, arm
options as the worker builds them."""
from types import SimpleNamespace

import pytest
import torch
from hydra.errors import ConfigCompositionException

from harness.studies.kernel_profile import arm_options, cell_config, kernel_times, profile_arm

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def _event(name, device_type, us):
    return SimpleNamespace(name=name, device_type=device_type, device_time=us)


def test_kernel_times_sums_device_kernels_per_iteration_largest_first():
    events = [_event("pass2", CUDA, 300.0), _event("pass1", CUDA, 100.0), _event("pass2", CUDA, 500.0),
              _event("pass1", CUDA, 120.0), _event("aten::mm", CPU, 9999.0), _event("memset", CUDA, 0.0)]
    times = kernel_times(events, n_iter=2)
    assert list(times) == ["pass2", "pass1"]  # host ops and zero-time records left out
    assert times["pass2"] == pytest.approx((0.4, 1.0)) and times["pass1"] == pytest.approx((0.11, 1.0))


def test_arm_options_match_the_workers_and_take_overrides_for_that_arm_only():
    options = ["flash_gmm.autotune=published", "turbo_gmm.algorithm=two_pass"]
    module, opts = arm_options(cell_config("flash_gmm", "1M_512_32", options))
    assert module == "arms.flash_gmm"
    assert opts["autotune"] == "published" and "algorithm" not in opts
    assert opts["reg_covar"] == 1e-6 and opts["numerics"] == "tf32x3"
    cfg = cell_config("turbo_gmm", "4M_16_128", options)
    assert arm_options(cfg)[1]["algorithm"] == "two_pass"
    assert (cfg.shape.N, cfg.shape.K, cfg.shape.d, cfg.seed) == (4_000_000, 16, 128, 0)


def test_unknown_names_and_malformed_overrides_are_named():
    with pytest.raises(ConfigCompositionException, match="Could not find 'arm/flashgmm'"):
        cell_config("flashgmm", "1M_512_32", [])
    with pytest.raises(ConfigCompositionException, match="Could not find 'shape/1M_513_32'"):
        cell_config("turbo_gmm", "1M_513_32", [])
    with pytest.raises(ConfigCompositionException, match="arm.options.algorithmm"):
        cell_config("turbo_gmm", "1M_512_32", ["turbo_gmm.algorithmm=two_pass"])
    with pytest.raises(ValueError, match="arm.key=value"):
        cell_config("turbo_gmm", "1M_512_32", ["algorithm=two_pass"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="profiles CUDA kernels: needs a GPU")
def test_turbo_iteration_is_three_launches_on_the_gpu():
    """Lift, one sweep, M-step: one launch each per iteration (the 20K shapes are launch bound)."""
    rows = profile_arm(cell_config("turbo_gmm", "20K_32_32", []), 4)
    triton_kernels = {r["kernel"]: r["launches_per_iter"] for r in rows if r["kernel"].startswith("_")}
    # the rest (result copies, the floored-count read) run once per fit, not per iteration
    assert triton_kernels == {"_lift_kernel": 1.0, "_one_pass_kernel": 1.0, "_mstep_kernel": 1.0}, rows
