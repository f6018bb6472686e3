"""Rename cell records written before the cell spec to the spec's key, checked against what they ran.

    python -m harness.rekey results/h200 [--dry-run] [--env NAME=VALUE ...]

Such records are named ``<arm>__<shape>[__N<N>_K<K>_d<d>][__<option>=<value>...]`` and hold no
spec. For each one the cell's config is composed with Hydra from what the record says it ran (its
experiment, arm, shape and sizes, the options its name carries, seed, n_iter, reps and timeout),
and the spec is checked against the record: every field of the spec the record also holds, every
option the arm reported back in ``info``, and the saved subsample rows against
``label_rows(N, seed, ari_rows)`` (which pins seed and ari_rows when N > ari_rows; for smaller N,
whose rows are all of them, the data checksum pins the seed). Then the record, its .npz and .log
take the spec's key, the record gains ``spec``, ``cell``, ``reg_covar`` and ``ari_rows``, and each
experiment's CSV is re-collected. Those records did not store the code-affecting environment
(``code_env``): it is taken as empty, or as given by ``--env``. A record that does not match its
composed spec is reported and left as it is (exit 1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException

from gate.rescore import label_rows
from harness import results
from harness.cell import CellSpec
from turbo_gmm.datasets import make_dataset
from harness.runner import REPO


class Mismatch(Exception):
    """The record does not say what its composed spec says."""


def old_overrides(stem: str, rec: dict) -> list[str]:
    """Hydra overrides of the cell an old-style record ran."""
    arm, shape, *extra = stem.split("__")
    if (arm, shape) != (rec["arm"], rec["shape"]):
        raise Mismatch(f"its name says {arm} at {shape}, its fields {rec['arm']} at {rec['shape']}")
    options = [f"arm.options.{part}" for part in extra if "=" in part]  # the N.._K.._d.. part: sizes, below
    return [f"arm={arm}", f"shape={shape}", f"shape.N={rec['N']}", f"shape.K={rec['K']}", f"shape.d={rec['d']}",
            f"seed={rec['seed']}", f"n_iter={rec['n_iter']}", f"arm.reps={rec['reps']}",
            f"arm.timeout_s={rec['timeout_s']}", "timeout_scale=1", *options]


def composed_spec(experiment: str, overrides: list[str], environ: dict) -> tuple[CellSpec, list[str]]:
    """The spec (and the config's arm order) of the cell, composed under its experiment when that is
    an experiment config, else with its experiment_name."""
    try:
        cfg = compose("config", overrides=[f"experiment={experiment}", *overrides])
    except MissingConfigException:
        cfg = compose("config", overrides=[f"experiment_name={experiment}", *overrides])
    return CellSpec.from_cfg(cfg, environ=environ), list(cfg.arm_order)


def check(spec: CellSpec, rec: dict, cells: Path) -> None:
    """Raise :class:`Mismatch` where the record contradicts the spec."""
    row = spec.row()
    for k in ("experiment", "arm", "label", "shape", "N", "K", "d", "regimes", "seed", "numerics", "n_iter", "reps",
              "timeout_s"):
        if rec.get(k) != row[k]:
            raise Mismatch(f"{k}: the record says {rec.get(k)!r}, the composed spec {row[k]!r}")
    info = rec.get("info") or {}
    for k, v in spec.options:
        # the arm may refine the value ("tf32x3 score, fp32 statistics"), or report what "auto" chose
        if k in info and v != "auto" and not str(info[k]).startswith(str(v)):
            raise Mismatch(f"option {k}: the arm reported {info[k]!r}, the composed spec says {v!r}")
    if rec.get("params_file"):
        with np.load(cells.parent / rec["params_file"]) as z:
            if "label_rows" in z.files and not np.array_equal(z["label_rows"], label_rows(spec.N, spec.seed,
                                                                                           spec.ari_rows)):
                raise Mismatch(f"its saved subsample rows are not label_rows(N, seed={spec.seed}, "
                               f"ari_rows={spec.ari_rows})")
    if spec.N <= spec.ari_rows and rec.get("data_checksum"):  # every row is labelled: the seed shows in the data
        checksum = make_dataset(spec.N, spec.K, spec.d, spec.seed).checksum
        if checksum != rec["data_checksum"]:
            raise Mismatch(f"its data_checksum {rec['data_checksum']} is not seed {spec.seed}'s ({checksum})")


def rekey_experiment(exp_dir: Path, environ: dict, dry_run: bool) -> tuple[int, int, list[str], list[str] | None]:
    """(renamed, already keyed, problems, arm order) for one experiment folder."""
    cells = results.cells_dir(exp_dir)
    renamed, kept, problems, order, plans = 0, 0, [], None, []
    for path in sorted(cells.glob("*.json")):
        rec = json.loads(path.read_text())
        if "spec" in rec:
            if CellSpec.from_dict(rec["spec"]).key != path.stem:
                problems.append(f"{path}: its spec's key is {CellSpec.from_dict(rec['spec']).key}")
            kept += 1
            continue
        try:
            spec, order = composed_spec(exp_dir.name, old_overrides(path.stem, rec), environ)
            check(spec, rec, cells)
        except (Mismatch, ValueError) as e:
            problems.append(f"{path}: {e}")
            continue
        plans.append((path, rec, spec))
    keys = [spec.key for _, _, spec in plans]
    clashes = {k for k in keys if keys.count(k) > 1 or (cells / f"{k}.json").exists()}
    for path, rec, spec in plans:
        if spec.key in clashes:
            problems.append(f"{path}: its new key {spec.key} is taken")
            continue
        renamed += 1
        print(f"  {path.stem} -> {spec.key}")
        if dry_run:
            continue
        new = cells / f"{spec.key}.json"
        if rec.get("params_file"):
            os.replace(cells.parent / rec["params_file"], new.with_suffix(".npz"))
            rec["params_file"] = f"cells/{spec.key}.npz"
        if path.with_suffix(".log").exists():
            os.replace(path.with_suffix(".log"), new.with_suffix(".log"))
        rec.update(reg_covar=spec.reg_covar, ari_rows=spec.ari_rows, cell=spec.key, spec=spec.as_dict())
        results.write_json_atomic(new, rec)
        path.unlink()
    return renamed, kept, problems, order


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("device_dir", type=Path, help="results/<device>, e.g. results/h200")
    ap.add_argument("--dry-run", action="store_true", help="check and print the renames, change nothing")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="a code-affecting variable those runs had set (repeatable)")
    a = ap.parse_args(argv)
    environ = dict(e.split("=", 1) for e in a.env)
    problems = []
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        for exp_dir in sorted(p.parent for p in a.device_dir.glob("*/cells")):
            print(f"{exp_dir}:")
            renamed, kept, found, order = rekey_experiment(exp_dir, environ, a.dry_run)
            problems += found
            print(f"  {renamed} renamed, {kept} already keyed, {len(found)} left as they are")
            if not a.dry_run and (renamed or kept):
                print(f"  {results.collect(exp_dir, order)}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
