"""kernels.resources: the kernels compile for sm_90 without a GPU, and their statistics commits
are fire-and-forget reductions (relaxed), not fenced atomics. Compiling needs Triton's compiler,
not its interpreter, so the report runs in a subprocess without TRITON_INTERPRET."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def report_rows(*args: str) -> list[dict]:
    """The JSON rows of ``python -m kernels.resources ARGS``, run without the interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "kernels.resources", *args], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return [json.loads(line) for line in p.stdout.splitlines()]


@pytest.mark.parametrize("algorithm", ["one_pass", "two_pass"])
def test_sm90_compile_report_and_relaxed_commits(algorithm):
    rows = report_rows("--K", "32", "--d", "32", "--algorithm", algorithm,
                       "--config", "block_n=64,block_k=32,num_warps=4,num_stages=2")
    configured = rows[len(rows) // 2:]  # the default launch config's rows come first, then --config's
    assert [r["kernel"].split(".")[0] for r in configured] == [algorithm] * (1 if algorithm == "one_pass" else 2)
    for r in rows:
        assert "error" not in r, r
        assert 0 < r["registers"] <= 255 and r["shared_bytes"] > 0 and r["programs_per_sm"] >= 1
        ops = r["sass_atomics_and_barriers"]
        assert any(op.startswith("REDG.E.ADD.F64") for op in ops), ops  # float64 sums committed by reductions
        assert not any(op.startswith(("ATOMG", "MEMBAR.ALL.GPU", "CCTL")) for op in ops), ops  # no fence per commit


def test_report_refuses_the_interpreter(monkeypatch):
    import triton

    from kernels.resources import report

    monkeypatch.setattr(triton.knobs.runtime, "interpret", True)
    with pytest.raises(RuntimeError, match="without TRITON_INTERPRET"):
        report(32, 32, "one_pass")


def test_register_cap_reaches_the_compiler():
    """LaunchConfig.max_registers becomes ptxas's .maxnreg: the statistics kernel compiles to at most that
    many registers (it takes 240-255 uncapped at this shape), so more programs fit on a multiprocessor."""
    uncapped, capped = report_rows("--K", "32", "--d", "32", "--algorithm", "one_pass",
                                   "--config", "block_n=64,num_warps=4,num_stages=2",
                                   "--config", "block_n=64,num_warps=4,num_stages=2,max_registers=128")[1:]
    assert uncapped["max_registers"] is None and uncapped["registers"] > 128
    assert capped["max_registers"] == 128 and capped["registers"] <= 128
    assert capped["programs_by_registers"] >= 4 > uncapped["programs_by_registers"]


def test_one_pass_shared_memory_floor_agrees_with_the_h200_dispatch_measurement():
    """The floor refuses no (K, d) where Algorithm 2 launched on the H200, and refuses the three where the
    compiler took minutes to fail (147 s, 151 s) or timed out (900 s) in results/h200/dispatch.csv."""
    import pandas as pd
    from triton.runtime.errors import OutOfResources

    from kernels.lift import pow2_at_least_16
    from kernels.one_pass import check_shared_memory

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

    import kernels
    from kernels.one_pass import StateDoesNotFit

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the floor applies to wgmma (sm_90+)")
    K, d = 1024, 128
    X = torch.randn(4096, d, device="cuda")
    init = (torch.full((K,), 1.0 / K), X[:K].clone(), torch.ones(K, d))
    with pytest.raises(StateDoesNotFit):
        kernels.fit(X, init, n_iter=1, algorithm="one_pass")
