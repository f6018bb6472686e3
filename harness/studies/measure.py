"""Kernel-only and whole-iteration times, bandwidth, useful TFLOP/s (8NKd; the roofline is harness.roofline) and the
compiler's resource report (registers, spills, shared memory) per shape.

    python -m harness.studies.measure 1M_32_32 4M_16_128 ... [--algorithm auto|one_pass|two_pass]
        [--precision tf32x3|ieee|fp64] [--config block_n=32,num_stages=1,... (repeatable)]
        [--override sum_tiles=64 (repeatable)] [--sample-weight none,uniform] [--out FILE.csv]

--config times a whole launch config at every shape, --override the shape's own (dispatch.launch_config) with
those fields changed, beside the shape's own as it is.

Shapes are named N_K_d with K/M suffixes (20K = 20 000, 1M = 1 000 000). This is
a diagnostic for kernel work on a GPU; the benchmark numbers of record come from
the harness (`python -m harness arm=turbo_gmm ...`).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

import torch

import turbo_gmm
from harness.results import write_diagnostic_csv
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.dispatch import launch_config
from turbo_gmm.launch import config_fields, parse_config
from turbo_gmm.diag.em import Workspace, data_center, resolve_algorithm
from turbo_gmm.diag.lift_kernel import lift_into
from turbo_gmm.diag.one_pass import _one_pass_kernel, one_pass_statistics
from turbo_gmm.diag.two_pass import (_normalizer_kernel, _statistics_kernel, normalizer_pass, statistics_pass,
                              two_pass_statistics)

SUFFIX = {"K": 1_000, "M": 1_000_000}


def parse_shape(name: str):
    def num(t):
        return int(float(t[:-1]) * SUFFIX[t[-1]]) if t[-1] in SUFFIX else int(t)

    N, K, d = (num(t) for t in name.split("_"))
    return N, K, d


def compiled_resources(seen: set) -> list[dict]:
    """Compiler reports of kernels compiled since the last call."""
    rows = []
    for fn in (_one_pass_kernel, _normalizer_kernel, _statistics_kernel):
        for cache in fn.device_caches.values():
            for key, k in cache[0].items():
                if (fn.__name__, key) in seen:
                    continue
                seen.add((fn.__name__, key))
                k._init_handles()
                rows.append({"kernel": fn.__name__, "regs": k.n_regs, "spills": k.n_spills,
                             "shared_bytes": k.metadata.shared, "num_warps": k.metadata.num_warps})
    return rows


def time_ms(fn, reps: int) -> float:
    """Minimum over reps of one call, CUDA events."""
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b))
    return best


def row_weights(kind: str, N: int):
    """The sample_weight a row is timed with: none, or "uniform" ones drawn from [0.5, 1.5) (seed 0), the
    extra float32 stream a weighted fit reads beside X (issue 22's cost of sample_weight)."""
    if kind == "none":
        return None
    if kind == "uniform":
        g = torch.Generator(device="cuda").manual_seed(0)
        return torch.rand(N, device="cuda", generator=g) + 0.5
    raise ValueError(f"--sample-weight takes none or uniform, got {kind!r}")


def measure(name: str, algorithm: str, precision: str, n_iter: int, seen: set, config=None,
            weights: str = "none", override: str | None = None) -> dict:
    N, K, d = parse_shape(name)
    X = make_dataset(N, K, d, 0, "cuda").X
    sample_weight = row_weights(weights, N)
    init = shared_init(X, K, 0)
    center = data_center(X, True)
    alg = resolve_algorithm(K, d, algorithm, precision)
    cfg = config or launch_config(alg, K, d, precision)
    if override:
        cfg = dataclasses.replace(cfg, **config_fields(override))

    def fit(graph=True):
        return turbo_gmm.fit(X, (init.weights, init.means, init.variances), n_iter, algorithm=alg, precision=precision,
                           center=center, config=cfg, cuda_graph=graph, sample_weight=sample_weight)

    r = fit()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    iter_ms = time_ms(fit, 3) / n_iter
    peak_extra_mb = (torch.cuda.max_memory_allocated() - base) / 2**20
    fit(False)
    eager_ms = time_ms(lambda: fit(False), 3) / n_iter
    ws = Workspace(X, K, alg, precision)
    ws.set_center(center)
    params = [torch.as_tensor(a, device="cuda").double() for a in (init.weights, init.means, init.variances)]
    out = (ws.n, ws.su, ws.ll)
    lift_into(*params, ws.center64, ws.W, ws.b, *out)
    W, b = ws.W, ws.b
    passes = {}
    if alg == "one_pass":
        kern = lambda: one_pass_statistics(X, ws.center, W, b, cfg, precision, out=out,  # noqa: E731
                                           sample_weight=sample_weight)
    else:
        kern = lambda: two_pass_statistics(X, ws.center, W, b, K, cfg, precision, out=out, L_buffer=ws.L,  # noqa: E731
                                           sample_weight=sample_weight)
        passes = {  # each pass alone: which one the two-pass time goes to
            "pass1_ms": time_ms(lambda: normalizer_pass(X, ws.center, W, b, K, cfg, precision, ws.L, ws.ll), 10),
            "pass2_ms": time_ms(lambda: statistics_pass(X, ws.center, W, b, K, cfg, precision, ws.L, ws.n, ws.su), 10)}
    kernel_ms = time_ms(kern, 10)
    res = compiled_resources(seen)
    flop = 8.0 * N * K * d
    return {
        "shape": name, "N": N, "K": K, "d": d, "algorithm": alg, "precision": precision,
        "sample_weight": weights, "kernel": r.kernel, "override": override or "", **dataclasses.asdict(cfg),
        "iter_ms": round(iter_ms, 4), "eager_iter_ms": round(eager_ms, 4), "kernel_ms": round(kernel_ms, 4),
        **{k: round(v, 4) for k, v in passes.items()},
        "x_gb_per_s": round(N * d * 4 / (iter_ms * 1e-3) / 1e9, 1),
        "useful_tflops": round(flop / (iter_ms * 1e-3) / 1e12, 2),
        "peak_extra_mb": round(peak_extra_mb, 1), "n_floored": r.n_floored,
        "ll_per_point": float(r.log_likelihoods[-1]) / N,
        "resources": ";".join(f"{x['kernel']}:regs={x['regs']},spills={x['spills']},smem={x['shared_bytes']},"
                              f"warps={x['num_warps']}" for x in res),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="+")
    p.add_argument("--algorithm", default="auto")
    p.add_argument("--precision", default="tf32x3")
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--config", action="append", default=[None],
                   help="extra launch configs to time (repeatable): field=value,... of LaunchConfig")
    p.add_argument("--override", action="append", default=[],
                   help="fields changed over each shape's own launch config (repeatable): field=value,...")
    p.add_argument("--sample-weight", default="none",
                   help="comma-separated: none (unweighted) and/or uniform (weights in [0.5, 1.5))")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    seen: set = set()
    rows = []
    for name in a.shapes:
        for alg in a.algorithm.split(","):
            runs = [(text, None) for text in a.config] + [(None, text) for text in a.override]
            for text, override in runs:
                for weights in a.sample_weight.split(","):
                    try:
                        row = measure(name, alg, a.precision, a.n_iter, seen, parse_config(text), weights, override)
                    except Exception as e:  # one failing config (e.g. OutOfResources) must not stop the others
                        row = {"shape": name, "algorithm": alg, "config": text, "override": override or "",
                               "sample_weight": weights, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                    print(row, flush=True)
                    rows.append(row)
                    torch.cuda.empty_cache()
    if a.out:
        write_diagnostic_csv(a.out, rows)


if __name__ == "__main__":
    sys.exit(main())
