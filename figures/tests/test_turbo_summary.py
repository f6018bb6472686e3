"""figures.turbo_summary: the runner-up ignores rejected fits and this project's own arms (Turbo-GMM at fp64),
a faster valid arm is counted against Turbo-GMM, and the median over Flash-GMM uses only shapes where both
fits are valid."""
from figures import turbo_summary
from figures.tests.conftest import record, write_experiment


def test_runner_up_ratio_and_median_over_flash(tmp_path):
    rows = [  # shape A: a rejected faster fit is no runner-up
        record("table1", "turbo_gmm", "A", 1000, 16, 8, 1.0), record("table1", "flash_gmm", "A", 1000, 16, 8, 3.0),
        record("table1", "pytorch", "A", 1000, 16, 8, 0.5, gate="rejected (non-finite LL)"),
        record("table1", "sklearn", "A", 1000, 16, 8, 2.0),
        record("table1", "turbo_gmm_fp64", "A", 1000, 16, 8, 0.7),  # ours, at another precision: no runner-up
        # shape B: a valid arm beats Turbo-GMM; Flash-GMM's fit is rejected, so B leaves the median
        record("table1", "turbo_gmm", "B", 2000, 16, 8, 1.0),
        record("table1", "flash_gmm", "B", 2000, 16, 8, 0.8, gate="rejected (sum(pi)=1.007)"),
        record("table1", "pytorch", "B", 2000, 16, 8, 0.9),
        record("table1", "turbo_gmm", "C", 3000, 16, 8, 1.0), record("table1", "flash_gmm", "C", 3000, 16, 8, 4.0)]
    csv = write_experiment(tmp_path / "dev", "table1", rows)
    summary, totals = turbo_summary.summarize(csv.parent)
    by = {r["shape"]: r for r in summary}
    assert by["A"]["runner_up"] == "scikit-learn" and abs(by["A"]["ratio"] - 2.0) < 1e-9
    assert abs(by["A"]["flash_ratio"] - 3.0) < 1e-9
    assert by["B"]["runner_up"] == "PyTorch" and abs(by["B"]["ratio"] - 0.9) < 1e-9
    assert totals == {"shapes": 3, "fastest": 2, "median_over_flash": 3.5, "flash_shapes": 2}
    md = turbo_summary.render(csv)[0].read_text()
    floor_b = max(8 * 2000 * 16 * 8 * 3 / 396e12, 2000 * 8 * 4 / 4.3e12) * 1e3  # issue 23's roofline, ms
    assert abs(by["B"]["roofline"] - floor_b / 1.0) < 1e-12
    assert f"| B | 1.000 | {floor_b:.0%} | PyTorch 0.900 | 0.90× | 0.800 (rejected) | 0.80× |" in md
    assert "fastest valid fit at 2 of 3 shapes" in md and "3.50× over 2 shapes" in md
