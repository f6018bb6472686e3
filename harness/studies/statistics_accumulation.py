"""Per-component accuracy and cost of the statistics kernels' accumulation variants (issue 21), in one GPU run.

    python -m harness.studies.statistics_accumulation --out results/h200/accumulation_<date>_<commit> [--budget-s 225]

How a statistics program sums its row tiles (kernels/launch.py ACCUMULATIONS, LaunchConfig.accumulation and
commit_tiles) is measured variant by variant, "before" being the accumulation up to issue 21 (the tensor
cores' float32 accumulator across all of a program's row tiles, one commit):

* ``accuracy.csv``: at each shape, for Algorithm 2 and Algorithm 3 where they run, in memory (and streamed in 8
  chunks at N <= 20M, which is also what a distributed fit computes: float64 sums of shards' statistics), the
  max over components of the relative error of n, s, u (scales: kernels.estep.SCALES) against
  - ``float64``: float64 statistics of the same lift and normalizer (kernels.estep.float64_statistics), the
    issue's target (<= 1e-6): the kernels' own score rounding is part of this error;
  - ``per_tile``: the same kernel with one row tile per program, every tile committed in float64 (the same
    responsibilities bit for bit): the error of the accumulation across tiles alone.
* ``timing.csv``: ms per iteration of a graph-replayed ``kernels.fit`` (10 iterations, min of 3 fits), the
  dispatch rule's algorithm and launch config with each variant.

Rows are appended as they are measured (a crash or a timeout keeps them); the kernels of every variant are
compiled first in parallel worker processes (Triton's cache), and work past ``--budget-s`` is written as
skipped rows instead of run.
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

VARIANTS = {  # name -> LaunchConfig fields; "before": the accumulation up to issue 21
    "before": {"accumulation": "program", "commit_tiles": 0},
    "tile_f32": {"accumulation": "tile_f32", "commit_tiles": 0},
    "tile_f32x2": {"accumulation": "tile_f32x2", "commit_tiles": 0},
    "tile_f64": {"accumulation": "tile_f64", "commit_tiles": 0},
    "program_commit4": {"accumulation": "program", "commit_tiles": 4},
    "tile_f32_commit64": {"accumulation": "tile_f32", "commit_tiles": 64},
}
# (shape, accuracy, timing), most telling first: a budget cut loses the least
PLAN = [("20M_32_32", True, True), ("1M_4096_32", True, True), ("100M_32_32", True, False),
        ("4M_16_128", True, True), ("1M_32_32", True, False), ("4M_32_32", False, True)]
STREAMED_MAX_N = 20_000_000
STREAM_CHUNKS = 8
N_ITER, REPS = 10, 3
REFERENCE_SLICE_ROWS = 1 << 20  # per-tile reference of Algorithm 3: row slices, so its splits fit gridDim.y
ACCURACY_COLUMNS = ["shape", "N", "K", "d", "algorithm", "mode", "variant", "accumulation", "commit_tiles",
                    "reference", "status", "max_rel_err_n", "max_rel_err_s", "max_rel_err_u", "rows_per_program",
                    "seconds", "git_commit", "device", "timestamp"]
TIMING_COLUMNS = ["shape", "N", "K", "d", "algorithm", "variant", "accumulation", "commit_tiles", "status",
                  "ms_per_iter", "n_iter", "reps", "launch_config", "git_commit", "device", "timestamp"]


class Appender:
    """A CSV written row by row and flushed, so a crash keeps what was measured."""

    def __init__(self, path: Path, columns: list[str], provenance: dict):
        self.columns, self.provenance = columns, provenance
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, columns, extrasaction="ignore")
        self.writer.writeheader()
        self.file.flush()

    def write(self, row: dict) -> None:
        self.writer.writerow({**self.provenance, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **row})
        self.file.flush()
        print(json.dumps({k: row.get(k) for k in self.columns if k in row}), flush=True)


def variant_config(algorithm: str, K: int, d: int, variant: str):
    from kernels.dispatch import launch_config

    return dataclasses.replace(launch_config(algorithm, K, d), **VARIANTS[variant])


def device():
    """The GPU, or the CPU where the kernels run in Triton's interpreter (the tests' small runs)."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def problem(N: int, K: int, d: int):
    """make_dataset's X (seed 0), shared_init's parameters (float64, on X's device) and X's column mean."""
    import torch

    from kernels.datasets import make_dataset, shared_init
    from kernels.em import data_center

    X = make_dataset(N, K, d, 0, device()).X
    init = shared_init(X, K, 0)
    params = [torch.as_tensor(a, device=X.device).double() for a in (init.weights, init.means, init.variances)]
    return X, params, data_center(X, True)


def algorithms_that_run(K: int, d: int) -> list[str]:
    """Both algorithms, less Algorithm 2 where it cannot hold its lifted parameters in shared memory."""
    import torch

    from kernels.lift import pow2_at_least_16
    from kernels.one_pass import _wgmma_shared_memory_limit, shared_memory_floor

    limit = _wgmma_shared_memory_limit(0) if torch.cuda.is_available() else None
    fits = limit is None or shared_memory_floor(pow2_at_least_16(K), pow2_at_least_16(d), "tf32x3") <= limit
    return (["one_pass"] if fits else []) + ["two_pass"]


class Statistician:
    """The lift (and for Algorithm 3 the normalizer) of one problem, and its statistics under any launch config."""

    def __init__(self, X, params, center, algorithm: str):
        import triton

        from kernels.dispatch import launch_config
        from kernels.em import Workspace
        from kernels.lift_kernel import lift_into
        from kernels.two_pass import normalizer_pass

        self.X, self.algorithm = X, algorithm
        self.K, d = params[1].shape
        self.ws = Workspace(X, self.K, algorithm)
        self.ws.set_center(center)
        ws = self.ws
        lift_into(*params, ws.center64, ws.W, ws.b, ws.n, ws.su, ws.ll)
        self.base = launch_config(algorithm, self.K, d)
        if algorithm == "two_pass":
            normalizer_pass(X, ws.center, ws.W, ws.b, self.K, self.base, "tf32x3", ws.L, ws.ll)
        self.n_tiles = triton.cdiv(X.shape[0], self.base.block_n)

    def run(self, cfg, rows=slice(None), n_splits=None, clear=True):
        """n (K,), s, u (K, d) float64 of the rows ``rows`` with ``cfg``."""
        from kernels.one_pass import one_pass_statistics
        from kernels.two_pass import statistics_pass

        ws, K, d = self.ws, self.K, self.X.shape[1]
        if clear:
            ws.n.zero_()
            ws.su.zero_()
        X = self.X[rows]
        if self.algorithm == "one_pass":
            one_pass_statistics(X, ws.center, ws.W, ws.b, cfg, "tf32x3", out=(ws.n, ws.su, ws.ll))
        else:
            statistics_pass(X, ws.center, ws.W, ws.b, K, cfg, "tf32x3", ws.L[rows], ws.n, ws.su, n_splits)
        return ws.n[:K].clone(), ws.su[:K, :d].clone(), ws.su[:K, ws.d_pad : ws.d_pad + d].clone()

    def per_tile(self):
        """Every row tile committed on its own in float64: the variants' responsibilities, no accumulation across tiles."""
        import triton

        cfg = dataclasses.replace(self.base, **VARIANTS["before"])
        if self.algorithm == "one_pass":
            return self.run(dataclasses.replace(cfg, programs_per_sm=float(self.n_tiles)))
        N = self.X.shape[0]
        out = None
        for r0 in range(0, N, REFERENCE_SLICE_ROWS):
            rows = slice(r0, min(N, r0 + REFERENCE_SLICE_ROWS))
            tiles = triton.cdiv(rows.stop - rows.start, cfg.block_n)
            out = self.run(cfg, rows, n_splits=tiles, clear=r0 == 0)
        return out

    def rows_per_program(self, cfg) -> float:
        from kernels.launch import program_count
        from kernels.two_pass import statistics_grid

        programs = program_count(self.n_tiles, self.X.device, cfg.programs_per_sm)
        if self.algorithm == "one_pass":
            return self.X.shape[0] / programs
        return self.X.shape[0] / statistics_grid(self.K, min(cfg.block_k, self.ws.k_pad), programs)[1]


def streamed(X, params, center, algorithm: str, cfg):
    """Statistics of X in STREAM_CHUNKS row chunks (kernels.estep.BlockStatistics, float64 sums over chunks), chunk
    boundaries on multiples of 4096 rows so that Algorithm 3's pass 1 sees the same row tiles as in memory."""
    from kernels.estep import BlockStatistics

    K = params[1].shape[0]
    block = BlockStatistics(K, X.shape[1], center, "triton", algorithm, "tf32x3", cfg)
    step = -(-X.shape[0] // STREAM_CHUNKS // 4096) * 4096
    total = None
    for r0 in range(0, X.shape[0], step):
        st = block(X[r0 : r0 + step], *params)
        total = st if total is None else total.__iadd__(st)
    return total.n, total.s, total.u


def accuracy(shape: str, variants, out: Appender, deadline: float, N_override=None) -> None:
    import torch

    from kernels.estep import float64_statistics, per_component_errors
    from harness.studies.measure import parse_shape

    N, K, d = parse_shape(shape)
    N = N_override or N
    base = {"shape": shape, "N": N, "K": K, "d": d}
    X, params, center = problem(N, K, d)
    for algorithm in algorithms_that_run(K, d):
        t0 = time.perf_counter()
        st = Statistician(X, params, center, algorithm)
        ref64 = float64_statistics(X, st.ws.center, st.ws.W, st.ws.b, K, st.ws.L)
        ref_tile = st.per_tile()
        references = {"float64": ref64, "per_tile": {**ref64, **dict(zip("nsu", ref_tile))}}
        print(json.dumps({"shape": shape, "algorithm": algorithm, "references_seconds": round(time.perf_counter() - t0, 2)}),
              flush=True)
        modes = ["in_memory"] + (["streamed"] if N <= STREAMED_MAX_N and K <= 64 else [])
        for variant in variants:
            cfg = dataclasses.replace(st.base, **VARIANTS[variant])
            for mode in modes:
                row = {**base, "algorithm": algorithm, "mode": mode, "variant": variant, **VARIANTS[variant]}
                if time.perf_counter() > deadline:
                    for reference in references:
                        out.write({**row, "reference": reference, "status": "skipped (budget)"})
                    continue
                t0 = time.perf_counter()
                try:
                    got = st.run(cfg) if mode == "in_memory" else streamed(X, params, center, algorithm, cfg)
                    if X.is_cuda:
                        torch.cuda.synchronize()
                    status = "ok"
                except Exception as e:  # a variant the compiler refuses is a result
                    got, status = None, f"fail ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
                seconds = time.perf_counter() - t0
                for reference, ref in references.items():
                    errors = per_component_errors(*got, ref) if got is not None else {}
                    out.write({**row, "reference": reference, "status": status,
                               **{f"max_rel_err_{k}": f"{v:.3e}" for k, v in errors.items()},
                               "rows_per_program": round(st.rows_per_program(cfg)) if mode == "in_memory" else "",
                               "seconds": round(seconds, 3)})
        del st, ref64, ref_tile, references
        if X.is_cuda:
            torch.cuda.empty_cache()


def timing(shape: str, variants, out: Appender, deadline: float, N_override=None, reps=REPS) -> None:
    import torch

    import kernels
    from kernels.em import resolve_algorithm
    from harness.studies.measure import parse_shape, time_ms

    N, K, d = parse_shape(shape)
    N = N_override or N
    X, params, center = problem(N, K, d)
    algorithm = resolve_algorithm(K, d, "auto", "tf32x3")
    for variant in variants:
        cfg = variant_config(algorithm, K, d, variant)
        row = {"shape": shape, "N": N, "K": K, "d": d, "algorithm": algorithm, "variant": variant, **VARIANTS[variant],
               "n_iter": N_ITER, "reps": reps, "launch_config": json.dumps(dataclasses.asdict(cfg))}
        if time.perf_counter() > deadline:
            out.write({**row, "status": "skipped (budget)"})
            continue

        def fit():
            return kernels.fit(X, params, N_ITER, algorithm=algorithm, center=center, config=cfg)

        try:
            fit()  # compile, capture the graph
            ms = time_ms(fit, reps) / N_ITER
            out.write({**row, "status": "ok", "ms_per_iter": round(ms, 4)})
        except Exception as e:
            out.write({**row, "status": f"fail ({type(e).__name__}: {str(e).splitlines()[0][:160]})"})
    torch.cuda.empty_cache()


def warm_rows(N: int) -> int:
    """A small N whose kernel arguments Triton specializes as N's (N mod 16, the row-tile counts mod 16 at
    32, 64 and 256 rows per tile, >= 2304 row tiles of 64 so the persistent grids are as large): compiling at
    it fills the cache the full-size run reads."""
    return N % 4096 + 4096 * 36


def _compile_worker(shape: str, variant: str) -> str:
    """One worker's share of the compiling: ``shape``'s kernels under ``variant`` at :func:`warm_rows` rows."""
    import io

    from harness.studies.measure import parse_shape

    N = warm_rows(parse_shape(shape)[0])
    sink = Appender.__new__(Appender)  # rows discarded: only the compiled kernels matter
    sink.columns, sink.provenance = [], {}
    sink.file = io.StringIO()
    sink.writer = csv.DictWriter(sink.file, [], extrasaction="ignore")
    plan = {s: (a, t) for s, a, t in PLAN}
    acc, tim = plan.get(shape, (True, False))
    if acc:
        accuracy(shape, [variant], sink, float("inf"), N_override=N)
    if tim:
        timing(shape, [variant], sink, float("inf"), N_override=N, reps=1)
    return f"{shape}/{variant}"


def precompile(shapes, variants, workers: int, timeout_s: float) -> None:
    """Compile every (shape, variant)'s kernels in ``workers`` processes at once (spawned: CUDA does not survive a fork)."""
    if workers <= 0:
        return
    t0 = time.perf_counter()
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    jobs = [pool.submit(_compile_worker, s, v) for s in shapes for v in variants]
    done, _ = wait(jobs, timeout=timeout_s)
    pool.shutdown(wait=False, cancel_futures=True)  # past the timeout the main run compiles what is left itself
    failed = [f"{type(j.exception()).__name__}: {str(j.exception())[:200]}" for j in done if j.exception() is not None]
    print(json.dumps({"precompiled": len(done) - len(failed), "of": len(jobs), "seconds": round(time.perf_counter() - t0, 1),
                      "failures": failed[:5]}), flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for accuracy.csv and timing.csv")
    p.add_argument("--budget-s", type=float, default=225.0, help="seconds after which the remaining work is skipped")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--shapes", default=None, help="comma-separated N_K_d shapes instead of the plan's (a shape "
                   "not in the plan: accuracy only), e.g. the other Table 1 shapes")
    p.add_argument("--compile-workers", type=int, default=min(12, max(0, (os.cpu_count() or 2) - 2)))
    a = p.parse_args(argv)
    t_start = time.perf_counter()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("this study measures the GPU's kernels: it needs a CUDA GPU")
    variants = a.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    flags = {shape: (acc, tim) for shape, acc, tim in PLAN}
    plan = PLAN if a.shapes is None else [(s, *flags.get(s, (True, False))) for s in a.shapes.split(",")]
    precompile([s for s, _, _ in plan], variants, a.compile_workers, timeout_s=0.55 * a.budget_s)

    from harness import env

    a.out.mkdir(parents=True, exist_ok=True)
    prov = {"git_commit": env.git_commit(), "device": torch.cuda.get_device_name()}
    acc_csv = Appender(a.out / "accuracy.csv", ACCURACY_COLUMNS, prov)
    time_csv = Appender(a.out / "timing.csv", TIMING_COLUMNS, prov)
    deadline = t_start + a.budget_s
    for shape, do_accuracy, do_timing in plan:
        if do_accuracy:
            accuracy(shape, variants, acc_csv, deadline)
        if do_timing:
            timing(shape, variants, time_csv, deadline)
    print(json.dumps({"seconds": round(time.perf_counter() - t_start, 1), "out": str(a.out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
