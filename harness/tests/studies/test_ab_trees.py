"""harness.studies.ab_trees: trees packed from a git repository's commits, the study run from each in ABBA order
with its commit in TURBO_GMM_COMMIT, the rows tagged, a failing study a row of its own."""
import csv
import subprocess
import sys
import tarfile

import pytest

from harness.studies import ab_trees

STUDY = '''import argparse, csv, os, sys
p = argparse.ArgumentParser(); p.add_argument("shape"); p.add_argument("--out")
a = p.parse_args()
if VERSION == "broken":
    sys.exit("no kernel for " + a.shape)
with open(a.out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["shape", "version", "commit_seen"])
    w.writerow([a.shape, VERSION, os.environ["TURBO_GMM_COMMIT"]])
'''


def _commit(repo, version):
    (repo / "harness").mkdir(exist_ok=True)
    (repo / "harness" / "__init__.py").write_text("")
    (repo / "harness" / "fake_study.py").write_text(f"VERSION = {version!r}\n" + STUDY)
    (repo / "notes.txt").write_text(version)  # not code: not packed
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", version], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


def test_schedule_is_abba():
    assert [i for _, _, i in ab_trees.schedule(2, 4)] == [0, 1, 1, 0, 0, 1, 1, 0]
    assert [(r, p) for r, p, _ in ab_trees.schedule(3, 2)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_pack_and_run_in_abba_order(repo, tmp_path):
    old = _commit(repo, "old")
    new = _commit(repo, "new")
    trees = ab_trees.pack([old, "HEAD"], tmp_path / "ab", repo=repo)
    assert [t["commit"] for t in trees] == [old, new]
    with tarfile.open(tmp_path / "ab" / trees[0]["tar"]) as tf:
        assert "harness/fake_study.py" in tf.getnames() and "notes.txt" not in tf.getnames()
    out = tmp_path / "ab.csv"
    rows = ab_trees.run(tmp_path / "ab", out, ["1M_32_32"], repeats=2, module="harness.fake_study",
                        python=sys.executable)
    with open(out, newline="") as f:
        written = list(csv.DictReader(f))
    assert [(r["tree"], r["version"], r["commit_seen"]) for r in written] == [
        (old, "old", old), (new, "new", new), (new, "new", new), (old, "old", old)]
    assert [r["round"] for r in written] == ["0", "0", "1", "1"] and len(rows) == 4


def test_a_failing_study_is_a_row_and_the_rounds_go_on(repo, tmp_path):
    good = _commit(repo, "good")
    broken = _commit(repo, "broken")
    ab_trees.pack([good, broken], tmp_path / "ab", repo=repo)
    rows = ab_trees.run(tmp_path / "ab", tmp_path / "ab.csv", ["1M_32_32"], repeats=1, module="harness.fake_study",
                        python=sys.executable)
    assert rows[0]["tree"] == good and rows[0]["version"] == "good"
    assert rows[1]["tree"] == broken and rows[1]["error"] == "no kernel for 1M_32_32"
