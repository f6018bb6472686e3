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
    shape = ("--K", "32", "--d", "32", "--algorithm", algorithm)
    default = report_rows(*shape)  # at d = 32 Algorithm 2's default has the warp-specialized kernel's row too
    rows = report_rows(*shape, "--config", "block_n=64,block_k=32,num_warps=4,num_stages=2")
    assert rows[: len(default)] == default
    configured = rows[len(default):]  # the default launch config's rows come first, then --config's
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
                                   "--config", "block_n=64,num_warps=4,num_stages=2,max_registers=128")[-2:]
    assert uncapped["max_registers"] is None and uncapped["registers"] > 128
    assert capped["max_registers"] == 128 and capped["registers"] <= 128
    assert capped["programs_by_registers"] >= 4 > uncapped["programs_by_registers"]


def test_the_warp_specialized_one_pass_compiles_to_the_schedule_it_claims():
    """Offline sm_90 compile of the default launch config at d = 32, K_pad 16..128: the Triton one pass and the
    warp-specialized one beside it; per consumer and tile the score's 24 HGMMA (six K = 32 products) and the
    statistics' 24 (three K = 64) under one wait each (4 WARPGROUP.DEPBAR for the two consumers; at K_pad 16 and 32
    the overlapped consumers, whose first tile's score comes before the loop: 144 HGMMA in the SASS), the consumers
    at 240 registers and the loader at 24 by setmaxnreg, no stack at any K_pad (turbo_gmm.diag.two_pass_ws.loop_variant_zero:
    208 B at K_pad 128 with W's and Gamma's descriptors hoisted), shared memory as planned and
    under the H200's limit, and float64 reductions for the commits."""
    from turbo_gmm.diag.one_pass_ws import SHARED_LIMIT

    for K in (16, 32, 64, 128):
        rows = {r["kernel"]: r for r in report_rows("--K", str(K), "--d", "32", "--algorithm", "one_pass")}
        assert sorted(rows) == ["one_pass", "one_pass.statistics_ws"], rows
        r = rows["one_pass.statistics_ws"]
        assert "error" not in r, r
        overlapped = K <= 32
        assert r["overlap"] is overlapped, r
        assert r["sass_schedule"]["HGMMA"] == (144 if overlapped else 96), r["sass_schedule"]
        assert r["sass_schedule"]["WARPGROUP.DEPBAR"] == 4, r["sass_schedule"]
        assert r["wgmma_serialized"] is None, r  # ptxas kept the products pipelined
        assert ["dec", "24"] in r["setmaxnreg"] and ["inc", "240"] in r["setmaxnreg"], r["setmaxnreg"]
        assert r["shared_bytes"] <= SHARED_LIMIT and r["registers"] <= 168
        assert r["shared_bytes"] >= r["shared_bytes_planned"]
        assert any(op.startswith("REDG.E.ADD.F64") for op in r["sass_atomics_and_barriers"]), r
        assert r["sass_schedule"]["MUFU.EX2"] > 0 and r["exp_subnormal_fixups"] == 0, r  # exp_ftz: no fix-up
        assert r["stack_bytes"] == 0, r


def test_the_warp_specialized_one_pass_past_d_pad_32_compiles_pipelined_and_without_spills():
    """Offline sm_90 compile of the default launch config at d = 64 and 128: per consumer and tile 24 HGMMA (six
    K = 32 products) for each 32-column block of the score and 24 (three K = 64) for each 64-lane chunk of the
    statistics, one wait each (4 WARPGROUP.DEPBAR per block for the two consumers), ptxas keeping the products
    pipelined, the stack within what was measured (344 B at (16, 128) with W's descriptors hoisted out of the loop;
    16 and 56 B at (16, 128) and (32, 128) since each pair of column blocks is held across its chunks' products,
    which ran 3-9% faster all the same on an H100), shared memory as planned and under the H200's limit."""
    from turbo_gmm.diag.one_pass_ws import SHARED_LIMIT

    stack = {(16, 64): 8, (64, 64): 8, (16, 128): 16, (32, 128): 56}
    for K, d in stack:
        rows = {r["kernel"]: r for r in report_rows("--K", str(K), "--d", str(d), "--algorithm", "one_pass")}
        r = rows["one_pass.statistics_ws"]
        assert "error" not in r, r
        blocks = d // 32
        assert r["sass_schedule"]["HGMMA"] == 2 * blocks * 48, r["sass_schedule"]
        assert r["sass_schedule"]["WARPGROUP.DEPBAR"] == 4 * blocks, r["sass_schedule"]
        assert r["wgmma_serialized"] is None and r["stack_bytes"] <= stack[K, d], r
        assert r["shared_bytes_planned"] <= r["shared_bytes"] <= SHARED_LIMIT, r


def test_the_overlapped_consumers_compile_pipelined_and_without_spills():
    """LaunchConfig.one_pass_overlap at d = 32 reaches the compile: at K_pad 16 and 32 the overlapped consumers (six
    ring stages; per consumer and tile still the score's 24 HGMMA and the statistics' 24, and the first tile's
    score before the loop: 144 in the SASS, 96 without), ptxas keeping the
    products pipelined (its first form, waiting for the look-ahead only at the next tile, was serialized:
    "insufficient register resources"), no stack; at K_pad 64 the default consumers."""
    config = "block_n=64,num_warps=4,num_stages=3,warp_specialized_one_pass=1,one_pass_overlap=1"
    for K, overlapped in ((16, True), (32, True), (64, False)):
        rows = report_rows("--K", str(K), "--d", "32", "--algorithm", "one_pass", "--config", config)
        r = [r for r in rows if r["kernel"] == "one_pass.statistics_ws"][-1]  # --config's rows come last
        assert "error" not in r, r
        assert r["overlap"] is overlapped and r["num_stages"] == (6 if overlapped else 4), r
        assert r["sass_schedule"]["HGMMA"] == (144 if overlapped else 96), r["sass_schedule"]
        assert r["wgmma_serialized"] is None and r["stack_bytes"] == 0, r


def test_the_warp_specialized_pass_2_takes_its_exponentials_without_the_subnormal_fix_up():
    """Algorithm 3's warp-specialized pass 2 at K 512 and 4096 (d = 32): Gamma = exp_ftz(S - L), with none of the
    compare-halve-square ptxas puts around each MUFU.EX2 of gl.exp (the Triton pass 1 beside it keeps tl.exp's)."""
    for K in (512, 4096):
        rows = {r["kernel"]: r for r in report_rows("--K", str(K), "--d", "32", "--algorithm", "two_pass")}
        assert rows["two_pass.statistics_ws"]["exp_subnormal_fixups"] == 0, rows["two_pass.statistics_ws"]
        assert rows["two_pass.statistics_ws"]["wgmma_serialized"] is None, rows["two_pass.statistics_ws"]
        assert rows["two_pass.normalizer"]["exp_subnormal_fixups"] > 0, rows["two_pass.normalizer"]



@pytest.mark.parametrize("message, reason", [
    # ptxas 12.8 -v on the warp-specialized one pass with its statistics products waited for only with the next
    # tile's score (2026-12-05): first with the deferred accumulator zero-initialized, then initialized by a product
    ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
     "wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in "
     "the function '_one_pass_kernel_ws'",
     "non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage"),
    ("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
     "insufficient register resources for the function '_one_pass_kernel_ws'", "insufficient register resources"),
    ("ptxas info    : Used 168 registers, used 3 barriers", None),
])
def test_ptxas_serialization_advice_is_read(message, reason):
    """What harness.studies.resources.wgmma_serialized takes from ptxas's -v report: the reason it gave up
    pipelining the wgmma (each then waits for the one before: 96 WARPGROUP.DEPBAR where the kernel asks for 4)."""
    from harness.studies.resources import WGMMA_SERIALIZED

    m = WGMMA_SERIALIZED.search(message)
    assert (m.group(1) if m else None) == reason


@pytest.mark.parametrize("algorithm", ["one_pass", "two_pass"])
def test_fp64_kernels_compile_to_float64_tensor_core_products(algorithm):
    """precision fp64 on sm_90: every kernel's products are DMMA (mma.sync on f64 operands, issue 20), at the
    fp64 launch config of a d_pad = 32 shape and of a d_pad = 128 one (the lift's halves apart)."""
    for K, d in ((32, 32), (16, 128)):
        rows = report_rows("--K", str(K), "--d", str(d), "--algorithm", algorithm, "--precision", "fp64")
        assert [r["kernel"] for r in rows] == (["one_pass"] if algorithm == "one_pass"
                                               else ["two_pass.normalizer", "two_pass.statistics"])
        for r in rows:
            assert "error" not in r, r
            assert r["precision"] == "fp64" and r["ptx_f64_mma"] > 0, r


@pytest.mark.parametrize("moments", ["center", "component"])
@pytest.mark.parametrize("algorithm, K", [("one_pass", 32), ("two_pass", 128)])
def test_full_covariance_kernels_compile_to_tensor_core_products(algorithm, K, moments):
    """--covariance full: kernels/full's kernels at their default config and at a --config one compile for sm_90
    within 255 registers with their products on the tensor cores, the statistics' slab sums as reductions (REDG) and
    the next row tile prefetched into L2 (CCTL.E.PF2); a COLS that is no power of two is an error
    row, not a crash."""
    names = ["full.one_pass"] if algorithm == "one_pass" else ["full.two_pass.normalizer", "full.two_pass.statistics"]
    rows = report_rows("--covariance", "full", "--K", str(K), "--d", "32", "--algorithm", algorithm, "--moments",
                       moments, "--config", "block_n=64,num_stages=2", "--config", "cols=48")
    assert [r["kernel"] for r in rows] == names * 3
    compiled, configured, failed = rows[: len(names) * 2], rows[len(names): len(names) * 2], rows[len(names) * 2:]
    assert all(r["block_n"] == 64 and r["num_stages"] == 2 for r in configured), configured
    for r in compiled:
        assert "error" not in r, r
        assert r["moments"] == moments and r["dataflow"] == "products", r
        assert 0 < r["registers"] <= 255 and r["shared_bytes"] > 0 and r["programs_per_sm"] >= 1, r
        assert r["sass_tensor_core_ops"] > 0, r
        if r["kernel"] != "full.two_pass.normalizer":  # the statistics kernels: slab sums and the X prefetch
            ops = r["sass_atomics_and_barriers"]
            assert any(op.startswith("REDG.E.ADD.F32") for op in ops), ops  # fire-and-forget, no load of the slab
            assert "CCTL.E.PF2" in ops, ops  # the next row tile's X asked of L2
    assert all("power of 2" in r["error"] for r in failed), failed


def test_weights_compile_to_what_they_claim():
    """At 20M_32_16's (K, d): the score's weight columns, stored K-major, go to shared memory by stmatrix (STSM),
    not by the scalar STS of a transpose that the H200 counted 8-way bank-conflicted
    (results/h200/ncu/ncu_full_one_pass_20M.*); resident weights (the default there) hold all of them in shared
    memory (8 K_pad d_pad^2 bytes more), within 255 registers and no spills."""
    default, reloaded, resident = report_rows("--covariance", "full", "--K", "32", "--d", "16", "--algorithm",
                                              "one_pass", "--config", "resident_weights=0",
                                              "--config", "resident_weights=1")
    stores = dict(kind.split(" ") for kind in reloaded["sass_shared_stores"].split(", "))
    assert int(stores["STSM"]) >= 4 and reloaded["sass_tensor_core_ops"] > 0, reloaded
    assert resident["shared_bytes"] >= reloaded["shared_bytes"] + 8 * 32 * 16 * 16, resident
    assert "error" not in resident and resident["registers"] <= 255 and resident["stack_bytes"] == 0, resident
    assert default["shared_bytes"] == resident["shared_bytes"], default
