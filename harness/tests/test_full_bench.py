"""harness.studies.full_bench without a GPU: its float64 reference step, the variants' plumbing (tiny
shapes through the Triton interpreter), the roofline and the rule it reads off the rows."""
import numpy as np
import pytest
import torch

from turbo_gmm.datasets import make_dataset
from harness.studies import full_bench as fb
from turbo_gmm.full import reference as rf
from turbo_gmm import dispatch


def test_parse_shape_and_roofline():
    assert fb.parse_shape("20M_32_16") == (20_000_000, 32, 16)
    assert fb.parse_shape("1M_256_16") == (1_000_000, 256, 16)
    # 1M_32_32 full at tf32x3: 2 N K d (d + 1) = 6.76e10 FLOP at 132 TFLOP/s, compute bound
    assert fb.roofline_ms("full", "tf32x3", 10**6, 32, 32) == pytest.approx(1e3 * 2 * 10**6 * 32 * 32 * 33 / 132e12)
    assert fb.roofline_ms("diag", "tf32x3", 10**6, 1, 1) == pytest.approx(1e3 * 4 * 10**6 / 4.3e12)  # HBM bound


def test_reference_step_is_float64_em():
    X = make_dataset(500, 3, 4, 0).X
    w, m, U, U_tied, v = fb.initial_parameters(X, 3, 0)
    ell, weights, means, cov = fb.reference_step(X, w, m, U, "full", 1e-6, chunk_elems=100)
    (rw, rm, rc, _), (rll,) = rf.em_full(X.numpy(), w.numpy(), m.numpy(), U.numpy(), 1)
    np.testing.assert_allclose([float(ell)], [rll], rtol=1e-12)
    np.testing.assert_allclose(cov.numpy(), rc, rtol=1e-10, atol=1e-14)
    ell, weights, means, cov = fb.reference_step(X, w, m, U_tied.expand(3, 4, 4), "tied", 1e-6)
    (rw, rm, rc, _), (rll,) = rf.em_tied(X.numpy(), w.numpy(), m.numpy(), U_tied.numpy(), 1)
    np.testing.assert_allclose(cov.numpy(), rc, rtol=1e-10, atol=1e-14)
    _, _, _, var = fb.reference_step(X, w, m, U, "diag", 1e-6)
    assert var.shape == (3, 4)


@pytest.mark.parametrize("variant", [
    fb.Variant("full", "lift", "one_pass", "tf32x3", torch.float32, "center"),
    fb.Variant("full", "products", "two_pass", "tf32x3", torch.float32, "center"),
    fb.Variant("full", "products", "one_pass", "tf32x3", torch.float32, "component"),
    fb.Variant("full", "products", "one_pass", "tf32x3", torch.float32, "center", "block_n=64,num_warps=8"),
    fb.Variant("tied", "whitened", "two_pass", "tf32x3"), fb.Variant("diag", "lift", "auto", "tf32x3"),
    fb.Variant("full", "direct", "torch_float64", "fp64"), fb.Variant("tied", "direct", "torch_float64", "fp64")],
    ids=str)
def test_every_variant_runs_and_is_accurate(variant):
    X = make_dataset(300, 3, 5, 1, "cuda" if torch.cuda.is_available() else "cpu").X  # the kernels' device
    params = fb.initial_parameters(X, 3, 1)
    U = params[3].expand(3, 5, 5) if variant.covariance == "tied" else params[2]
    ref = fb.reference_step(X, params[0], params[1], U, variant.covariance, 1e-6)
    errs = fb.accuracy(variant, X, params, ref)
    assert max(errs) < (1e-12 if variant.precision == "fp64" else 1e-5), errs


def test_variants_time_the_float64_e_step_only_where_it_fits():
    """The float64 E-step (what precision="auto" takes for small full and tied fits) runs beside the kernels up to
    FLOAT64_MAX_WORK of N K d^2; the configs given apply to the rule's choice."""
    small = fb.variants(20_000, 16, 32, ["tf32x3"], False, ["block_n=64"])
    assert {v.covariance for v in small if v.algorithm == "torch_float64"} == {"full", "tied"}
    assert [v.config for v in small if v.config] == ["block_n=64"]
    assert not any(v.algorithm == "torch_float64" for v in fb.variants(20_000_000, 32, 16, ["tf32x3"], False))


def test_configs_only_is_the_rule_s_choice_with_and_without_each_config():
    """An A/B of FullConfig fields: the default config first, then each given one, at the rule's choice only."""
    ab = fb.variants(1_000_000, 128, 32, ["tf32x3"], True, ["resident_weights=1", "num_stages=2"], configs_only=True)
    assert [v.config for v in ab] == ["", "resident_weights=1", "num_stages=2"]
    assert {(v.covariance, v.dataflow, v.algorithm, v.moments, v.slab_dtype) for v in ab} == {
        ("full", dispatch.full_dataflow(32), dispatch.full_algorithm(128, 32), "center", torch.float32)}


def test_implied_rule_reads_the_thresholds_off_the_rows():
    def row(shape, dataflow, algorithm, ms):
        return {"shape": shape, "covariance": "full", "status": "ok", "slab_dtype": "float32", "dataflow": dataflow,
                "algorithm": algorithm, "moments": "center", "config": "", "ms_per_iter": str(ms)}
    rows = [row("1M_16_16", "products", "one_pass", 1.0), row("1M_16_16", "lift", "two_pass", 2.0),
            row("1M_128_32", "lift", "two_pass", 1.0), row("1M_128_32", "products", "one_pass", 3.0),
            row("1M_128_32", "products", "two_pass", 2.0)]
    assert fb.implied_rule(rows) == (16 * 16 * 16, True, 32, True)
    lift_fastest = rows[:4] + [row("1M_128_32", "products", "two_pass", 4.0)]  # the algorithms compared in the
    assert fb.implied_rule(lift_fastest)[0] == 128 * 32 * 32  # products: the lift's 1.0 is no default's time
    component = dict(row("1M_128_32", "products", "one_pass", 0.1), moments="component")
    assert fb.implied_rule(rows + [component]) == (16 * 16 * 16, True, 32, True)  # the fallback is no rule's row
    rows.append(row("1M_1024_8", "products", "one_pass", 0.5))  # one pass wins above a two-pass win
    assert fb.implied_rule(rows)[1] is False
