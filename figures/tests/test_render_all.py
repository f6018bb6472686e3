"""render_all: one empty or unreadable CSV is skipped with a line, never the folders after it (issue 47, 4)."""
import numpy as np

from figures import render_all
from harness.results import COLUMNS, collect, write_json_atomic, write_npz_atomic
from figures.tests.conftest import record


def _good(folder):
    for arm, ms in (("turbo_gmm", 1.0), ("pytorch", 2.0)):
        r = record("smoke", arm, "tiny_7_5", 1023, 7, 5, ms, regimes="tiny")
        write_json_atomic(folder / "smoke" / "cells" / f"{arm}.json", dict(r, params_file=f"cells/{arm}.npz"))
        write_npz_atomic(folder / "smoke" / "cells" / f"{arm}.npz", labels=np.zeros(8, np.int32))
    return collect(folder / "smoke", ["turbo_gmm", "pytorch"])


def test_empty_and_garbage_csvs_are_skipped_and_the_rest_rendered(tmp_path, capsys):
    """A header-only smoke.csv made fig1_latency raise ("number sections must be larger than 0"), a table1.csv of
    bytes that are not UTF-8 raised UnicodeDecodeError: either stopped every device folder after it."""
    a, b = tmp_path / "a_dev", tmp_path / "b_dev"
    a.mkdir()
    (a / "smoke.csv").write_text(",".join(COLUMNS) + "\n")  # header only
    (a / "table1.csv").write_bytes(bytes(range(128, 256)) * 4)  # not UTF-8
    (a / "e2e.csv").write_text("what,ever\n1,2\n")  # text, not a results CSV
    _good(b)
    assert render_all.main([str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert f"{a / 'smoke.csv'}: skipped: no rows" in err
    assert f"{a / 'table1.csv'}: skipped: unreadable (UnicodeDecodeError" in err
    assert f"{a / 'e2e.csv'} (figures.table_e2e): not rendered (KeyError" in err
    assert f"{a}: claims skipped: unusable table1.csv" in err
    assert str(b / "smoke_table1.md") in out and str(b / "smoke_fig1_latency.png") in out
    assert (b / "smoke_fig1_latency.pdf").exists() and not (a / "smoke_table1.md").exists()


def test_a_renderer_that_fails_on_its_csv_is_named_and_the_rest_rendered(tmp_path):
    _good(tmp_path / "dev")
    (tmp_path / "dev" / "ablation.csv").write_text((tmp_path / "dev" / "smoke.csv").read_text())  # no rung rows
    said = []
    paths = {p.name for p in render_all.render_folder(tmp_path / "dev", said.append)}
    assert {"smoke_table1.md", "smoke_fig1_latency.png"} <= paths
    assert any("ablation.csv (figures.fig2_ablation): not rendered (ValueError" in s for s in said)
