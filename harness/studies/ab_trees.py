"""A/B of commits on one GPU in one call: the same study run from each commit's tree, in an order that cancels drift.

    python -m harness.studies.ab_trees pack 6dda372 HEAD [--dir .ab]          (here, in the git checkout)
    python -m harness.studies.ab_trees run [--dir .ab] --out FILE.csv [--repeats 2] -- 20M_32_32 --precision fp64
                                                                                (on the GPU machine)

``pack`` writes a ``git archive`` of each commit's code (what the studies import: kernels, harness, arms, gate,
conf, ...) into ``--dir`` with a manifest; a GPU machine gets no ``.git``, so the trees travel as those files.
``run`` unpacks each tree and runs ``python -m harness.studies.measure ARGS`` (``--module`` another study that takes
``--out``) from it, ``TURBO_GMM_COMMIT`` set to its commit, in ABBA order over ``--repeats`` rounds (A B, then
B A, ...): the 2026-12-05 A/B on the H200 timed the base tree first in both of its rounds, and the same tree moved
by up to 22% between them at K = 32 (kernel_measure/ab_ws_lanes_fp64_gather_2026-12-05_ba00fcb.csv), more than the
difference it was after, so a fixed order can pass drift off as a speed-up. Every row
gets ``tree`` (the commit), ``round`` and ``position``; the CSV is rewritten after each study, so a call cut by
its time limit still returns what ran.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.results import write_diagnostic_csv

CODE = ("kernels", "harness", "arms", "gate", "conf", "figures", "hydra_plugins", "conftest.py", "pyproject.toml",
        "Makefile")
MANIFEST = "trees.json"


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def pack(commits: list[str], out_dir: Path, repo: Path = Path(".")) -> list[dict]:
    """A ``git archive`` of each commit's code paths (those it has) into ``out_dir``, and the manifest
    ``trees.json``: [{"commit": short hash, "tar": file name}] in the order given."""
    out_dir.mkdir(parents=True, exist_ok=True)
    trees = []
    for ref in commits:
        commit = _git("rev-parse", "--short", ref, cwd=repo)
        present = set(_git("ls-tree", "--name-only", commit, cwd=repo).splitlines())
        paths = [p for p in CODE if p in present]
        if not paths:
            raise ValueError(f"commit {commit} has none of {CODE}")
        tar = f"{commit}.tar"
        with open(out_dir / tar, "wb") as f:
            subprocess.run(["git", "archive", commit, *paths], cwd=repo, stdout=f, check=True)
        trees.append({"commit": commit, "tar": tar})
    (out_dir / MANIFEST).write_text(json.dumps(trees, indent=1) + "\n")
    return trees


def schedule(n_trees: int, repeats: int) -> list[tuple[int, int, int]]:
    """(round, position, tree index) in ABBA order: even rounds in the manifest's order, odd rounds reversed."""
    order = []
    for r in range(repeats):
        idx = list(range(n_trees)) if r % 2 == 0 else list(reversed(range(n_trees)))
        order += [(r, pos, i) for pos, i in enumerate(idx)]
    return order


def run(pack_dir: Path, out: Path, study_args: list[str], repeats: int = 2, module: str = "harness.studies.measure",
        python: str = sys.executable, timeout_s: float | None = None) -> list[dict]:
    """Each tree of ``pack_dir``'s manifest unpacked and ``python -m MODULE STUDY_ARGS --out tmp.csv`` run from it
    in :func:`schedule`'s order; the rows, each with tree, round and position, rewritten to ``out`` after every
    study. A study that fails adds one row with its error (its last stderr line) and the rounds go on."""
    trees = json.loads((pack_dir / MANIFEST).read_text())
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        roots = []
        for t in trees:
            root = Path(tmp) / t["commit"]
            root.mkdir()
            with tarfile.open(pack_dir / t["tar"]) as tf:
                tf.extractall(root, filter="data")
            roots.append(root)
        for rnd, pos, i in schedule(len(trees), repeats):
            commit, root = trees[i]["commit"], roots[i]
            part = Path(tmp) / f"{commit}_{rnd}.csv"
            env = {**os.environ, "TURBO_GMM_COMMIT": commit}
            tag = {"tree": commit, "round": rnd, "position": pos}
            print(f"[ab_trees] round {rnd} position {pos}: {commit}: python -m {module} {' '.join(study_args)}",
                  flush=True)
            try:
                p = subprocess.run([python, "-m", module, *study_args, "--out", str(part)], cwd=root, env=env,
                                   capture_output=True, text=True, timeout=timeout_s)
                sys.stdout.write(p.stdout)
                if p.returncode != 0 or not part.exists():
                    last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
                    rows.append({**tag, "error": last[:300]})
                else:
                    with open(part, newline="") as f:
                        rows += [{**tag, **r} for r in csv.DictReader(f)]
            except subprocess.TimeoutExpired:
                rows.append({**tag, "error": f"timed out after {timeout_s} s"})
            write_diagnostic_csv(out, rows)
    return rows


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    study_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="git archive of each commit into --dir (run in the checkout)")
    pk.add_argument("commits", nargs="+")
    pk.add_argument("--dir", type=Path, default=Path(".ab"))
    rn = sub.add_parser("run", help="the study from each packed tree in ABBA order (run on the GPU machine)")
    rn.add_argument("--dir", type=Path, default=Path(".ab"))
    rn.add_argument("--out", type=Path, required=True)
    rn.add_argument("--repeats", type=int, default=2)
    rn.add_argument("--module", default="harness.studies.measure")
    rn.add_argument("--timeout-s", type=float, default=None, help="per study run")
    a = p.parse_args(argv)
    if a.command == "pack":
        for t in pack(a.commits, a.dir):
            print(f"{a.dir / t['tar']}: {t['commit']}")
    else:
        if not study_args:
            p.error("run needs the study's arguments after --, e.g. -- 20M_32_32 --precision fp64")
        run(a.dir, a.out, study_args, a.repeats, a.module, timeout_s=a.timeout_s)


if __name__ == "__main__":
    main()
