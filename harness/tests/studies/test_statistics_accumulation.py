"""harness.studies.statistics_accumulation's plan on the CPU (no kernel runs)."""
import triton

def test_the_studys_warm_size_specializes_the_kernel_arguments_as_the_full_size():
    """harness.studies.statistics_accumulation compiles each shape's kernels at a small N first (in parallel);
    that fills Triton's cache only if every integer argument falls in the same specialization class (== 1,
    divisible by 16, neither) as at the full N, and the persistent grids are as large."""
    from harness.studies.statistics_accumulation import PLAN, warm_rows
    from harness.studies.measure import parse_shape

    def classes(N):
        counts = [N] + [triton.cdiv(N, rows) for rows in (32, 64, 256)]
        return [(c == 1, c % 16 == 0) for c in counts]

    for shape, _, _ in PLAN:
        N = parse_shape(shape)[0]
        warm = warm_rows(N)
        assert warm < 200_000 and classes(warm) == classes(N), shape
        assert triton.cdiv(warm, 64) >= 2112  # 16 programs per SM x 132 SMs: the pass-2 grid of the full size
