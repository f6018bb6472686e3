"""Cell records and the experiment CSV.

Every cell writes one record, ``results/<device>/<experiment>/cells/<cell_key>.json``
(+ ``.npz`` with its parameters and subsample labels), atomically (tmp + os.replace).
The CSV ``results/<device>/<experiment>.csv`` is a pure function of those records:
:func:`collect` rebuilds it from all of them under an exclusive file lock and replaces
it atomically, so a killed sweep or parallel writers can neither lose nor duplicate
a row. Derived columns (ms/iter statistics, bandwidth and roofline fractions, the
agreement with the shape's reference arm, and the kernels' dispatch choice) are computed
here, in one place.

    python -m harness.results results/h200/table1   # re-collect one experiment
"""
from __future__ import annotations

import csv
import fcntl
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]

COLUMNS = [
    "device", "experiment", "arm", "label", "shape", "N", "K", "d", "regimes", "seed", "numerics",
    "algorithm", "dispatch_choice", "precision", "n_iter", "n_iter_reported", "reps", "timeout_s", "wall_s", "host_load", "rep_seconds",
    "ms_per_iter_min", "ms_per_iter_median", "ms_per_iter_spread", "peak_mb", "peak_source",
    "nvml_peak_mb", "x_gb_per_s", "hbm_fraction", "roofline_fraction", "status", "gate",
    "ll_per_point", "sum_weights", "rel_ll_diff", "ari", "reference_arm", "data_checksum",
    "info", "versions", "git_commit", "timestamp", "host", "params_file",
]
JSON_COLUMNS = ("rep_seconds", "info", "versions")


def arm_order() -> list[str]:
    """Table order of the arms (conf/config.yaml); arms not listed sort after, by name."""
    return list(OmegaConf.load(REPO / "conf" / "config.yaml").arm_order)


def cells_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / "cells"


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


def _device_env(exp_dir: Path) -> dict:
    """The device folder's env.json (empty when there is none)."""
    env = Path(exp_dir).parent / "env.json"
    return json.loads(env.read_text()) if env.exists() else {}


def _derive_dispatch(rows: list[dict], gpu: str | None) -> None:
    """dispatch_choice: the algorithm kernels.dispatch.choose_algorithm picks at the row's (K, d) on the
    GPU the rows ran on (env.json), or on a machine without one, whatever arm the row is; the figures
    draw the kernels' rule from this column, not from the kernels."""
    from kernels.dispatch import choose_algorithm  # here: figures import this module, and import no kernels

    for r in rows:
        r["dispatch_choice"] = choose_algorithm(r["K"], r["d"], gpu or "no GPU")  # no GPU: the paper's A100 rule


def _derive_timing(row: dict, rates: dict) -> None:
    secs = row.get("rep_seconds") or []
    if not secs:
        return
    ms = [1e3 * s / row["n_iter"] for s in secs]
    row["ms_per_iter_min"] = min(ms)
    row["ms_per_iter_median"] = statistics.median(ms)
    row["ms_per_iter_spread"] = max(ms) - min(ms)
    t = min(ms) / 1e3
    N, K, d = row["N"], row["K"], row["d"]
    row["x_gb_per_s"] = N * d * 4 / t / 1e9
    if rates.get("hbm_read_gb_per_s"):
        row["hbm_fraction"] = row["x_gb_per_s"] / rates["hbm_read_gb_per_s"]
    # 8NKd useful FLOP per iteration; tf32x3 charged three TF32 products.
    charge, rate = {"tf32x3": (3, "tf32_tflops"), "tf32": (1, "tf32_tflops"),
                    "bf16": (1, "bf16_tflops")}.get(row.get("precision") or "", (1, "fp32_tflops"))
    if rates.get(rate):
        row["roofline_fraction"] = charge * 8 * N * K * d / t / (rates[rate] * 1e12)


def _labels(exp_dir: Path, row: dict):
    f = row.get("params_file")
    return np.load(Path(exp_dir) / f)["labels"] if f else None


def _derive_agreement(rows: list[dict], exp_dir: Path, order: list[str]) -> None:
    """rel_ll_diff and ARI of every valid fit against its shape's reference arm."""
    from sklearn.metrics import adjusted_rand_score

    rank = {a: i for i, a in enumerate(order)}
    groups: dict = {}
    for r in rows:
        if r.get("gate") == "valid":
            groups.setdefault((r["shape"], r["N"], r["K"], r["d"], r["seed"], r["data_checksum"]), []).append(r)
    for members in groups.values():
        members.sort(key=lambda r: (r["arm"] != "turbo_gmm", rank.get(r["arm"], len(rank)), r["arm"], r["cell_key"]))
        ref = members[0]
        ref_labels = _labels(exp_dir, ref)
        for r in members:
            r["reference_arm"] = ref["arm"]
            r["rel_ll_diff"] = (r["ll_per_point"] - ref["ll_per_point"]) / abs(ref["ll_per_point"])
            lab = _labels(exp_dir, r)
            if lab is not None and ref_labels is not None:
                r["ari"] = adjusted_rand_score(ref_labels, lab)


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


def collect(exp_dir: Path) -> Path:
    """Rebuild ``<exp_dir>.csv`` from every record in ``<exp_dir>/cells``; returns its path."""
    exp_dir = Path(exp_dir)
    out = exp_dir.with_suffix(".csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(exp_dir.parent / f".{exp_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = []
        for p in sorted(cells_dir(exp_dir).glob("*.json")):
            rec = json.loads(p.read_text())
            rec["cell_key"] = p.stem
            rows.append(rec)
        env = _device_env(exp_dir)
        rates = env.get("probes", {})
        order = arm_order()
        for r in rows:
            _derive_timing(r, rates)
        _derive_dispatch(rows, env.get("gpu"))
        _derive_agreement(rows, exp_dir, order)
        rank = {a: i for i, a in enumerate(order)}
        rows.sort(key=lambda r: (r["N"], r["K"], r["d"], r["shape"], rank.get(r["arm"], len(rank)), r["arm"], r["cell_key"]))
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
