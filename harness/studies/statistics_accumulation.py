"""The statistics kernels' accuracy and cost as the dispatch rule runs them (issues 21 and 23), in one GPU run.

    python -m harness.studies.statistics_accumulation --out results/h200/kernel_measure/numerics_<date>_<commit>
        [--accuracy-shapes table1|S,S,...] [--timing-shapes S,...|""] [--dispatch-shapes S,...|""]

(``table1``: Table 1's sixteen shapes, from conf/experiment/table1.yaml, and 100M_32_32; "" skips a part.)

Every statistics kernel adds each row tile's product (a fresh accumulator) into float32 running sums of at most
``LaunchConfig.sum_tiles`` row tiles a program (kernels/launch.py SUM_TILES; the grid grows where the persistent
one would give a program more). Three parts, rows appended as measured (a crash or a timeout keeps them), the
kernels compiled first in parallel worker processes (Triton's cache), work past ``--budget-s`` written as
skipped rows:

* ``accuracy.csv``: at ACCURACY_SHAPES, for Algorithm 2 and Algorithm 3 where they run, in memory (and streamed in 8
  chunks at N <= 20M, K <= 64, which is also what a distributed fit computes: float64 sums of the chunks'
  statistics), the max over components of the relative error of n, s, u (scales: turbo_gmm.diag.estep.SCALES) against
  - ``per_tile``: the same kernel with ``sum_tiles = 1``, every row tile committed alone in float64 (the same
    responsibilities bit for bit): the accumulation's error alone, issue 21's target (<= 1e-6);
  - ``float64``: float64 statistics of the same lift and normalizer (turbo_gmm.diag.estep.float64_statistics): the
    kernels' score rounding is part of this one.
  Configurations (CONFIGS): ``default`` (turbo_gmm.dispatch.launch_config: the warp-specialized kernels where they
  are routed), ``unbounded`` (the same with sum_tiles = 0: float32 sums over all of a program's tiles, the
  "tile_f32" rows of the committed 2026-12-01 run) and ``triton`` where the default is a warp-specialized kernel
  (the Triton kernel with the default bound: the path off Hopper).
* ``timing.csv``: ms per iteration of a graph-replayed ``turbo_gmm.fit`` (10 iterations, min of 3 fits, the column
  mean passed in as the harness arm does) of the same configurations at TIMING_SHAPES, beside the committed
  "before" (the tensor cores' accumulator across all tiles, up to issue 21) of BEFORE_CSV where it has the shape.
* ``dispatch.csv``: one E-step's sweep (kernel time, min over reps by CUDA events) of the Triton and the
  warp-specialized one-pass kernels at DISPATCH_SHAPES -- the N between 20K and 1M at which
  turbo_gmm.dispatch.WS_ONE_PASS_MIN_ROWS switches, and the issue-23 shapes with their roofline fraction.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, wait
from pathlib import Path

from harness.roofline import ISSUE_23_RATES, diagonal_ms

REPO = Path(__file__).resolve().parents[2]
BEFORE_CSV = REPO / "results/h200/kernel_measure/accumulation_timing_2026-12-01_1882514.csv"
CONFIGS = ("default", "unbounded", "triton")
# most telling first: a budget cut loses the least
ACCURACY_SHAPES = ("20M_32_32", "1M_4096_32", "100M_32_32", "4M_16_128", "1M_32_32")
TIMING_SHAPES = ("20M_32_32", "1M_4096_32", "4M_16_128", "4M_32_32", "1M_32_32", "1M_128_32")
DISPATCH_SHAPES = ("20K_32_32", "100K_32_32", "250K_32_32", "500K_32_32", "1M_32_32", "4M_32_32", "20M_32_32",
                   "1M_128_32")
STREAMED_MAX_N = 20_000_000
STREAM_CHUNKS = 8
N_ITER, REPS = 10, 3
KERNEL_REPS = 20
ACCURACY_COLUMNS = ["shape", "N", "K", "d", "algorithm", "mode", "config", "kernel", "sum_tiles", "reference",
                    "status", "max_rel_err_n", "max_rel_err_s", "max_rel_err_u", "tiles_per_sum", "seconds",
                    "git_commit", "device", "timestamp"]
TIMING_COLUMNS = ["shape", "N", "K", "d", "algorithm", "config", "kernel", "status", "ms_per_iter",
                  "before_ms_per_iter", "ratio_to_before", "n_iter", "reps", "launch_config", "git_commit", "device",
                  "timestamp"]
DISPATCH_COLUMNS = ["shape", "N", "K", "d", "kernel", "status", "kernel_ms", "roofline_ms", "roofline_fraction",
                    "programs", "git_commit", "device", "timestamp"]


class Appender:
    """A CSV written row by row and flushed, so a crash keeps what was measured."""

    def __init__(self, path: Path | None, columns: list[str], provenance: dict):
        self.columns, self.provenance = columns, provenance
        self.file = open(path, "w", newline="") if path else None  # None: rows printed only (the compile workers)
        if self.file:
            self.writer = csv.DictWriter(self.file, columns, extrasaction="ignore")
            self.writer.writeheader()
            self.file.flush()

    def write(self, row: dict) -> None:
        if not self.file:
            return
        self.writer.writerow({**self.provenance, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **row})
        self.file.flush()
        print(json.dumps({k: row.get(k) for k in self.columns if k in row}), flush=True)


def configs(algorithm: str, K: int, d: int, kernel_of) -> dict:
    """CONFIGS' launch configs for (K, d); ``kernel_of(cfg)`` names the kernel a config runs, so that "triton"
    is there only where the default runs a warp-specialized kernel."""
    from turbo_gmm.dispatch import launch_config

    default = launch_config(algorithm, K, d)
    out = {"default": default, "unbounded": dataclasses.replace(default, sum_tiles=0)}
    if kernel_of(default).endswith("_ws"):
        out["triton"] = dataclasses.replace(default, warp_specialized_one_pass=0, warp_specialized_pass2=0)
    return out


def problem(N: int, K: int, d: int):
    """make_dataset's X (seed 0), shared_init's parameters (float64, on X's device) and X's column mean."""
    import torch

    from turbo_gmm.datasets import make_dataset, shared_init
    from turbo_gmm.diag.em import data_center

    X = make_dataset(N, K, d, 0, "cuda").X
    init = shared_init(X, K, 0)
    params = [torch.as_tensor(a, device=X.device).double() for a in (init.weights, init.means, init.variances)]
    return X, params, data_center(X, True)


def algorithms_that_run(K: int, d: int) -> list[str]:
    """Both algorithms, less Algorithm 2 where it cannot hold its lifted parameters in shared memory."""
    from turbo_gmm.diag.lift import pow2_at_least_16
    from turbo_gmm.diag.one_pass import _wgmma_shared_memory_limit, shared_memory_floor

    limit = _wgmma_shared_memory_limit(0)
    fits = limit is None or shared_memory_floor(pow2_at_least_16(K), pow2_at_least_16(d), "tf32x3") <= limit
    return (["one_pass"] if fits else []) + ["two_pass"]


def tiles_per_sum(stats, cfg) -> int:
    """The most row tiles one float32 running sum of ``cfg``'s kernel adds at this problem's N."""
    import triton

    from turbo_gmm.diag import one_pass_ws
    from turbo_gmm.launch import program_count, statistics_pass_grid, sum_bounded

    X, K = stats.X, stats.K
    kernel = stats.kernel(cfg)
    if kernel == "one_pass_ws":
        n_tiles = triton.cdiv(X.shape[0], one_pass_ws.BLOCK_N)
        return triton.cdiv(triton.cdiv(n_tiles, one_pass_ws.program_count(n_tiles, X.device, cfg.sum_tiles)), 2)
    block_n = 64 if kernel == "two_pass_ws" else cfg.block_n
    n_tiles = triton.cdiv(X.shape[0], block_n)
    if kernel == "one_pass":
        programs = sum_bounded(program_count(n_tiles, X.device, cfg.programs_per_sm), n_tiles, cfg.sum_tiles)
    else:
        programs = statistics_pass_grid(K, min(cfg.block_k, stats.ws.k_pad), n_tiles, X.device, cfg)[1]
    return triton.cdiv(n_tiles, programs)


def streamed(X, params, center, algorithm: str, cfg):
    """Statistics of X in STREAM_CHUNKS row chunks (turbo_gmm.diag.estep.BlockStatistics, float64 sums over chunks), chunk
    boundaries on multiples of 4096 rows so that Algorithm 3's pass 1 sees the same row tiles as in memory."""
    from turbo_gmm.diag.estep import BlockStatistics

    K = params[1].shape[0]
    block = BlockStatistics(K, X.shape[1], center, "triton", algorithm, "tf32x3", cfg)
    step = -(-X.shape[0] // STREAM_CHUNKS // 4096) * 4096
    total = None
    for r0 in range(0, X.shape[0], step):
        st = block(X[r0 : r0 + step], *params)
        total = st if total is None else total.__iadd__(st)
    return total.n, total.s, total.u


def _failure(e: BaseException) -> str:
    return f"fail ({type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''})"


def accuracy(shape: str, out: Appender, deadline: float, N_override=None) -> None:
    import torch

    from harness.studies.measure import parse_shape
    from turbo_gmm.dispatch import launch_config
    from turbo_gmm.testing import LiftedStatistics

    N, K, d = parse_shape(shape)
    N = N_override or N
    X, params, center = problem(N, K, d)
    for algorithm in algorithms_that_run(K, d):
        t0 = time.perf_counter()
        base = LiftedStatistics(X, params, center, algorithm, launch_config(algorithm, K, d))
        print(json.dumps({"shape": shape, "algorithm": algorithm, "lift_and_float64_s": round(time.perf_counter() - t0, 2)}),
              flush=True)
        modes = ["in_memory"] + (["streamed"] if N <= STREAMED_MAX_N and K <= 64 else [])
        chunk = slice(0, -(-N // STREAM_CHUNKS // 4096) * 4096)
        for name, cfg in configs(algorithm, K, d, base.kernel).items():
            for mode in modes:
                kernel = base.kernel(cfg, slice(None) if mode == "in_memory" else chunk)
                # a chunk under WS_ONE_PASS_MIN_ROWS runs the Triton kernel: its own per-tile reference
                ref_cfg = cfg if kernel == base.kernel(cfg) else dataclasses.replace(cfg, warp_specialized_one_pass=0)
                row = {"shape": shape, "N": N, "K": K, "d": d, "algorithm": algorithm, "mode": mode, "config": name,
                       "kernel": kernel, "sum_tiles": cfg.sum_tiles}
                if time.perf_counter() > deadline:
                    for reference in ("per_tile", "float64"):
                        out.write({**row, "reference": reference, "status": "skipped (budget)"})
                    continue
                t0 = time.perf_counter()
                try:
                    got = base(cfg) if mode == "in_memory" else streamed(X, params, center, algorithm, cfg)
                    errors = base.errors(got, ref_cfg)
                    torch.cuda.synchronize()
                    status = "ok"
                except Exception as e:  # a configuration the compiler refuses is a result
                    errors, status = {}, _failure(e)
                for reference in ("per_tile", "float64"):
                    out.write({**row, "reference": reference, "status": status,
                               **{f"max_rel_err_{k}": f"{v:.3e}" for k, v in errors.get(reference, {}).items()},
                               "tiles_per_sum": tiles_per_sum(base, cfg) if mode == "in_memory" else "",
                               "seconds": round(time.perf_counter() - t0, 3)})
        del base
        torch.cuda.empty_cache()


def before_ms(shape: str) -> float | None:
    """ms/iter of "before" (the tensor cores' accumulator across all tiles) in BEFORE_CSV, where it has the shape."""
    with open(BEFORE_CSV, newline="") as f:
        for r in csv.DictReader(f):
            if r["shape"] == shape and r["variant"] == "before" and r["status"] == "ok":
                return float(r["ms_per_iter"])
    return None


def timing(shape: str, out: Appender, deadline: float, N_override=None, reps=REPS) -> None:
    import torch

    import turbo_gmm
    from harness.studies.measure import parse_shape, time_ms
    from turbo_gmm.diag.em import Workspace, resolve_algorithm, statistics_kernel

    N, K, d = parse_shape(shape)
    N = N_override or N
    X, params, center = problem(N, K, d)
    algorithm = resolve_algorithm(K, d, "auto", "tf32x3")
    ws = Workspace(X, K, algorithm)  # for the kernel names only
    before = before_ms(shape) if N_override is None else None
    for name, cfg in configs(algorithm, K, d, lambda c: statistics_kernel(X, ws, algorithm, "tf32x3", c)).items():
        row = {"shape": shape, "N": N, "K": K, "d": d, "algorithm": algorithm, "config": name,
               "kernel": statistics_kernel(X, ws, algorithm, "tf32x3", cfg), "n_iter": N_ITER, "reps": reps,
               "launch_config": json.dumps(dataclasses.asdict(cfg)), "before_ms_per_iter": before or ""}
        if time.perf_counter() > deadline:
            out.write({**row, "status": "skipped (budget)"})
            continue

        def fit():
            return turbo_gmm.fit(X, params, N_ITER, algorithm=algorithm, center=center, config=cfg)

        try:
            r = fit()  # compile, capture the graph
            assert r.kernel == row["kernel"], (r.kernel, row["kernel"])
            ms = time_ms(fit, reps) / N_ITER
            out.write({**row, "status": "ok", "ms_per_iter": round(ms, 4),
                       "ratio_to_before": round(ms / before, 4) if before else ""})
        except Exception as e:
            out.write({**row, "status": _failure(e)})
    del ws
    torch.cuda.empty_cache()


def dispatch(shape: str, out: Appender, deadline: float, N_override=None, reps=KERNEL_REPS) -> None:
    """One E-step's sweep by each one-pass kernel (the warp-specialized one forced at any N)."""
    import torch

    from harness.studies.measure import parse_shape, time_ms
    from turbo_gmm.diag import one_pass_ws
    from turbo_gmm.dispatch import launch_config
    from turbo_gmm.diag.em import Workspace
    from turbo_gmm.diag.lift_kernel import lift_into
    from turbo_gmm.diag.one_pass import one_pass_statistics

    N, K, d = parse_shape(shape)
    N = N_override or N
    X, params, center = problem(N, K, d)
    ws = Workspace(X, K, "one_pass")
    ws.set_center(center)
    lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
    default = launch_config("one_pass", K, d)
    sweeps = {"one_pass": dataclasses.replace(default, warp_specialized_one_pass=0),
              "one_pass_ws": dataclasses.replace(default, warp_specialized_one_pass=1, warp_specialized_one_pass_rows=0)}
    floor = diagonal_ms(N, K, d, "tf32x3", ISSUE_23_RATES)  # issue 23's roofline, as its table gives it
    n_tiles = -(-N // one_pass_ws.BLOCK_N)
    for kernel, cfg in sweeps.items():
        row = {"shape": shape, "N": N, "K": K, "d": d, "kernel": kernel, "roofline_ms": round(floor, 4),
               "programs": one_pass_ws.program_count(n_tiles, X.device, cfg.sum_tiles) if kernel == "one_pass_ws" else ""}
        if time.perf_counter() > deadline:
            out.write({**row, "status": "skipped (budget)"})
            continue

        def sweep():
            one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, "tf32x3", out=(ws.n, ws.su, ws.ll))

        try:
            sweep()
            torch.cuda.synchronize()
            ms = time_ms(sweep, reps)
            out.write({**row, "status": "ok", "kernel_ms": round(ms, 4), "roofline_fraction": round(floor / ms, 3)})
        except Exception as e:
            out.write({**row, "status": _failure(e)})
    del ws
    torch.cuda.empty_cache()


def warm_rows(N: int) -> int:
    """A small N whose kernel arguments Triton specializes as N's (N mod 16, the row-tile counts mod 16 at
    32, 64 and 256 rows per tile, >= 2304 row tiles of 64 so the persistent grids are as large): compiling at
    it fills the cache the full-size run reads."""
    return N % 4096 + 4096 * 36


def _compile_worker(shape: str, part: str) -> str:
    """One worker's share of the compiling: ``shape``'s kernels of ``part`` at :func:`warm_rows` rows."""
    from harness.studies.measure import parse_shape

    N = warm_rows(parse_shape(shape)[0])
    sink = Appender(None, [], {})
    if part == "accuracy":
        accuracy(shape, sink, float("inf"), N_override=N)
    elif part == "timing":
        timing(shape, sink, float("inf"), N_override=N, reps=1)
    else:  # the warp-specialized one pass, which the defaults route only from 500 000 rows
        dispatch(shape, sink, float("inf"), N_override=N, reps=1)
    return f"{shape}/{part}"


def precompile(jobs, workers: int, timeout_s: float) -> None:
    """Compile every (shape, part)'s kernels in ``workers`` processes at once (spawned: CUDA does not survive a fork)."""
    if workers <= 0:
        return
    t0 = time.perf_counter()
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(_compile_worker, shape, part) for shape, part in jobs]
    done, _ = wait(futures, timeout=timeout_s)
    pool.shutdown(wait=False, cancel_futures=True)  # past the timeout the main run compiles what is left itself
    failed = [f"{type(j.exception()).__name__}: {str(j.exception())[:200]}" for j in done if j.exception() is not None]
    print(json.dumps({"precompiled": len(done) - len(failed), "of": len(futures), "seconds": round(time.perf_counter() - t0, 1),
                      "failures": failed[:5]}), flush=True)


def shape_list(text: str) -> tuple[str, ...]:
    """Comma-separated shape names; "table1" is Table 1's sweep (its Hydra config) and 100M_32_32."""
    if text == "table1":
        from omegaconf import OmegaConf

        sweep = OmegaConf.load(REPO / "conf/experiment/table1.yaml").hydra.sweeper.params.shape
        return (*sweep.split(","), "100M_32_32")
    return tuple(t for t in text.split(",") if t)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for accuracy.csv, timing.csv and dispatch.csv")
    p.add_argument("--budget-s", type=float, default=225.0, help="seconds after which the remaining work is skipped")
    p.add_argument("--compile-workers", type=int, default=min(12, max(0, (os.cpu_count() or 2) - 2)))
    p.add_argument("--accuracy-shapes", type=shape_list, default=ACCURACY_SHAPES)
    p.add_argument("--timing-shapes", type=shape_list, default=TIMING_SHAPES)
    p.add_argument("--dispatch-shapes", type=shape_list, default=DISPATCH_SHAPES)
    a = p.parse_args(argv)
    t_start = time.perf_counter()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("this study measures the GPU's kernels: it needs a CUDA GPU")
    jobs = [(s, "accuracy") for s in a.accuracy_shapes] + [(s, "timing") for s in a.timing_shapes]
    jobs += [(s, "dispatch") for s in ("20M_32_32", "1M_128_32") if s in a.dispatch_shapes]  # K_pad 32 and 128
    precompile(jobs, a.compile_workers, timeout_s=0.45 * a.budget_s)

    from harness import env

    a.out.mkdir(parents=True, exist_ok=True)
    prov = {"git_commit": env.git_commit(), "device": torch.cuda.get_device_name()}
    deadline = t_start + a.budget_s
    dispatch_csv = Appender(a.out / "dispatch.csv", DISPATCH_COLUMNS, prov)
    for shape in a.dispatch_shapes:  # small and quick: first
        dispatch(shape, dispatch_csv, deadline)
    time_csv = Appender(a.out / "timing.csv", TIMING_COLUMNS, prov)
    acc_csv = Appender(a.out / "accuracy.csv", ACCURACY_COLUMNS, prov)
    for shape in dict.fromkeys(a.accuracy_shapes + a.timing_shapes):
        if shape in a.accuracy_shapes:
            accuracy(shape, acc_csv, deadline)
        if shape in a.timing_shapes:
            timing(shape, time_csv, deadline)
    print(json.dumps({"seconds": round(time.perf_counter() - t_start, 1), "out": str(a.out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
