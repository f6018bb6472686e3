"""Parent side of one cell: skip if done, run the worker in a sandboxed subprocess, classify.

The runner never raises on a failing arm: whatever happens in the worker ends as one
record with a status (``ok``, ``unavailable: <reason>``, ``fail (OOM)``,
``fail (OutOfResources)``, ``fail (TIMEOUT)``, ``fail (ERROR: <last line>)``), the
experiment CSV is re-collected, and the sweep goes on. Bad sizes are rejected before
any work (``ValueError``).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness import env, results
from kernels.datasets import validate_shape

REPO = Path(__file__).resolve().parents[1]
_OOM = re.compile(r"OutOfMemoryError|MemoryError|RESOURCE_EXHAUSTED|out of memory", re.IGNORECASE)


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "-", s)


def cell_key(cfg: DictConfig) -> str:
    """``<arm>__<shape>``, plus sizes when they differ from the shape's YAML, plus every
    arm option that differs from the arm's YAML: deterministic and filesystem-safe."""
    arm, shape = cfg.arm, cfg.shape
    key = f"{arm.name}__{shape.name}"
    shape_file = REPO / "conf" / "shape" / f"{shape.name}.yaml"
    base = OmegaConf.to_container(OmegaConf.load(shape_file) if shape_file.exists() else shape)
    if (shape.N, shape.K, shape.d) != (base["N"], base["K"], base["d"]):  # "???" in a sweep base
        key += f"__N{shape.N}_K{shape.K}_d{shape.d}"
    arm_file = REPO / "conf" / "arm" / f"{arm.name}.yaml"
    base_opts = OmegaConf.to_container(OmegaConf.load(arm_file)).get("options") or {} if arm_file.exists() else {}
    opts = OmegaConf.to_container(arm.options, resolve=True) if arm.get("options") else {}
    for k in sorted(opts):
        if k not in base_opts or opts[k] != base_opts[k]:
            key += f"__{k}={opts[k]}"
    return _safe(key)


def classify(returncode: int, stderr: str, timed_out: bool) -> str:
    """The failure class of a worker that did not write its record."""
    if timed_out:
        return "fail (TIMEOUT)"
    tail = stderr[-4000:]
    if "OutOfResources" in tail or "out of resource: " in tail:  # Triton's, or a subclass refusing before compiling
        return "fail (OutOfResources)"
    if _OOM.search(tail):
        return "fail (OOM)"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if returncode < 0:
        last = f"killed by {signal.Signals(-returncode).name}"
    else:
        last = lines[-1] if lines else f"exit code {returncode}"
    return f"fail (ERROR: {last[:300]})"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's process group: the worker and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended just before
        pass


def _device_dir(cfg: DictConfig) -> Path:
    root = Path(cfg.results_dir)
    root = root if root.is_absolute() else REPO / root
    return root / (cfg.device_label or env.device_label())


def ensure_env(device_dir: Path, probes: bool) -> None:
    """Write <device>/env.json once per device folder, in a subprocess (no CUDA context here)."""
    path = device_dir / "env.json"
    if not path.exists():
        args = [sys.executable, "-m", "harness.env", str(path)] + ([] if probes else ["--no-probes"])
        subprocess.run(args, cwd=REPO, check=False, timeout=900)


def run_cell(cfg: DictConfig) -> dict:
    """Run (or skip) one cell and re-collect its experiment CSV; returns the record."""
    shape, arm = cfg.shape, cfg.arm
    validate_shape(shape.N, shape.K, shape.d)
    device_dir = _device_dir(cfg)
    exp_dir = device_dir / cfg.experiment_name
    key = cell_key(cfg)
    rec_path = results.cells_dir(exp_dir) / f"{key}.json"
    if rec_path.exists() and not cfg.force:
        print(f"[harness] skip {key}: record exists ({rec_path.relative_to(device_dir.parent)})")
        results.collect(exp_dir)
        return json.loads(rec_path.read_text())
    ensure_env(device_dir, cfg.env_probes)

    timeout = float(arm.timeout_s) * float(cfg.timeout_scale)
    row = {"device": device_dir.name, "experiment": cfg.experiment_name, "arm": arm.name, "label": arm.label,
           "shape": shape.name, "N": shape.N, "K": shape.K, "d": shape.d,
           "regimes": ";".join(shape.get("regimes") or []), "seed": cfg.seed, "numerics": arm.numerics,
           "algorithm": (arm.get("options") or {}).get("algorithm", ""),
           "precision": (arm.get("options") or {}).get("precision", arm.numerics), "n_iter": cfg.n_iter, "reps": arm.reps,
           "timeout_s": timeout, "host_load": round(os.getloadavg()[0], 2), "git_commit": env.git_commit(), "host": socket.gethostname()}
    spec = {"arm": OmegaConf.to_container(arm, resolve=True), "shape": OmegaConf.to_container(shape, resolve=True),
            "seed": cfg.seed, "n_iter": cfg.n_iter, "reg_covar": cfg.reg_covar, "ari_rows": cfg.ari_rows,
            "record": str(rec_path), "row": row}
    log_path = rec_path.with_suffix(".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (rec_path, rec_path.with_suffix(".npz")):
        stale.unlink(missing_ok=True)  # force=true: never mix an old record with a new failure

    print(f"[harness] run  {key} (timeout {timeout:.0f} s) -> {rec_path.relative_to(device_dir.parent)}", flush=True)
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.worker", json.dumps(spec)], cwd=REPO,
                                stdout=log, stderr=subprocess.PIPE, text=True, start_new_session=True)
        timed_out = False
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            _, stderr = proc.communicate()
        except BaseException:  # the runner itself is stopped (Ctrl-C, SIGTERM): take the cell down too
            _kill_group(proc)
            raise
        log.write(stderr)

    wall_s = round(time.time() - t0, 1)  # the whole cell: start-up, compilation, warm-up, repetitions
    if proc.returncode == 0 and not timed_out and rec_path.exists():
        rec = dict(json.loads(rec_path.read_text()), wall_s=wall_s)
    else:
        status = classify(proc.returncode, stderr, timed_out)
        if proc.returncode == 0 and not timed_out:
            status = "fail (ERROR: worker exited without writing its record)"
        rec = dict(row, status=status, versions=env.package_versions(),  # installed, as none were reported
                   timestamp=time.strftime("%Y-%m-%dT%H:%M:%S%z"), wall_s=wall_s)
    results.write_json_atomic(rec_path, rec)
    print(f"[harness] done {key}: {rec['status']} {rec.get('gate') or ''} ({wall_s:.1f} s)", flush=True)
    results.collect(exp_dir)
    return rec
