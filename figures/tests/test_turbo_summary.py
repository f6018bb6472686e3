"""figures.turbo_summary: the runner-up ignores rejected fits and this project's own arms (Turbo-GMM at fp64),
a faster valid arm is counted against Turbo-GMM, and the median over Flash-GMM uses only shapes where both
fits are valid."""
import json

import pytest

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
    assert totals == {"shapes": 3, "contested": 3, "fastest": 2, "median_over_flash": 3.5, "flash_shapes": 2,
                      "rates": {"tf32_tflops": 396.0, "hbm_read_gb_per_s": 4300.0,
                                "source": "issue 23's H200 figures"}}
    md = turbo_summary.render(csv)[0].read_text()
    floor_b = max(8 * 2000 * 16 * 8 * 3 / 396e12, 2000 * 8 * 4 / 4.3e12) * 1e3  # issue 23's roofline, ms
    assert abs(by["B"]["roofline"] - floor_b / 1.0) < 1e-12
    assert f"| B | 1.000 | {floor_b:.0%} | PyTorch 0.900 | 0.90× | 0.800 (rejected) | 0.80× |" in md
    assert "fastest valid fit at 2 of the 3 shapes where another system's fit is valid" in md
    assert "3.50× over 2 shapes" in md


def test_roofline_at_the_devices_probed_rates_and_uncontested_shapes(tmp_path):
    """With env.json probes the roofline is the device's own (here HBM-bound), and a shape where no other
    system's fit is valid counts neither for Turbo-GMM nor against it."""
    rows = [record("table1", "turbo_gmm", "A", 10**6, 2, 32, 0.1), record("table1", "pytorch", "A", 10**6, 2, 32, 0.2),
            record("table1", "turbo_gmm", "B", 10**6, 64, 32, 1.0),
            record("table1", "pytorch", "B", 10**6, 64, 32, 0.5, gate="rejected (non-finite LL)")]
    csv = write_experiment(tmp_path / "dev", "table1", rows)
    (csv.parent / "env.json").write_text(json.dumps({"probes": {"tf32_tflops": 200.0, "hbm_read_gb_per_s": 2000.0}}))
    summary, totals = turbo_summary.summarize(csv.parent)
    by = {r["shape"]: r for r in summary}
    assert by["A"]["roofline"] == pytest.approx(10**6 * 32 * 4 / 2e12 * 1e3 / 0.1)  # reading X at 2 TB/s
    assert by["B"]["roofline"] == pytest.approx(8 * 10**6 * 64 * 32 * 3 / 200e12 * 1e3 / 1.0)
    assert by["B"]["ratio"] is None and (totals["contested"], totals["fastest"]) == (1, 1)
    md = turbo_summary.markdown(summary, totals)
    assert "fastest valid fit at 1 of the 1 shapes where another system's fit is valid (2 shapes in all)" in md
    assert "200 TF32 TFLOP/s" in md and "2.00 TB/s of HBM read (env.json probes)" in md
