"""harness.studies.statistics_accumulation on the CPU (no kernel runs): its warm-up compile matches the full
size's specializations and its "before" column reads the committed run."""
import pytest
import triton

from harness.studies import statistics_accumulation as study
from harness.studies.measure import parse_shape


def test_the_studys_warm_size_specializes_the_kernel_arguments_as_the_full_size():
    """The study compiles each shape's kernels at a small N first (in parallel); that fills Triton's cache only
    if every specialized integer argument falls in the same class (== 1, divisible by 16, neither) as at the
    full N (the grids' sizes are not specialized on: kernels/diag/one_pass.py, two_pass.py)."""

    def classes(N):
        counts = [N] + [triton.cdiv(N, rows) for rows in (32, 64, 256)]
        return [(c == 1, c % 16 == 0) for c in counts]

    for shape in study.ACCURACY_SHAPES + study.TIMING_SHAPES + study.shape_list("table1"):
        N = parse_shape(shape)[0]
        warm = study.warm_rows(N)
        assert warm < 200_000 and classes(warm) == classes(N), shape


def test_table1_shapes_are_the_sweeps_and_100m_rows():
    """--accuracy-shapes table1 (issue 21's table): Table 1's sixteen shapes as its Hydra config sweeps them, then
    100M rows; an empty list skips a part."""
    from omegaconf import OmegaConf

    shapes = study.shape_list("table1")
    sweep = OmegaConf.load(study.REPO / "conf/experiment/table1.yaml").hydra.sweeper.params.shape.split(",")
    assert len(sweep) == 16 and shapes == (*sweep, "100M_32_32")
    assert study.shape_list("") == () and study.shape_list("1M_32_32,4M_16_128") == ("1M_32_32", "4M_16_128")


def test_before_is_the_committed_runs_program_accumulation():
    """The committed 2026-12-01 run (1882514) measured the tensor cores' accumulation at 4.1347 ms/iter at
    20M_32_32 and 18.5486 at 1M_4096_32; shapes it did not time have no "before"."""
    assert study.before_ms("20M_32_32") == pytest.approx(4.1347)
    assert study.before_ms("1M_4096_32") == pytest.approx(18.5486)
    assert study.before_ms("1M_128_32") is None
