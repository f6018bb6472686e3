"""One cell, in its own process: data, shared init, the arm, the clock, memory, the gate.

Started by harness/runner.py as ``python -m harness.worker '{"spec": ..., "scratch": ...,
"runner_pid": ..., "cache_env": ...}'`` (cache_env: the compilation caches' variables, set before any
library loads). It writes its report (``status`` ``ok``, ``unavailable: <reason>``, or
``unsupported: covariance_type=<type>`` for an arm whose ``COVARIANCE_TYPES`` lacks the cell's, and the
measurements; under protocol kmeans, :func:`run_kmeans`) and the parameter ``.npz`` into the scratch
folder, for the runner to file as the cell's record; any exception is left to propagate, so the process exits
non-zero with the traceback on stderr and the runner classifies it (OOM, OutOfResources, ...). It never outlives its
runner: a killed runner's worker would go on computing beside the next sweep's and spoil its timing.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_runner(runner_pid: int) -> None:
    """End this process group when the runner dies: the kernel sends SIGTERM at the runner's death
    (``prctl(PR_SET_PDEATHSIG)`` on Linux), whose handler SIGKILLs the group; a thread watching the
    parent does the same where prctl is missing, or while the main thread is busy in C code."""
    def end(*_):
        if os.getpgrp() == os.getpid():  # we lead our group (the runner starts a new session): arm children too
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def watch():
        while os.getppid() == runner_pid:
            time.sleep(0.2)
        end()

    signal.signal(signal.SIGTERM, end)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != runner_pid:  # it died before prctl took effect
        end()
    threading.Thread(target=watch, name="watch-runner", daemon=True).start()


if __name__ == "__main__":
    ARG = json.loads(sys.argv[1])
    die_with_runner(ARG["runner_pid"])  # before the slow imports below
    os.environ.update(ARG["cache_env"])  # JAX's and Triton's compilation caches (harness/caches.py), before they load

# Numerics and allocator settings must precede every library import (paper 5.1).
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn's array-API path needs it before scipy loads

import importlib  # noqa: E402
import inspect  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

from turbo_gmm.records import to_numpy  # noqa: E402
from gate.rescore import label_rows, rescore, rescore_full  # noqa: E402
from harness import env  # noqa: E402
from harness.cell import CellSpec  # noqa: E402
from turbo_gmm.datasets import make_dataset, shared_init  # noqa: E402
from harness.memory import MB, NvmlSampler, PeakMeter  # noqa: E402
from harness.results import write_json_atomic, write_npz_atomic  # noqa: E402


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "no reason given")


def _unavailable(report: dict, report_path: Path, reason: str) -> dict:
    report.update(status=f"unavailable: {_first_line(reason)}", versions=env.imported_versions())
    write_json_atomic(report_path, report)
    return report


def _arm_or_reason(spec: CellSpec, opts: dict):
    """(the imported arm module, None), or (None, why it cannot run here)."""
    try:
        arm = importlib.import_module(spec.module)
        # an arm may read its options to decide (e.g. where its source checkout lives)
        reason = arm.available(opts) if inspect.signature(arm.available).parameters else arm.available()
    except ImportError as e:
        return None, f"{type(e).__name__}: {e}"
    return (None, reason) if reason else (arm, None)


def _gate(spec: CellSpec, X, fit, scratch: Path):
    """The gate's float64 re-score of ``fit`` on X and the subsample labels; writes ``params.npz``
    (``variances`` of a diag fit, ``covariances`` of a full one)."""
    rows = label_rows(spec.N, spec.seed, spec.ari_rows)
    name, judge = ("covariances", rescore_full) if spec.covariance_type == "full" else ("variances", rescore)
    cov = to_numpy(getattr(fit, name))
    score = judge(X, to_numpy(fit.weights), to_numpy(fit.means), cov, rows)  # plain arrays: the gate knows no JAX
    params = {"means": to_numpy(fit.means).astype(np.float32), name: cov.astype(np.float32),
              "label_rows": rows.astype(np.int64), "labels": score.labels}
    if fit.weights is not None:
        params["weights"] = to_numpy(fit.weights).astype(np.float32)
    write_npz_atomic(scratch / "params.npz", **params)
    return score


E2E_PHASES = ("transfer", "validation", "init", "em", "other")


def _unsupported(report: dict, report_path: Path, covariance_type: str) -> dict:
    report.update(status=f"unsupported: covariance_type={covariance_type}", versions=env.imported_versions())
    write_json_atomic(report_path, report)
    return report


def run_e2e(spec: CellSpec, scratch: Path) -> dict:
    """The e2e protocol (harness/PROTOCOL.md): the arm's own fit to convergence from its own default
    initialization, with the cell's covariance type, from a host NumPy array and, on a GPU, from the device
    tensor; ``warmups`` untimed fits, then ``reps`` timed fits per input; the row keeps each input's minimum wall
    time, the split of the fastest host fit (phases the arm cannot see stay empty; ``unsplit_s`` is the wall time
    no phase accounts for), the gate's score of that fit, and the wall time of the process's very first fit
    (``e2e_first_fit_s``: the first warm-up, or the first timed fit where there is none; its compilations hit or
    miss the caches the runner reports in ``cache_state``)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report_path = scratch / "report.json"
    data = make_dataset(spec.N, spec.K, spec.d, spec.seed, device)
    report = {"data_checksum": data.checksum}
    opts = dict(spec.options_dict, reg_covar=spec.reg_covar, numerics=spec.numerics, tol=spec.tol,
                max_iter=spec.n_iter, seed=spec.seed, covariance_type=spec.covariance_type)
    arm, reason = _arm_or_reason(spec, opts)
    if reason:
        return _unavailable(report, report_path, reason)
    if not hasattr(arm, "prepare_e2e"):
        return _unavailable(report, report_path, "no end-to-end fit")
    if spec.covariance_type not in getattr(arm, "COVARIANCE_TYPES", ("diag",)):
        return _unsupported(report, report_path, spec.covariance_type)
    X_host = data.X.cpu().numpy()  # a user's host array: pageable NumPy memory
    fits = arm.prepare_e2e(X_host, data.X if device == "cuda" else None, spec.K, opts)
    first = []  # the wall seconds of the process's first fit, before any other

    def timed(fit_fn):
        _sync(device)
        t0 = time.perf_counter()
        out = fit_fn()
        _sync(device)
        wall = time.perf_counter() - t0
        if not first:
            first.append(wall)
        return wall, out

    for _ in range(spec.warmups):  # untimed, from the first input (host): JIT, autotuning, allocator growth
        timed(next(iter(fits.values())))  # clocked only for the first fit's wall time
    best = {}  # input -> (wall seconds, Fit, split) of its fastest fit
    walls = {source: [] for source in fits}
    for source, fit_fn in fits.items():
        for _ in range(spec.reps):
            wall, (fit, split) = timed(fit_fn)
            walls[source].append(wall)
            if source not in best or wall < best[source][0]:
                best[source] = (wall, fit, split)
    timed_input = "host" if "host" in best else next(iter(best))
    wall, fit, split = best[timed_input]
    score = _gate(spec, data.X, fit, scratch)
    phases = {f"{p}_s": split[p] for p in E2E_PHASES if split.get(p) is not None}
    info = dict(fit.info or {})
    info.update(e2e_inputs=list(fits), e2e_split_input=timed_input, e2e_rep_seconds=walls,
                e2e_first_fit_input=next(iter(fits)), e2e_first_fit_timed=spec.warmups == 0)
    if "device" in best and "host" in best:
        info["e2e_device_split_s"] = {p: best["device"][2][p] for p in E2E_PHASES if best["device"][2].get(p) is not None}
    report.update(
        status="ok", gate=score.gate, n_iter_reported=fit.n_iter, iterations=fit.n_iter, rep_seconds=walls[timed_input],
        e2e_wall_s_host=best["host"][0] if "host" in best else None,
        e2e_wall_s_device=best["device"][0] if "device" in best else None, e2e_first_fit_s=first[0],
        **phases, unsplit_s=wall - sum(phases.values()),
        algorithm=info.get("algorithm", ""), precision=info.get("precision", spec.numerics),
        ll_per_point=score.ll_per_point, sum_weights=score.sum_weights, info=info,
        versions=env.imported_versions(),
    )
    write_json_atomic(report_path, report)
    return report


def _timed(fn, reps: int, device: str) -> tuple[list[float], object]:
    """``reps`` calls of ``fn`` between device synchronizations: (wall seconds of each, the fastest call's result)."""
    seconds, best = [], None
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        seconds.append(time.perf_counter() - t0)
        if best is None or seconds[-1] < min(seconds[:-1]):
            best = out
    return seconds, best


def run_kmeans(spec: CellSpec, scratch: Path) -> dict:
    """The k-means protocol (harness/PROTOCOL.md): (a) the arm's Lloyd from the shared k-means++ seeds
    (``warmups`` untimed, ``reps`` timed calls of ``n_iter`` iterations), gated against the float64 Lloyd
    reference from the same seeds; the report is filed at once, so a failure of (b) keeps it; (b) the library's
    own fit (``warmups`` untimed, ``e2e_reps`` timed), its failure classified into ``e2e_status`` as the runner
    classifies a cell's. Every result's inertia is the gate's one float64 evaluation on X."""
    import traceback

    from gate.kmeans import lloyd_reference, rescore_kmeans
    from harness.kmeans import shared_seeds
    from harness.runner import classify

    device = "cuda" if torch.cuda.is_available() else "cpu"
    report_path = scratch / "report.json"
    data = make_dataset(spec.N, spec.data_components, spec.d, spec.seed, device)
    X = data.X
    report = {"data_checksum": data.checksum}
    opts = dict(spec.options_dict, numerics=spec.numerics, seed=spec.seed)
    arm, reason = _arm_or_reason(spec, opts)
    if reason:
        return _unavailable(report, report_path, reason)
    if not hasattr(arm, "prepare_lloyd"):
        return _unavailable(report, report_path, "no k-means fit (protocol kmeans runs the kmeans_* arms)")
    X_host = X.cpu().numpy()  # for the libraries that take a host array (shares memory on a CPU)
    t0 = time.perf_counter()
    seeds, seed_rows, info = shared_seeds(X, X_host, spec.K, spec.seed)
    _sync(device)
    info["seeding_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = lloyd_reference(X, seeds, spec.n_iter)
    _sync(device)
    info.update(reference="float64 Lloyd (gate.kmeans.lloyd_reference)", reference_iterations=ref.n_iter,
                reference_s=time.perf_counter() - t0)
    rows = label_rows(spec.N, spec.seed, spec.ari_rows)

    lloyd = arm.prepare_lloyd(X, X_host, seeds.clone(), spec.n_iter, opts)
    for _ in range(spec.warmups):  # untimed: JIT compilation, autotuning, allocator growth
        lloyd()
    _sync(device)
    meter = PeakMeter(getattr(arm, "MEMORY", "rss"), device, arm)
    meter.reset()
    seconds, fit = _timed(lloyd, spec.reps, device)
    peak, source = meter.read()
    score = rescore_kmeans(X, to_numpy(fit.centers), ref.inertia, rows, spec.n_iter, fit.n_iter)
    idx = torch.as_tensor(rows, device=X.device)
    params = {"centers": to_numpy(fit.centers).astype(np.float32), "seeds": seeds.cpu().numpy(),
              "seed_rows": seed_rows, "reference_centers": ref.centers.cpu().numpy(),
              "label_rows": rows.astype(np.int64), "labels": score.labels,
              "reference_labels": ref.labels[idx].cpu().numpy().astype(np.int32)}
    write_npz_atomic(scratch / "params.npz", **params)
    info.update(fit.info or {})
    report.update(
        status="ok", gate=score.gate, n_iter_reported=fit.n_iter, rep_seconds=seconds, inertia=score.inertia,
        reference_inertia=ref.inertia, precision=info.get("precision", spec.numerics),
        peak_mb=peak / MB, peak_source=source, info=info, versions=env.imported_versions(), e2e_status=None,
    )
    write_json_atomic(report_path, report)  # (a) filed: a failure of the own fit below keeps it

    if not hasattr(arm, "prepare_fit"):
        report["e2e_status"] = "unavailable: no end-to-end fit"
    else:
        try:
            own = arm.prepare_fit(X, X_host, spec.K, opts)
            for _ in range(spec.warmups):
                own()
            walls, best = _timed(own, spec.e2e_reps, device)
            own_score = rescore_kmeans(X, to_numpy(best.centers))
            params["e2e_centers"] = to_numpy(best.centers).astype(np.float32)
            write_npz_atomic(scratch / "params.npz", **params)
            report.update(e2e_status="ok", e2e_gate=own_score.gate, e2e_wall_s=min(walls), iterations=best.n_iter,
                          e2e_inertia=own_score.inertia)
            report["info"] = dict(info, e2e_rep_seconds=walls, e2e_info=best.info or {})
        except Exception:  # noqa: BLE001 - classified as the runner classifies a cell (OOM, OutOfResources, ...)
            text = traceback.format_exc()
            print(text, file=sys.stderr, flush=True)
            report["e2e_status"] = classify(1, text, False)
    report["versions"] = env.imported_versions()
    write_json_atomic(report_path, report)
    return report


def run(spec: CellSpec, scratch: Path) -> dict:
    """Measure the cell; writes and returns the report (``scratch/report.json``, ``scratch/params.npz``)."""
    if spec.protocol == "e2e":
        return run_e2e(spec, scratch)
    if spec.protocol == "kmeans":
        return run_kmeans(spec, scratch)
    N, K, d, seed, n_iter = spec.N, spec.K, spec.d, spec.seed, spec.n_iter
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report_path = scratch / "report.json"
    report = {}

    sampler, nvml_error = None, None
    if device == "cuda":
        torch.cuda.init()
        torch.zeros(1, device=device)  # the CUDA context exists before the NVML baseline
        try:
            sampler = NvmlSampler()
        except Exception as e:  # no nvidia-ml-py or no NVML: the cross-check column stays empty, with the reason
            nvml_error = f"{type(e).__name__}: {e}"
    data = make_dataset(N, K, d, seed, device)
    init = shared_init(data.X, K, seed, spec.covariance_type)
    report["data_checksum"] = data.checksum

    opts = dict(spec.options_dict, reg_covar=spec.reg_covar, numerics=spec.numerics,
                covariance_type=spec.covariance_type)
    arm, reason = _arm_or_reason(spec, opts)
    if reason:
        return _unavailable(report, report_path, reason)
    if spec.covariance_type not in getattr(arm, "COVARIANCE_TYPES", ("diag",)):
        return _unsupported(report, report_path, spec.covariance_type)

    fit_fn = arm.prepare(data.X, init, n_iter, opts)
    fit_fn()  # untimed warm-up: JIT compilation, autotuning, allocator growth
    _sync(device)
    meter = PeakMeter(getattr(arm, "MEMORY", "rss"), device, arm)
    meter.reset()
    if sampler:
        sampler.start()
    seconds = []
    for _ in range(spec.reps):
        _sync(device)
        t0 = time.perf_counter()
        fit = fit_fn()
        _sync(device)
        seconds.append(time.perf_counter() - t0)
    nvml_bytes = sampler.stop() if sampler else None
    peak, source = meter.read()

    score = _gate(spec, data.X, fit, scratch)
    if fit.n_iter is not None and fit.n_iter != n_iter:
        score.reasons.append(f"stopped early ({fit.n_iter} of {n_iter} iterations)"
                             if fit.n_iter < n_iter else f"ran {fit.n_iter} of {n_iter} iterations")

    info = dict(fit.info or {})
    if nvml_error:
        info["nvml_error"] = nvml_error
    report.update(
        status="ok", gate=score.gate, n_iter_reported=fit.n_iter, rep_seconds=seconds,
        algorithm=info.get("algorithm", ""), precision=info.get("precision", spec.numerics),
        peak_mb=peak / MB, peak_source=source, nvml_peak_mb=None if nvml_bytes is None else nvml_bytes / MB,
        ll_per_point=score.ll_per_point, sum_weights=score.sum_weights, info=info,
        versions=env.imported_versions(),
    )
    write_json_atomic(report_path, report)
    return report


if __name__ == "__main__":
    report = run(CellSpec.from_dict(ARG["spec"]), Path(ARG["scratch"]))
    print(json.dumps({k: report.get(k) for k in ("status", "gate", "rep_seconds", "peak_mb")}))
