"""Which commit a row names; the environment record and its probes."""
import subprocess

import pytest
import torch

from harness import env
from harness.env import REPO, git_commit


def test_the_shipped_commit_wins_over_the_copy_s_own_git(monkeypatch):
    monkeypatch.setenv("TURBO_GMM_COMMIT", "0123abc")
    assert git_commit() == "0123abc"


def test_without_a_shipped_commit_the_checkout_s_head_is_named(monkeypatch):
    monkeypatch.delenv("TURBO_GMM_COMMIT", raising=False)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert git_commit().removesuffix("+dirty") == head


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path: without a GPU there is nothing to probe")
def test_without_a_gpu_env_has_no_probes_and_does_not_fail():
    got = env.collect(with_probes=True)
    assert got["gpu"] is None and "probes" not in got and got["cpu_count"] >= 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the matmul probes")
def test_probes_measure_every_matmul_rate_including_fp64():
    """fp64_tflops (issue 20) beside fp32, TF32 and bf16: torch's float64 GEMM at 8192^3, the DMMA rate."""
    rates = env.probes()
    for key in ("fp32_tflops", "tf32_tflops", "bf16_tflops", "fp64_tflops", "hbm_read_gb_per_s"):
        assert rates[key] > 0, (key, rates)
