"""harness.studies.resources: the kernels compile for sm_90 without a GPU, and their statistics commits
are fire-and-forget reductions (relaxed), not fenced atomics. Compiling needs Triton's compiler,
not its interpreter, so the report runs in a subprocess without TRITON_INTERPRET."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def report_rows(*args: str) -> list[dict]:
    """The JSON rows of ``python -m harness.studies.resources ARGS``, run without the interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "harness.studies.resources", *args], cwd=REPO, env=env, capture_output=True,
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

    from harness.studies.resources import report

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
