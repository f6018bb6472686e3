"""harness.rekey: a record named the old way gets its spec's key, and only if it matches its spec."""
import json
import shutil

import pytest

from harness import rekey
from harness.results import read_csv
from harness.tests.conftest import REPO

H200 = REPO / "results" / "h200"


def _old_style(committed, device_dir, old_stem, **changed):
    """The committed record as it was before the cell spec: its old name, no spec."""
    rec = json.loads(committed.read_text())
    for k in ("spec", "cell", "reg_covar", "ari_rows"):
        rec.pop(k)
    cells = device_dir / rec["experiment"] / "cells"
    cells.mkdir(parents=True, exist_ok=True)
    shutil.copy(committed.with_suffix(".npz"), cells / f"{old_stem}.npz")
    rec.update(params_file=f"cells/{old_stem}.npz", **changed)
    (cells / f"{old_stem}.json").write_text(json.dumps(rec))
    return cells / f"{old_stem}.json"


def _committed(experiment, **fields):
    for path in sorted((H200 / experiment / "cells").glob("*.json")):
        rec = json.loads(path.read_text())
        if all(rec["spec"][k] == v for k, v in fields.items()):
            return path


def test_old_names_become_the_committed_keys(tmp_path):
    table1 = _committed("table1", arm="cuvs", shape="1M_32_32")
    dispatch = next(p for p in (H200 / "dispatch" / "cells").glob("*.json")
                    if json.loads(p.read_text())["spec"]["options"]["algorithm"] == "one_pass"
                    and json.loads(p.read_text()).get("params_file"))
    d = json.loads(dispatch.read_text())
    old = [_old_style(table1, tmp_path / "h200", "cuvs__1M_32_32"),
           _old_style(dispatch, tmp_path / "h200", f"turbo_gmm__dispatch_1M__N{d['N']}_K{d['K']}_d{d['d']}"
                                                   "__algorithm=one_pass")]
    assert rekey.main([str(tmp_path / "h200")]) == 0
    for committed, before in zip((table1, dispatch), old):
        new = before.parent / committed.name
        assert not before.exists() and new.exists() and new.with_suffix(".npz").exists()
        rec = json.loads(new.read_text())
        assert rec["spec"] == json.loads(committed.read_text())["spec"] and rec["params_file"] == f"cells/{new.stem}.npz"
    (row,) = read_csv(tmp_path / "h200" / "table1.csv")
    assert row["cell"] == table1.stem and row["reg_covar"] == "1e-06" and row["gate"] == "valid"


@pytest.mark.parametrize("shape, evidence", [
    ("1M_32_32", "its saved subsample rows are not label_rows(N, seed=1, ari_rows=20000)"),
    ("20K_16_32", "its data_checksum {checksum} is not seed 1's"),  # N <= ari_rows: every row is labelled
])
def test_a_record_that_contradicts_its_spec_is_left_as_it_is(tmp_path, capsys, shape, evidence):
    """seed 1 in the record, but what it saved is seed 0's: not the cell it says it is."""
    committed = _committed("table1", arm="pytorch", shape=shape)
    old = _old_style(committed, tmp_path / "h200", f"pytorch__{shape}", seed=1)
    assert rekey.main([str(tmp_path / "h200")]) == 1
    checksum = json.loads(committed.read_text())["data_checksum"]
    assert old.exists() and evidence.format(checksum=checksum) in capsys.readouterr().err
