"""Parent side of one cell: claim it, skip it if done, run the worker in a sandboxed subprocess, classify.

The runner never raises on a failing arm: whatever happens in the worker ends as one record with
a status (``ok``, ``unavailable: <reason>``, ``fail (OOM)``, ``fail (OutOfResources)``,
``fail (TIMEOUT)``, ``fail (ERROR: <last line>)``), the experiment CSV is re-collected, and the
sweep goes on (a k-means cell's worker files its Lloyd measurement before the library's own fit: a failure of that
fit is classified into the record's ``e2e_status`` and the measurement kept). The runner is the record's one
writer: the worker reports into a scratch folder and the runner files its report, parameters and wall time under
the cell key. A cell is claimed
by an exclusive lock beside its record for as long as its runner or worker lives, so two sweeps
never run one cell at once: the second waits, then skips the cell the first recorded. Settings no
cell can run with, and a results folder that cannot be written, are refused before any work
(:class:`harness.cell.SettingError`).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from omegaconf import DictConfig

from harness import caches, env, results
from harness.cell import CellSpec, SettingError, plain_name
from harness.running_cells import RunningCell

REPO = Path(__file__).resolve().parents[1]
# device and host allocation failures; the last two are PyTorch's host allocator (DefaultCPUAllocator: "can't
# allocate memory ... Error code 12 (Cannot allocate memory)") and C++'s, which raise no MemoryError
_OOM = re.compile(r"OutOfMemoryError|MemoryError|RESOURCE_EXHAUSTED|out of memory|can't allocate memory|"
                  r"cannot allocate memory|not enough memory|std::bad_alloc", re.IGNORECASE)


def classify(returncode: int, stderr: str, timed_out: bool) -> str:
    """The failure class of a worker that did not report. A worker killed by SIGKILL that the runner did not
    kill (the runner kills only on its timeout) was killed by the kernel's OOM killer, the one sender of SIGKILL
    to a process that outgrows the host's memory: ``fail (OOM)``, like a MemoryError."""
    if timed_out:
        return "fail (TIMEOUT)"
    if returncode == -signal.SIGKILL:
        return "fail (OOM)"
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


def results_root(cfg: DictConfig) -> Path:
    """results_dir as an absolute path (a relative one is taken from the repository root); :class:`SettingError`
    for an empty one, one that is the repository itself or a folder above it (the device folders would be
    written among the sources), or a relative one that climbs out of the repository (``..``)."""
    given = cfg.results_dir
    given = str(given) if isinstance(given, int) and not isinstance(given, bool) else given  # results_dir=5
    if not isinstance(given, str) or not given.strip():
        raise SettingError(f"results_dir={given!r}: must be a folder (relative paths are taken from the "
                           f"repository root, {REPO}), not empty")
    root = Path(given)
    if not root.is_absolute():
        if ".." in root.parts:
            raise SettingError(f"results_dir={given}: a relative results_dir may not climb out of the repository "
                               "with '..': give an absolute path")
        root = REPO / root
    resolved = Path(os.path.normpath(root))
    if resolved == REPO or resolved in REPO.parents:
        raise SettingError(f"results_dir={given}: is {'the repository' if resolved == REPO else 'above the repository'}"
                           f" ({resolved}): give a folder of its own, such as results")
    return resolved


def _device_dir(cfg: DictConfig) -> Path:
    label = cfg.device_label
    label = env.device_label() if label is None or label == "" else plain_name("device_label", label)
    return results_root(cfg) / label


def _writable(folder: Path, setting: str) -> None:
    """``folder`` created (with its parents) and a file written and removed in it; :class:`SettingError`
    naming ``setting`` otherwise (a file in the way, no permission, a read-only file system)."""
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise SettingError(f"{setting}: {blocker} is a file, not a folder")
    probe = folder / f".write-probe-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise SettingError(f"{setting}: cannot create or write {e.filename or folder} "
                           f"({e.strerror or type(e).__name__}); give a folder you can write") from None


def writable_device_dir(cfg: DictConfig, experiment: str | None = None) -> Path:
    """results/<device>, created and checked writable (with ``experiment``, its ``<experiment>/cells/`` folder
    too, where the cell's lock and record go); :class:`SettingError` naming results_dir otherwise."""
    device_dir = _device_dir(cfg)
    _writable(device_dir, f"results_dir={cfg.results_dir}")
    if experiment is not None:
        _writable(results.cells_dir(device_dir / experiment), f"results_dir={cfg.results_dir}")
    return device_dir


def ensure_env(device_dir: Path, probes: bool, cache_root: Path) -> None:
    """Write <device>/env.json once per device folder, in a subprocess (no CUDA context here), under a
    lock (parallel jobs probe once); it reports the compilation caches under ``cache_root`` as they are then."""
    path = device_dir / "env.json"
    if path.exists():
        return
    with open(device_dir / ".env.lock", "w") as lock:  # parallel jobs: the first writes it, the rest wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            args = [sys.executable, "-m", "harness.env", str(path), "--caches", str(cache_root)]
            args += [] if probes else ["--no-probes"]
            subprocess.run(args, cwd=REPO, check=False, timeout=900)


def _run_worker(spec: CellSpec, scratch: Path, log_path: Path, lock_file, cache_env: dict) -> tuple[int, str, bool]:
    """The worker on ``spec``, reporting into ``scratch``, with the compilation caches' variables
    ``cache_env``; (returncode, stderr, timed out). It holds the cell's lock too (an inherited
    descriptor), and dies with this process (harness/worker.py)."""
    arg = json.dumps({"spec": spec.as_dict(), "scratch": str(scratch), "runner_pid": os.getpid(),
                      "cache_env": cache_env})
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.worker", arg], cwd=REPO, stdout=log,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                pass_fds=(lock_file.fileno(),))
        timed_out = False
        try:
            _, stderr = proc.communicate(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            _, stderr = proc.communicate()
        except BaseException:  # the runner itself is stopped (Ctrl-C, SIGTERM): take the cell down too
            _kill_group(proc)
            raise
        log.write(stderr)
    return proc.returncode, stderr, timed_out


def run_cell(cfg: DictConfig) -> dict:
    """Run (or skip) one cell and re-collect its experiment CSV; returns the record."""
    spec = CellSpec.from_cfg(cfg)
    device_dir = writable_device_dir(cfg, spec.experiment)
    exp_dir = device_dir / spec.experiment
    cells = results.cells_dir(exp_dir)
    rec_path = cells / f"{spec.key}.json"
    shown = rec_path.relative_to(device_dir.parent)
    with results.cell_lock(rec_path) as (lock_file, waited):
        done = results.load_record(rec_path, locked=True)
        if done is not None and not cfg.force:
            why = "the sweep it waited for recorded it" if waited else "record exists"
            print(f"[harness] skip {spec.key}: {why} ({shown})", flush=True)
            rec = done[0]
        else:
            rec = _run(cfg, spec, device_dir, rec_path, lock_file)
    results.collect(exp_dir, cfg.arm_order)
    return rec


def _run(cfg: DictConfig, spec: CellSpec, device_dir: Path, rec_path: Path, lock_file) -> dict:
    """Run the claimed cell and write its record."""
    cache_root = caches.device_root(cfg.cache_dir, device_dir)
    ensure_env(device_dir, cfg.env_probes, cache_root)
    npz, log_path = rec_path.with_suffix(".npz"), rec_path.with_suffix(".log")
    scratch = rec_path.with_name(f".run-{spec.key}")  # left by a killed runner: ours now, we hold the lock
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for stale in (rec_path, npz):
        stale.unlink(missing_ok=True)  # force=true: never mix an old record with a new failure
    rec = dict(spec.row(), device=device_dir.name, host_load=round(os.getloadavg()[0], 2),
               cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
               git_commit=env.git_commit(), host=socket.gethostname(), timestamp=time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    print(f"[harness] run  {spec.key}: {spec.describe()} (timeout {spec.timeout_s:.0f} s) -> "
          f"{rec_path.relative_to(device_dir.parent)}", flush=True)
    cold = caches.cold_root(spec.key) if spec.cold_cache else None  # e2e.cold_cache: empty caches of its own
    worker_caches = cold or cache_root
    rec["cache_usage"] = caches.usage(worker_caches)  # the worker's caches when it started (a cold one is removed)
    rec["cache_state"] = caches.state(rec["cache_usage"])  # whether its compilations could hit anything
    try:
        with RunningCell(cfg.running_cells_dir) as running:  # counts the other cells of this host meanwhile
            t0 = time.time()
            returncode, stderr, timed_out = _run_worker(spec, scratch, log_path, lock_file,
                                                        caches.environment(worker_caches))
            wall_s = round(time.time() - t0, 1)  # the whole cell: start-up, compilation, warm-up, repetitions
    finally:
        if cold is not None:
            shutil.rmtree(cold, ignore_errors=True)
    rec["concurrent_cells"] = running.most_others

    report = scratch / "report.json"
    finished = returncode == 0 and not timed_out
    # a k-means worker files its Lloyd measurement before the library's own fit: a failure of that fit keeps it
    if report.exists() and (finished or spec.protocol == "kmeans"):
        rec.update(json.loads(report.read_text()))
        if not finished and rec.get("status") == "ok" and not rec.get("e2e_status"):
            rec["e2e_status"] = classify(returncode, stderr, timed_out)
        if (scratch / "params.npz").exists():
            os.replace(scratch / "params.npz", npz)
            rec["params_file"] = f"cells/{npz.name}"
    else:
        status = classify(returncode, stderr, timed_out)
        if returncode == 0 and not timed_out:
            status = "fail (ERROR: worker exited without its report)"
        rec.update(status=status, versions=env.package_versions())  # installed, as none were reported
    rec.update(wall_s=wall_s, cell=spec.key, spec=spec.as_dict())
    results.write_json_atomic(rec_path, rec)
    shutil.rmtree(scratch, ignore_errors=True)
    own = f" own fit: {rec['e2e_status']} {rec.get('e2e_gate') or ''}" if rec.get("e2e_status") else ""
    print(f"[harness] done {spec.key}: {rec['status']} {rec.get('gate') or ''}{own} ({wall_s:.1f} s)", flush=True)
    return rec
