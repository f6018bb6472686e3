"""Cell records and the experiment CSV.

Every cell has one record, ``results/<device>/<experiment>/cells/<cell key>.json`` (+ ``.npz``
with its parameters and subsample labels), written atomically (tmp + os.replace) by the runner
alone. The CSV ``results/<device>/<experiment>.csv`` is a pure function of those records:
:func:`collect` rebuilds it from all of them under an exclusive file lock and replaces it
atomically, so a killed sweep or parallel writers can neither lose nor duplicate a row. A record
that cannot be read (truncated JSON, ``{}``, a truncated ``.npz``) is named in a warning and moved
to ``cells/quarantine/``; its cell counts as not yet run. Derived columns (ms/iter statistics,
bandwidth and roofline fractions (harness.roofline), the agreement with the shape's reference arm, and the
kernels' dispatch choice) are computed here, in one place; figures read them from the CSV.

    python -m harness.results results/h200/table1   # re-collect one experiment
"""
from __future__ import annotations

import csv
import fcntl
import functools
import json
import math
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from harness.roofline import diagonal_ms

REPO = Path(__file__).resolve().parents[1]

COLUMNS = [
    "device", "experiment", "arm", "label", "shape", "N", "K", "d", "regimes", "seed", "numerics",
    "algorithm", "dispatch_choice", "precision", "n_iter", "n_iter_reported", "reps", "reg_covar", "ari_rows", "timeout_s", "wall_s", "host_load", "concurrent_cells", "cuda_visible_devices", "rep_seconds",
    "ms_per_iter_min", "ms_per_iter_median", "ms_per_iter_spread", "peak_mb", "peak_source",
    "nvml_peak_mb", "x_gb_per_s", "hbm_fraction", "roofline_fraction", "status", "gate",
    "ll_per_point", "sum_weights", "rel_ll_diff", "ari", "reference_arm", "data_checksum",
    "info", "versions", "git_commit", "timestamp", "host", "cell", "params_file",
    # protocol e2e (the arm's own fit to convergence; empty under fixed_init)
    "protocol", "tol", "iterations", "e2e_wall_s_host", "e2e_wall_s_device", "transfer_s", "validation_s", "init_s",
    "em_s", "other_s", "unsplit_s",
    "covariance_type",  # diag (empty in records made before the field) or full
    # protocol kmeans (Lloyd from the shared seeds in the columns above; the library's own fit in the e2e_* ones)
    "data_components", "inertia", "reference_inertia", "rel_inertia_diff", "e2e_status", "e2e_gate", "e2e_wall_s",
    "e2e_inertia", "e2e_reference", "e2e_rel_inertia_diff",
    # protocol e2e's cold start: the wall time of the process's first fit (empty in records made before the column),
    # and whether the compilation caches were empty when the cell started (every cell; harness/caches.py)
    "e2e_first_fit_s", "cache_state",
]
# The reference arm of a shape's agreement columns, by protocol: Table 1 compares with Turbo-GMM from the
# shared init; the e2e fits, each from its own initialization, with scikit-learn's.
REFERENCE_ARM = {"fixed_init": "turbo_gmm", "e2e": "sklearn"}
# The k-means protocol's reference: scikit-learn's Lloyd from the same seeds where its fit at the shape is valid,
# else the float64 Lloyd every k-means cell computes (gate/kmeans.py); its own fit: scikit-learn's, else that Lloyd.
KMEANS_REFERENCE_ARM, FLOAT64_LLOYD = "kmeans_sklearn", "float64 Lloyd"
JSON_COLUMNS = ("rep_seconds", "info", "versions")


@functools.cache
def arm_order() -> list[str]:
    """Table order of the arms (``arm_order`` of the composed config) for readers outside a sweep,
    which pass their own ``cfg.arm_order``; arms not listed sort after, by name."""
    if GlobalHydra.instance().is_initialized():
        return list(compose("config").arm_order)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return list(compose("config").arm_order)


def cells_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / "cells"


class UnreadableRecord(Exception):
    """A cell record (or its .npz) that cannot be used; the message says why."""


_INTEGERS = {"N": 1, "K": 1, "d": 1, "n_iter": 1, "seed": 0}  # the minimum of each


def _number(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def read_record(path: Path) -> tuple[dict, np.ndarray | None]:
    """The record at ``path`` and its subsample labels (None without a params file), checked for
    every field :func:`collect` uses; :class:`UnreadableRecord` with the reason otherwise."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnreadableRecord(f"{type(e).__name__}: {e}") from None
    if not isinstance(rec, dict):
        raise UnreadableRecord(f"a JSON {type(rec).__name__}, not an object")
    missing = [k for k in ("arm", "shape", "status", *_INTEGERS) if k not in rec]
    if missing:
        raise UnreadableRecord(f"no {', '.join(missing)}")
    for k, lo in _INTEGERS.items():
        if isinstance(rec[k], bool) or not isinstance(rec[k], int) or rec[k] < lo:
            raise UnreadableRecord(f"{k}={rec[k]!r}, not an integer >= {lo}")
    if rec["status"] == "ok":
        secs = rec.get("rep_seconds")
        if not isinstance(secs, list) or not secs or not all(_number(s) and s >= 0 for s in secs):
            raise UnreadableRecord(f"status ok but rep_seconds={secs!r}")
        if not isinstance(rec.get("gate"), str):
            raise UnreadableRecord(f"status ok but gate={rec.get('gate')!r}")
        score = "inertia" if rec.get("protocol") == "kmeans" else "ll_per_point"
        if rec["gate"] == "valid" and not (_number(rec.get(score)) and "data_checksum" in rec):
            raise UnreadableRecord(f"a valid fit without a finite {score} or a data_checksum")
    labels = None
    if rec.get("params_file"):
        npz = path.parent.parent / rec["params_file"]
        try:
            with np.load(npz) as z:
                arrays = {k: z[k] for k in z.files}  # reading every member checks its CRC
        except Exception as e:  # missing, truncated or garbled: BadZipFile, zlib.error, EOFError, OSError, ...
            raise UnreadableRecord(f"its {npz.name}: {type(e).__name__}: {e}") from None
        if "labels" not in arrays:
            raise UnreadableRecord(f"its {npz.name} holds no labels")
        labels = arrays["labels"]
    return rec, labels


def lock_path(record_path: Path) -> Path:
    """The cell's lock file, beside its record."""
    return Path(record_path).with_name(f".{Path(record_path).stem}.lock")


@contextmanager
def cell_lock(record_path: Path):
    """Hold the cell's exclusive lock; yields (lock file, waited). If another process holds it,
    say so and wait for it. Whoever holds the lock is the only one that runs or rewrites the cell."""
    path = lock_path(record_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        waited = False
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            print(f"[harness] wait {Path(record_path).stem}: another sweep is running it (runner pid {holder})",
                  flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
            waited = True
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield f, waited


def quarantine(record_path: Path, reason: str) -> Path:
    """Move an unreadable record and its .npz/.log to ``cells/quarantine/``, saying so; returns the folder."""
    record_path = Path(record_path)
    qdir = record_path.parent / "quarantine"
    qdir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for p in (record_path, record_path.with_suffix(".npz"), record_path.with_suffix(".log")):
        if p.exists():
            dest = qdir / p.name
            os.replace(p, dest if not dest.exists() else qdir / f"{p.stem}.{stamp}{p.suffix}")
    print(f"warning: unreadable cell record {record_path} ({reason}): moved to {qdir}/ with its .npz and .log; "
          "its cell counts as not yet run", file=sys.stderr, flush=True)
    return qdir


def load_record(record_path: Path, locked: bool = False) -> tuple[dict, np.ndarray | None] | None:
    """The readable record at ``record_path`` (and its labels), else None: missing, or unreadable and
    quarantined. ``locked``: the caller holds the cell's lock; otherwise it is taken without waiting,
    and a record whose cell another process holds (it is rewriting it) is left in place."""
    record_path = Path(record_path)
    if not record_path.exists():
        return None
    try:
        return read_record(record_path)
    except UnreadableRecord as e:
        reason = str(e)
    if locked:
        quarantine(record_path, reason)
        return None
    with open(lock_path(record_path), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"warning: unreadable cell record {record_path} ({reason}): its cell is being rerun, "
                  "left out of this CSV", file=sys.stderr, flush=True)
            return None
        try:
            return read_record(record_path)  # rewritten since the first read
        except UnreadableRecord as e:
            quarantine(record_path, str(e))
        except FileNotFoundError:
            pass
    return None


def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def write_npz_atomic(path: Path, **arrays) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def device_env(device_dir: Path) -> dict:
    """A device folder's env.json (harness.env: the GPU, versions, probes), empty when there is none."""
    env = Path(device_dir) / "env.json"
    return json.loads(env.read_text()) if env.exists() else {}


def _derive_dispatch(rows: list[dict], gpu: str | None) -> None:
    """dispatch_choice: the algorithm turbo_gmm.dispatch.choose_algorithm picks at the row's (K, d) and precision
    (fp64 asks the rule at twice d_pad; any other precision, the tf32x3 rule) on the GPU the rows ran on
    (env.json), or on a machine without one, whatever arm the row is; the figures draw the kernels' rule from
    this column, not from the kernels."""
    from turbo_gmm.dispatch import choose_algorithm  # here: figures import this module, and import no kernels

    for r in rows:  # no GPU: the paper's A100 rule
        if _protocol(r) == "kmeans":  # the GMM kernels' rule says nothing of a k-means cell
            continue
        r["dispatch_choice"] = choose_algorithm(r["K"], r["d"], gpu or "no GPU", r.get("precision") or "tf32x3")


def _protocol(row: dict) -> str:
    return row.get("protocol") or "fixed_init"  # records made before the protocol field are fixed_init


def _derive_timing(row: dict, rates: dict) -> None:
    secs = row.get("rep_seconds") or []
    if not secs or _protocol(row) == "e2e":  # an e2e fit's iterations are its own: no ms/iter
        return
    iterations = row["n_iter"]
    if _protocol(row) == "kmeans":  # Lloyd: the iterations it ran (a fixed point may come before n_iter)
        iterations = row.get("n_iter_reported") or row["n_iter"]
    ms = [1e3 * s / iterations for s in secs]
    row["ms_per_iter_min"] = min(ms)
    row["ms_per_iter_median"] = statistics.median(ms)
    row["ms_per_iter_spread"] = max(ms) - min(ms)
    t = min(ms) / 1e3
    N, K, d = row["N"], row["K"], row["d"]
    row["x_gb_per_s"] = N * d * 4 / t / 1e9
    if rates.get("hbm_read_gb_per_s"):
        row["hbm_fraction"] = row["x_gb_per_s"] / rates["hbm_read_gb_per_s"]
    if (row.get("covariance_type") or "diag") != "diag" or _protocol(row) == "kmeans":  # 8NKd: diagonal EM's count
        return
    floor = diagonal_ms(N, K, d, row.get("precision") or "fp32", rates)
    if floor is not None:
        row["roofline_fraction"] = floor / min(ms)


def _arm_rank(row: dict, rank: dict) -> tuple:
    """Arms in table order; cells of one arm by their options (one_pass before two_pass), then key."""
    options = json.dumps((row.get("spec") or {}).get("options", {}), sort_keys=True)
    return rank.get(row["arm"], len(rank)), row["arm"], options, row["cell_key"]


def _comparable_labels(ref_labels, lab) -> str | None:
    """None where two cells' subsample labels can be scored by ARI, else why not: each a 1-D vector, of one
    length (cells run with other ``ari_rows``, or an .npz whose labels were cut short, label other rows)."""
    for name, x in (("its", lab), ("the reference's", ref_labels)):
        if np.ndim(x) != 1:
            return f"{name} labels have shape {np.shape(x)}, not one vector"
    if len(lab) != len(ref_labels):
        return f"its {len(lab)} labels against the reference's {len(ref_labels)}: another ari_rows, or a cut .npz"
    return None


def _derive_agreement(rows: list[dict], labels: dict, order: list[str]) -> None:
    """rel_ll_diff and ARI of every valid fit against its shape's reference arm (labels by cell key) of the same
    covariance type: the protocol's REFERENCE_ARM if its fit is valid, else the first valid arm in ``order``. A row
    whose labels cannot be scored against the reference's (:func:`_comparable_labels`) keeps an empty ARI, and a
    warning names it: one odd cell never stops the folder's CSV from being written."""
    from sklearn.metrics import adjusted_rand_score

    rank = {a: i for i, a in enumerate(order)}
    groups: dict = {}
    for r in rows:
        if r.get("gate") == "valid" and _protocol(r) in REFERENCE_ARM:
            key = (_protocol(r), r["shape"], r["N"], r["K"], r["d"], r["seed"], r["data_checksum"],
                   r.get("covariance_type") or "diag")  # a full fit is never scored against a diagonal one
            groups.setdefault(key, []).append(r)
    for (protocol, *_), members in groups.items():
        members.sort(key=lambda r: (r["arm"] != REFERENCE_ARM[protocol], *_arm_rank(r, rank)))
        ref = members[0]
        ref_labels = labels[ref["cell_key"]]
        for r in members:
            r["reference_arm"] = ref["arm"]
            r["rel_ll_diff"] = (r["ll_per_point"] - ref["ll_per_point"]) / abs(ref["ll_per_point"])
            lab = labels[r["cell_key"]]
            if lab is None or ref_labels is None:
                continue
            why = _comparable_labels(ref_labels, lab)
            if why is None:
                try:
                    r["ari"] = adjusted_rand_score(ref_labels, lab)
                except (ValueError, TypeError) as e:
                    why = f"{type(e).__name__}: {e}"
            if why is not None:
                print(f"warning: cell {r['cell_key']}: no ARI against {ref['cell_key']} ({why}); its row is written "
                      "without one", file=sys.stderr, flush=True)


def _npz_array(exp_dir: Path, row: dict, name: str):
    """Array ``name`` of the row's parameter file, None where there is none."""
    if not row.get("params_file"):
        return None
    with np.load(Path(exp_dir) / row["params_file"]) as z:
        return z[name] if name in z.files else None


def _derive_kmeans(rows: list[dict], labels: dict, exp_dir: Path) -> None:
    """The k-means rows' agreement columns: for the Lloyd measurement, ``rel_inertia_diff`` (inertia over the
    reference's, minus 1) and the ARI of the subsample labels against the reference's, the reference being
    KMEANS_REFERENCE_ARM's valid row of the same shape, data and seeds (``info.seeds_sha``), else the row's own
    float64 Lloyd (``reference_inertia``, its ``reference_labels``); for the own fit, ``e2e_rel_inertia_diff``
    against that arm's own fit where it ran and is valid, else against the same float64 Lloyd."""
    from sklearn.metrics import adjusted_rand_score

    groups: dict = {}
    for r in rows:
        if _protocol(r) == "kmeans" and r.get("status") == "ok":
            seeds = (r.get("info") or {}).get("seeds_sha")
            key = (r["shape"], r["N"], r["K"], r["d"], r["seed"], r.get("data_checksum"), r["n_iter"], seeds)
            groups.setdefault(key, []).append(r)
    for members in groups.values():
        ref = next((r for r in sorted(members, key=lambda r: r.get("timestamp") or "", reverse=True)
                    if r["arm"] == KMEANS_REFERENCE_ARM and r.get("gate") == "valid"), None)
        own_ref = next((r for r in sorted(members, key=lambda r: r.get("timestamp") or "", reverse=True)
                        if r["arm"] == KMEANS_REFERENCE_ARM and r.get("e2e_gate") == "valid"), None)
        for r in members:
            if _number(r.get("inertia")):
                if ref is not None:
                    r["reference_arm"], base, ref_labels = ref["arm"], ref["inertia"], labels.get(ref["cell_key"])
                else:
                    r["reference_arm"], base = FLOAT64_LLOYD, r.get("reference_inertia")
                    ref_labels = _npz_array(exp_dir, r, "reference_labels")
                if _number(base) and base > 0:
                    r["rel_inertia_diff"] = r["inertia"] / base - 1.0
                lab = labels.get(r["cell_key"])
                if lab is not None and ref_labels is not None and _comparable_labels(ref_labels, lab) is None:
                    r["ari"] = adjusted_rand_score(ref_labels, lab)
            if _number(r.get("e2e_inertia")):
                r["e2e_reference"], base = ((own_ref["arm"], own_ref["e2e_inertia"]) if own_ref is not None
                                            else (FLOAT64_LLOYD, r.get("reference_inertia")))
                if _number(base) and base > 0:
                    r["e2e_rel_inertia_diff"] = r["e2e_inertia"] / base - 1.0


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


def collect(exp_dir: Path, order: list[str] | None = None) -> Path:
    """Rebuild ``<exp_dir>.csv`` from every readable record in ``<exp_dir>/cells`` (unreadable ones
    are quarantined), arms in ``order`` (default :func:`arm_order`); returns the CSV's path."""
    exp_dir = Path(exp_dir)
    out = exp_dir.with_suffix(".csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    order = list(order) if order is not None else arm_order()
    with open(exp_dir.parent / f".{exp_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows, labels = [], {}
        for p in sorted(cells_dir(exp_dir).glob("*.json")):
            loaded = load_record(p)
            if loaded is None:
                continue
            rec, labels[p.stem] = loaded
            rec["cell_key"] = p.stem
            rows.append(rec)
        env = device_env(Path(exp_dir).parent)
        rates = env.get("probes", {})
        for r in rows:
            _derive_timing(r, rates)
        _derive_dispatch(rows, env.get("gpu"))
        _derive_agreement(rows, labels, order)
        _derive_kmeans(rows, labels, exp_dir)
        rank = {a: i for i, a in enumerate(order)}
        rows.sort(key=lambda r: (r["N"], r["K"], r["d"], r["shape"], *_arm_rank(r, rank)))
        tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({c: _cell(r.get(c)) for c in COLUMNS})
        os.replace(tmp, out)
    return out


def write_diagnostic_csv(path, rows: list[dict]) -> None:
    """Rows of a diagnostic (harness.studies.measure, harness.studies.kernel_profile) whose keys vary by row
    (an error row has fewer): the columns are every key, in first-seen order."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)


def read_csv(path) -> list[dict]:
    """Rows of a results CSV with JSON columns decoded (for figures)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for c in JSON_COLUMNS:
            r[c] = json.loads(r[c]) if r.get(c) else ([] if c == "rep_seconds" else {})
    return rows


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(collect(Path(arg)))
