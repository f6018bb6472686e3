"""harness.studies.full_bench without a GPU: its float64 reference step, the variants' plumbing (tiny
shapes through the Triton interpreter), the roofline and the rule it reads off the rows."""
import numpy as np
import pytest
import torch

from kernels.datasets import make_dataset
from harness.studies import full_bench as fb
from kernels import reference_full as rf


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


@pytest.mark.parametrize("covariance,dataflow,algorithm,moments", [
    ("full", "lift", "one_pass", "center"), ("full", "products", "two_pass", "center"),
    ("full", "products", "one_pass", "component"), ("tied", "whitened", "two_pass", ""), ("diag", "lift", "auto", "")])
def test_every_variant_runs_and_is_accurate(covariance, dataflow, algorithm, moments):
    X = make_dataset(300, 3, 5, 1, "cuda" if torch.cuda.is_available() else "cpu").X  # the kernels' device
    params = fb.initial_parameters(X, 3, 1)
    U = params[3].expand(3, 5, 5) if covariance == "tied" else params[2]
    ref = fb.reference_step(X, params[0], params[1], U, covariance, 1e-6)
    errs = fb.accuracy(covariance, dataflow, algorithm, "tf32x3", torch.float32, moments, X, params, ref)
    assert max(errs) < 1e-5, errs


def test_implied_rule_reads_the_thresholds_off_the_rows():
    def row(shape, dataflow, algorithm, ms):
        return {"shape": shape, "covariance": "full", "status": "ok", "slab_dtype": "float32", "dataflow": dataflow,
                "algorithm": algorithm, "moments": "center", "ms_per_iter": str(ms)}
    rows = [row("1M_16_16", "products", "one_pass", 1.0), row("1M_16_16", "lift", "two_pass", 2.0),
            row("1M_128_32", "lift", "two_pass", 1.0), row("1M_128_32", "products", "one_pass", 3.0)]
    assert fb.implied_rule(rows) == (16 * 16 * 16, True, 32, True)
    component = dict(row("1M_128_32", "products", "one_pass", 0.1), moments="component")
    assert fb.implied_rule(rows + [component]) == (16 * 16 * 16, True, 32, True)  # the fallback is no rule's row
    rows.append(row("1M_1024_8", "products", "one_pass", 0.5))  # one pass wins above a two-pass win
    assert fb.implied_rule(rows)[1] is False
