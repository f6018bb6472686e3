"""A bounded, seeded fuzzing pass of the harness through its CLI (issue 47).

Random overrides of the shape (N, K, d: fine values and bad ones -- 0, negative, beyond int64, not integers),
the arm's settings, and the names and paths a run writes under (experiment_name, device_label, results_dir:
``..``, empty, absolute, a file, a folder that cannot be created) go through ``python -m harness`` as a
subprocess, on CPU arms at tiny sizes, into a scratch folder. Each run must either refuse -- exit 2, one line
``error: ...`` on stderr, nothing written -- or add exactly one row to one CSV under the scratch results folder,
whose N, K, d are the ones it ran; no run may write anywhere else. Afterwards ``figures.render_all`` renders the
scratch folder, and every smoke/table1 CSV gets its table, one line per row.

Bounded for ``make test``: eleven runs (a refusal costs one Hydra start, a cell a worker too), derandomized
(a fixed seed: the same cases on every machine), no shrinking (each example is a subprocess), every case printed.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from harness.results import read_csv
from harness.tests.conftest import REPO

ESCAPE = "fz_escape_47"  # a name no run may create outside the scratch folder
BAD_SIZES = ["0", "-3", "1.5", "abc", "99999999999999999999999", "9223372036854775808", "true", "''"]
BAD = {
    "shape.N": BAD_SIZES, "shape.K": BAD_SIZES + ["5000"], "shape.d": BAD_SIZES,
    "arm.reps": ["0", "-1", "x", "2.5"], "n_iter": ["0", "-2", "1.5"], "arm.timeout_s": ["0", "-1", "inf"],
    "experiment_name": [f"../{ESCAPE}", "a/b", "..", "''", ".hidden", f"x/../../{ESCAPE}"],
    "device_label": [f"../../{ESCAPE}", f"/tmp/{ESCAPE}", "a/b", ".."],
    "results_dir": ["''", f"../{ESCAPE}", ".", str(REPO.parent), "{scratch}/a_file/res", "/proc/fz_47"],
}


@st.composite
def cases(draw):
    """One run's overrides: all fine, or fine but for one or two bad settings."""
    o = {"arm": draw(st.sampled_from(["sklearn", "pytorch"])), "n_iter": str(draw(st.integers(1, 2))),
         "arm.reps": "1", "experiment_name": draw(st.sampled_from(["smoke", "table1", "fz_1", "a.b-c"])),
         "device_label": draw(st.sampled_from(["dev", "dev2"])),
         "results_dir": draw(st.sampled_from(["{scratch}/res", "{scratch}/res/sub/../"]))}
    N = draw(st.one_of(st.none(), st.integers(8, 3000)))
    if N is not None:
        o["shape.N"] = str(N)
    K = draw(st.integers(1, 8))
    o["shape.K"], o["shape.d"] = str(K), str(draw(st.integers(1, 8)))
    if draw(st.booleans()):  # a bad setting or two
        for key in draw(st.lists(st.sampled_from(sorted(BAD)), min_size=1, max_size=2, unique=True)):
            o[key] = draw(st.sampled_from(BAD[key]))
    return o


def _run(scratch: Path, o: dict, i: int) -> subprocess.CompletedProcess:
    args = [f"{k}={v.format(scratch=scratch)}" for k, v in o.items()]
    cmd = [sys.executable, "-m", "harness", f"hydra.run.dir={scratch / 'hydra' / str(i)}", "env_probes=false",
           "shape=tiny_7_5", f"seed={i}", *args]  # a seed per run: each run a cell of its own
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)


def _files(root: Path) -> set:
    return {p for p in root.rglob("*") if p.is_file() and "hydra" not in p.relative_to(root).parts[:1]}


def _rows(res: Path) -> dict:
    """{cell key: row} of every results CSV under ``res``."""
    return {r["cell"]: r for csv in res.glob("*/*.csv") for r in read_csv(csv)}


def _escaped(outside: Path, scratch: Path) -> list:
    """What a run wrote outside the scratch folder: under ``outside`` (the scratch folder sits four levels below
    it, so ``../`` names land there), or at the escape name beside the repository, in it, in /tmp or at /."""
    spots = [REPO.parent / ESCAPE, REPO / ESCAPE, Path("/tmp") / ESCAPE, Path("/") / ESCAPE]
    return [p for p in spots if p.exists()] + [p for p in outside.rglob("*") if scratch not in (p, *p.parents)
                                               and p not in scratch.parents]


def test_fuzzed_cli_runs_refuse_or_write_one_true_row_and_everything_renders(tmp_path):
    from figures import render_all

    scratch = tmp_path / "s1" / "s2" / "s3" / "s4"
    scratch.mkdir(parents=True)
    (scratch / "a_file").write_text("")
    res = scratch / "res"
    seen = []

    @settings(max_examples=5, derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(cases())
    # issue 47's own cases: the default tiny_7_5 and an override of its N into the same smoke folder; names and a
    # results_dir that reached outside it
    @example({"arm": "sklearn", "n_iter": "2", "arm.reps": "1", "experiment_name": "smoke", "device_label": "dev",
              "results_dir": "{scratch}/res"})
    @example({"arm": "pytorch", "n_iter": "2", "arm.reps": "1", "experiment_name": "smoke", "device_label": "dev",
              "results_dir": "{scratch}/res", "shape.N": "2000"})
    @example({"arm": "sklearn", "experiment_name": f"../../../{ESCAPE}", "results_dir": "{scratch}/res"})
    @example({"arm": "sklearn", "device_label": f"../../../{ESCAPE}", "results_dir": "''"})
    @example({"arm": "pytorch", "shape.N": "99999999999999999999999", "results_dir": "{scratch}/res"})
    @example({"arm": "sklearn", "results_dir": "{scratch}/a_file/res"})
    def one(o):
        i = len(seen)
        seen.append(o)
        before_files, before_rows = _files(scratch), _rows(res)
        p = _run(scratch, o, i)
        case = f"case {i}: {o}\nexit {p.returncode}\nstdout: {p.stdout[-1500:]}\nstderr: {p.stderr[-1500:]}"
        print(f"[fuzz] {i} exit {p.returncode}: {' '.join(f'{k}={v}' for k, v in o.items())}")
        assert not _escaped(tmp_path, scratch), case
        new_files = _files(scratch) - before_files
        if p.returncode == 2:
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), case
            assert not new_files, f"{case}\nwrote {sorted(map(str, new_files))}"
            return
        assert p.returncode == 0, case
        rows = _rows(res)
        new = [rows[k] for k in rows.keys() - before_rows.keys()]
        assert len(new) == 1, f"{case}\nnew rows {len(new)}"
        (row,) = new
        want = (int(o.get("shape.N", 1023)), int(o.get("shape.K", 7)), int(o.get("shape.d", 5)))
        assert (int(row["N"]), int(row["K"]), int(row["d"])) == want, case
        assert 1 <= want[1] <= want[0] and want[2] >= 1, case  # nothing impossible ran
        assert all(res in f.parents for f in new_files), case

    one()
    assert len(seen) >= 11  # the 6 explicit examples and 5 drawn

    assert render_all.main([str(res)]) == 0
    for csv in res.glob("*/*.csv"):
        rows = read_csv(csv)
        if csv.stem in ("smoke", "table1") and rows:
            md = csv.with_name("table1.md" if csv.stem == "table1" else "smoke_table1.md")
            body = [ln for ln in md.read_text().splitlines() if ln.startswith("| ")][2:]
            assert len(body) == len(rows), md.read_text()
