"""The warp-specialized one-pass kernel (kernels/one_pass_ws.py) beside the Triton one-pass kernel, on one H200.

    python -m harness.studies.one_pass_ws --out DIR

Three parts, each in its own subprocess with a timeout, so that a crash or a hang of the warp-specialized
kernel (new, first run on a GPU) loses neither the Triton rows nor the check's:

1. ``check``: correctness at small N first. Per component, n, s, u and ell of one E-step of each kernel against
   float64 statistics of the same lift (kernels.one_pass_ws.float64_statistics), worst component printed.
2. ``triton``: the Triton kernel at the issue-23 shapes: kernel time of one E-step (the sweep alone, min over
   reps by CUDA events) and ms per iteration of a 10-iteration graph-replayed kernels.fit.
3. ``ws``: the same for the warp-specialized kernel (its fit through LaunchConfig.warp_specialized_one_pass),
   the sweep also without the ping-pong token and with float64 running sums.

Every row goes to DIR/one_pass_ws.csv as it is measured, with the fraction of the roofline reached: issue 23's
definition, max(8 N K d x 3 FLOP at 396 TFLOP/s, N d x 4 bytes at 4.3 TB/s). The three parts together take
well under three minutes on an H200 (each part's timeout bounds it).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import subprocess
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECK_SHAPES = ("20K_32_32", "100003_100_32", "1M_128_32", "4M_32_32")
TIME_SHAPES = ("20M_32_32", "4M_32_32", "1M_32_32", "1M_128_32", "20K_32_32")
PART_TIMEOUT_S = {"check": 75, "triton": 45, "ws": 60}  # the check compiles every kernel the timed parts run
TF32X3_TFLOPS = 396.0  # issue 23: the H200's measured TF32 rate, each useful FLOP charged 3 times
HBM_TBPS = 4.3
KERNEL_REPS = 20
FIT_ITERATIONS = 10
FIT_REPS = 3
COLUMNS = ("date_utc", "commit", "device", "part", "shape", "N", "K", "d", "kernel", "kernel_ms", "fit_ms_per_iter",
           "roofline_ms", "kernel_roofline_fraction", "fit_roofline_fraction", "n_err", "s_err", "u_err", "ll_err",
           "fit_final_ell", "error")
WS_SWEEPS = {"ws": dict(pingpong=True, running_sums="float32"),
             "ws_free_running": dict(pingpong=False, running_sums="float32"),
             "ws_float64_sums": dict(pingpong=True, running_sums="float64")}


def roofline_ms(N: int, K: int, d: int) -> float:
    """Issue 23's floor: the tf32x3 tensor-core time of the useful FLOP or the time to read X, the longer."""
    return max(8.0 * N * K * d * 3 / (TF32X3_TFLOPS * 1e12), N * d * 4 / (HBM_TBPS * 1e12)) * 1e3


class Rows:
    """Appends rows to the CSV as they come (header once) and prints each."""

    def __init__(self, path: Path, part: str):
        from harness.env import device_label, git_commit

        self.path, self.base = path, {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                      "commit": git_commit(), "device": device_label(), "part": part}

    def write(self, **row) -> None:
        row = {**self.base, **row}
        new = not self.path.exists()
        with open(self.path, "a", newline="") as f:
            w = csv.DictWriter(f, COLUMNS, restval="")
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in COLUMNS})
        print({k: v for k, v in row.items() if k not in self.base and v != ""}, flush=True)


def _problem(name: str):
    """X, the shared init and a workspace holding its lift (center: the column mean), as a fit starts."""
    import torch

    from harness.data import make_dataset, shared_init
    from kernels.em import Workspace, data_center
    from kernels.lift_kernel import lift_into
    from kernels.measure import parse_shape

    N, K, d = parse_shape(name)
    X = make_dataset(N, K, d, 0, "cuda").X
    init = shared_init(X, K, 0)
    ws = Workspace(X, K, "one_pass")
    ws.set_center(data_center(X, True))
    params = [torch.as_tensor(a, device="cuda").double() for a in (init.weights, init.means, init.variances)]
    lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    return (N, K, d), X, init, ws


def _sweeps(X, ws, K: int, d: int, part: str) -> dict:
    """label -> a call of one E-step's sweep into ws's buffers."""
    from kernels.dispatch import launch_config
    from kernels.one_pass import one_pass_statistics
    from kernels.one_pass_ws import one_pass_statistics_ws

    out = (ws.n, ws.su, ws.ll)
    if part == "triton":
        cfg = launch_config("one_pass", K, d)
        return {"triton": lambda: one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, "tf32x3", out=out)}
    return {label: (lambda kw=kw: one_pass_statistics_ws(X, ws.center, ws.W, ws.b, out, **kw))
            for label, kw in WS_SWEEPS.items()}


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}"


def check(rows: Rows) -> None:
    """Both kernels' worst per-component errors against float64 statistics of the same lift."""
    import torch

    from kernels.one_pass_ws import float64_statistics, per_component_errors

    for name in CHECK_SHAPES:
        (N, K, d), X, _, ws = _problem(name)
        reference = float64_statistics(X, ws.center, ws.W, ws.b, K)
        for part in ("triton", "ws"):
            for label, sweep in _sweeps(X, ws, K, d, part).items():
                try:
                    for buffer in (ws.n, ws.su, ws.ll):
                        buffer.zero_()
                    sweep()
                    torch.cuda.synchronize()
                    rows.write(shape=name, N=N, K=K, d=d, kernel=label, **per_component_errors(ws.n, ws.su, ws.ll,
                                                                                                reference))
                except Exception as e:  # a kernel that fails is a row, not the end of the check
                    traceback.print_exc()
                    rows.write(shape=name, N=N, K=K, d=d, kernel=label, error=_error_text(e))
        del X, ws
        torch.cuda.empty_cache()


def time_part(rows: Rows, part: str) -> None:
    """Kernel time of each sweep and ms per iteration of a graph-replayed 10-iteration fit (Triton, or the
    warp-specialized kernel through the launch-config switch) at every timed shape."""
    import torch

    import kernels
    from kernels.dispatch import launch_config
    from kernels.measure import time_ms
    from kernels.one_pass_ws import refusal

    for name in TIME_SHAPES:
        (N, K, d), X, init, ws = _problem(name)
        floor = roofline_ms(N, K, d)
        for label, sweep in _sweeps(X, ws, K, d, part).items():
            try:
                sweep()
                torch.cuda.synchronize()
                ms = time_ms(sweep, KERNEL_REPS)
                rows.write(shape=name, N=N, K=K, d=d, kernel=label, kernel_ms=round(ms, 4), roofline_ms=round(floor, 4),
                           kernel_roofline_fraction=round(floor / ms, 3))
            except Exception as e:
                traceback.print_exc()
                rows.write(shape=name, N=N, K=K, d=d, kernel=label, error=_error_text(e))
        cfg = dataclasses.replace(launch_config("one_pass", K, d), warp_specialized_one_pass=int(part == "ws"))
        label = "triton" if part == "triton" else "ws"
        try:
            if part == "ws" and (why := refusal(X, ws.W)):  # the switch would fall back to the Triton kernel
                raise ValueError(why)
            def fit():
                return kernels.fit(X, (init.weights, init.means, init.variances), FIT_ITERATIONS, algorithm="one_pass",
                                   config=cfg)

            r = fit()  # compiles and captures the graph
            per_iter = time_ms(fit, FIT_REPS) / FIT_ITERATIONS
            rows.write(shape=name, N=N, K=K, d=d, kernel=f"{label}_fit", fit_ms_per_iter=round(per_iter, 4),
                       roofline_ms=round(floor, 4), fit_roofline_fraction=round(floor / per_iter, 3),
                       fit_final_ell=float(r.log_likelihoods[-1]))
        except Exception as e:
            traceback.print_exc()
            rows.write(shape=name, N=N, K=K, d=d, kernel=f"{label}_fit", error=_error_text(e))
        del X, ws
        torch.cuda.empty_cache()


def summary(path: Path) -> None:
    """The timed rows side by side: per shape, each kernel's ms and fraction of the roofline."""
    if not path.exists():
        print("no rows were written")
        return
    with open(path, newline="") as f:
        got = list(csv.DictReader(f))
    print(f"\n{'shape':<16}{'kernel':<20}{'kernel ms':>10}{'fit ms/it':>11}{'roofline':>10}{'fraction':>10}  error")
    for r in got:
        if r["part"] == "check":
            continue
        frac = r["kernel_roofline_fraction"] or r["fit_roofline_fraction"]
        print(f"{r['shape']:<16}{r['kernel']:<20}{r['kernel_ms']:>10}{r['fit_ms_per_iter']:>11}{r['roofline_ms']:>10}"
              f"{frac:>10}  {r['error']}")
    print(f"\n{'shape':<16}{'kernel':<20}{'n_err':>10}{'s_err':>10}{'u_err':>10}{'ll_err':>10}  error")
    for r in got:
        if r["part"] == "check":
            print(f"{r['shape']:<16}{r['kernel']:<20}{_short(r['n_err']):>10}{_short(r['s_err']):>10}"
                  f"{_short(r['u_err']):>10}{_short(r['ll_err']):>10}  {r['error']}")


def _short(v: str) -> str:
    return f"{float(v):.2e}" if v else ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--part", choices=tuple(PART_TIMEOUT_S), help="run one part in this process (the parent runs all)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "one_pass_ws.csv"
    if a.part:
        rows = Rows(path, a.part)
        if a.part == "check":
            check(rows)
        else:
            time_part(rows, a.part)
        return 0
    failed = 0
    for part, timeout in PART_TIMEOUT_S.items():
        cmd = [sys.executable, "-m", "harness.studies.one_pass_ws", "--out", str(a.out), "--part", part]
        try:
            rc = subprocess.run(cmd, cwd=REPO, timeout=timeout).returncode
            why = f"exit status {rc}" if rc else ""
        except subprocess.TimeoutExpired:
            why = f"timed out after {timeout} s (a hang: the warp-specialized kernel's barriers?)"
        if why:
            failed += 1
            print(f"part {part}: {why}", flush=True)
            Rows(path, part).write(kernel=part, error=f"part {why}")
    summary(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
