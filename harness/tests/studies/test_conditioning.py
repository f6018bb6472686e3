"""The Appendix C case study: the lifted score loses about a decade of accuracy per decade
of offset against the centered form; its CSV carries every offset."""
import csv
import math

from harness.studies import conditioning


def test_lifted_error_grows_a_decade_per_decade_and_centered_does_not(tmp_path):
    rows = conditioning.case_study(N=300, K=5, d=64)
    assert [r["offset"] for r in rows] == list(conditioning.OFFSETS)
    ratio = {r["offset"]: r["lifted_over_centered"] for r in rows}
    slope = (math.log10(ratio[1e5]) - math.log10(ratio[1e1])) / 4
    assert 0.7 <= slope <= 1.3, ratio
    assert rows[0]["err_centered"] < 1e-6 and rows[0]["err_lifted"] < 1e-5  # at the origin both are float32-accurate
    assert rows[-1]["err_lifted"] > 1e3 * rows[-1]["err_centered"]
    out = conditioning.write_csv(rows, tmp_path / "conditioning.csv")
    got = list(csv.DictReader(open(out)))
    assert list(got[0]) == conditioning.COLUMNS and len(got) == len(conditioning.OFFSETS) and got[0]["git_commit"]
