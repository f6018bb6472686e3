"""Full and tied covariance on the fused path: both dataflows x both algorithms, tied, and diag for reference.

    python -m harness.studies.full_bench --out DIR [--shapes 1M_32_32,4M_16_64] [--budget-s 240]
        [--config resident_weights=0 ... --configs-only]   # an A/B of FullConfig fields at the rule's choice

Per shape (N_K_d): the seeded centered data of turbo_gmm.datasets and its shared init (variances -> diagonal
precision Cholesky factors), then for every variant the ms per iteration of a 10-iteration fit (min of 3
after one untimed fit; a replayed CUDA graph, or eager where capture fails, said in ``graphed``) and its
accuracy after one EM step on the first ``--accuracy-rows`` rows against a float64 torch EM step from
the same parameters (relative errors of ell, weights, means, covariances). Rows go to
DIR/full_bench.csv as they are measured (appended: re-run skipped shapes with --shapes); a variant the
compiler refuses, or one past the time budget, is a row with its status. The first shape also runs
the rule's choice with float64 statistics slabs; every shape the rule's choice with the component moments and
with each ``--config`` (FullConfig overrides), and, where N K d^2 <= FLOAT64_MAX_WORK, full and tied by the
estimator's float64 E-step (precision "fp64", torch ops) beside the kernels. At the end: per shape the fastest
valid variant and its roofline fraction, and the thresholds of kernels/dispatch.py that the rows imply.

Roofline (useful FLOP at the precision's rate, X read once from HBM): full 2 N K d (d + 1) (score over
the upper triangle of the quadratic form plus the upper triangle of the second moments, a multiply-add
each), tied 4 N K d + 2 N d^2 (score and s, plus the whitening), diag 8 N K d (the paper's count);
tf32x3 at 396/3 TFLOP/s (TF32 dense 396), ieee at the 67 TFLOP/s of the FP32 units, HBM 4.3 TB/s.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import math
import time
from pathlib import Path
from types import SimpleNamespace

import torch

import turbo_gmm
import turbo_gmm.full as kf
import turbo_gmm.tied as kt
from harness import env
from harness.roofline import ISSUE_23_RATES, bound_ms
from turbo_gmm.datasets import make_dataset, shared_init
from turbo_gmm.full import estep as estep_full
from turbo_gmm.tied import estep as estep_tied
from turbo_gmm import dispatch
from turbo_gmm.launch import FullConfig
from turbo_gmm.diag.lift import pow2_at_least_16
from turbo_gmm.dispatch import MATRIX_FP64_FLOOR_WORK

SHAPES = ["1M_32_32", "4M_16_64", "1M_128_32", "20M_32_16", "1M_256_16"]
# the H200's rates: issue 23's TF32 and HBM figures, its env.json's float32 and float64 GEMM probes
RATES = {**ISSUE_23_RATES, "fp32_tflops": 50.7, "fp64_tflops": 60.5}
FLOAT64_MAX_WORK = 64 * MATRIX_FP64_FLOOR_WORK  # N K d^2 up to which the float64 E-step is timed beside the kernels
FLOAT64_CHUNK_BYTES = 1 << 30  # its (rows, K, d) float64 temporaries, a chunk of rows at a time
COLUMNS = ["date", "git_commit", "device", "shape", "N", "K", "d", "covariance", "dataflow", "algorithm", "precision",
           "slab_dtype", "moments", "config", "status", "graphed", "ms_per_iter", "ms_per_iter_reps", "roofline_ms",
           "roofline_frac", "accuracy_rows", "err_ell", "err_weights", "err_means", "err_covariances"]


def parse_shape(text: str) -> tuple[int, int, int]:
    n, k, d = text.split("_")
    scale = {"K": 10**3, "M": 10**6}
    return int(float(n[:-1]) * scale[n[-1]]) if n[-1] in scale else int(n), int(k), int(d)


def useful_flop(covariance: str, N: int, K: int, d: int) -> float:
    return {"full": 2.0 * N * K * d * (d + 1), "tied": 4.0 * N * K * d + 2.0 * N * d * d,
            "diag": 8.0 * N * K * d}[covariance]


def roofline_ms(covariance, precision, N, K, d) -> float:
    """The useful products at ``precision`` or one read of X, the longer (harness.roofline), at the H200's RATES."""
    return bound_ms(useful_flop(covariance, N, K, d), 4.0 * N * d, precision, RATES)[0]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One timed configuration: covariance type, dataflow, algorithm ("torch_float64": the estimator's float64
    E-step, turbo_gmm.full.estep's torch ops), precision, statistics slab dtype, moments, FullConfig overrides."""

    covariance: str
    dataflow: str
    algorithm: str
    precision: str
    slab_dtype: torch.dtype | None = None
    moments: str = ""
    config: str = ""  # "field=value,..." over the default config (turbo_gmm.dispatch.parse_full_config)


def variants(N: int, K: int, d: int, precisions, float64_slab: bool, configs=(), configs_only=False):
    """The variants to run at this shape: full covariances' moments about the center (a fit whose Cholesky
    fails there is a row with its error), the rule's choice with the component moments (the fallback of
    turbo_gmm.full.em) and with each of ``configs``; ``float64_slab`` adds the rule's choice with its statistics
    summed in float64 (accuracy against slab traffic); full and tied by the float64 E-step where N K d^2 <=
    FLOAT64_MAX_WORK (what precision="auto" takes up to MATRIX_FP64_FLOOR_WORK, against the kernels).
    ``configs_only``: the rule's choice with its default config and with each of ``configs``, nothing else
    (an A/B of FullConfig fields in one run)."""
    rule = (dispatch.full_dataflow(d), dispatch.full_algorithm(K, d))
    if configs_only:
        return [Variant("full", *rule, precision, torch.float32, "center", c) for precision in precisions
                for c in ("", *configs)]
    out = []
    for precision in precisions:
        for dataflow in ("products", "lift"):
            for algorithm in ("one_pass", "two_pass"):
                out.append(Variant("full", dataflow, algorithm, precision, torch.float32, "center"))
        out.append(Variant("full", *rule, precision, torch.float32, "component"))
        out += [Variant("full", *rule, precision, torch.float32, "center", c) for c in configs]
        if float64_slab:
            out.append(Variant("full", *rule, precision, torch.float64, "center"))
        for algorithm in ("one_pass", "two_pass"):
            out.append(Variant("tied", "whitened", algorithm, precision))
        out.append(Variant("diag", "lift", "auto", precision))
    if N * K * d * d <= FLOAT64_MAX_WORK:
        out += [Variant(c, "direct", "torch_float64", "fp64") for c in ("full", "tied")]
    return out


def initial_parameters(X, K: int, seed: int):
    """(weights, means, full U, tied U, variances) in float64 on X's device from turbo_gmm.datasets.shared_init."""
    init = shared_init(X, K, seed)
    dev = X.device
    w, m, v = (torch.as_tensor(a, device=dev).double() for a in (init.weights, init.means, init.variances))
    U = torch.diag_embed(v.rsqrt())
    return w, m, U, U[0].clone(), v


def run_fit(v: Variant, X, params, n_iter, cuda_graph=True):
    w, m, U, U_tied, var = params
    zero = torch.zeros(X.shape[1], dtype=torch.float64, device=X.device)  # the data is centered already
    if v.algorithm == "torch_float64":
        return float64_fit(v.covariance, X, params, n_iter)
    if v.covariance == "full":
        cfg = dispatch.parse_full_config(v.config, v.algorithm, m.shape[0], X.shape[1], v.dataflow)
        cfg = FullConfig(**{**cfg.__dict__, "slab_dtype": v.slab_dtype})
        return kf.fit(X, (w, m, U), n_iter, dataflow=v.dataflow, algorithm=v.algorithm, precision=v.precision,
                      center=zero, config=cfg, cuda_graph=cuda_graph, moments=v.moments)
    if v.covariance == "tied":
        return kt.fit(X, (w, m, U_tied), n_iter, algorithm=v.algorithm, precision=v.precision, center=zero,
                      cuda_graph=cuda_graph)
    return turbo_gmm.fit(X, (w, m, var), n_iter, precision=v.precision, center=zero, cuda_graph=cuda_graph)


def float64_fit(covariance, X, params, n_iter):
    """n_iter iterations of the estimator's float64 E-step (turbo_gmm.full.estep, torch ops on X's device, row
    chunks of FLOAT64_CHUNK_BYTES) and its M-step, as precision "fp64" runs full and tied: the fit's parameters
    and each iteration's ell."""
    w, m, U, U_tied, _ = params
    K, d = m.shape
    zero = torch.zeros(d, dtype=torch.float64, device=X.device)
    estep = estep_full if covariance == "full" else estep_tied
    block = estep.BlockStatistics(K, d, zero, "torch")
    rows = max(1, FLOAT64_CHUNK_BYTES // estep.bytes_per_row(K, d))
    scatter = estep_tied.centered_moments(X, None, zero)[0] if covariance == "tied" else None
    U = U if covariance == "full" else U_tied
    lls = []
    for _ in range(n_iter):
        st = None
        for r0 in range(0, X.shape[0], rows):
            part = block(X[r0 : r0 + rows], w, m, U)
            st = part if st is None else st.__iadd__(part)
        lls.append(st.ll)
        w, m, cov, U, _ = block.mstep(st, 1e-6, lambda: scatter)
    return SimpleNamespace(weights=w, means=m, covariances=cov, log_likelihoods=torch.stack(lls))


def time_fit(run, reps: int, n_iter: int):
    """(graphed, [ms per iteration of each timed rep]) after one untimed fit (compile, capture)."""
    try:
        run(True)
        graphed = True
    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
        if "out of resource" in str(e).lower() or isinstance(e, torch.cuda.OutOfMemoryError):
            raise
        print(f"    graph capture failed ({type(e).__name__}: {str(e)[:120]}); timing the eager loop")
        torch.cuda.synchronize()
        graphed = False
        run(False)
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(graphed)
        torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - t0) / n_iter)
    return graphed, times


def reference_step(X, w, m, U, covariance: str, reg_covar: float, chunk_elems: int = 1 << 27):
    """One float64 EM step from (w, m, U (K, d, d)) on X: (ell, weights, means, covariances), covariances
    (K, d, d) full, (K, d) diag, (d, d) tied; the score is sklearn's y = (x - mu) U for every type."""
    N, d = X.shape
    K = m.shape[0]
    rows = max(1024, chunk_elems // (K * d))
    log_det = torch.log(torch.diagonal(U, dim1=1, dim2=2)).sum(1)
    mU = torch.einsum("kd,kde->ke", m, U)
    n = torch.zeros(K, dtype=torch.float64, device=X.device)
    s = torch.zeros(K, d, dtype=torch.float64, device=X.device)
    M2 = torch.zeros(K, d, d, dtype=torch.float64, device=X.device)
    scatter = torch.zeros(d, d, dtype=torch.float64, device=X.device)
    ell = torch.zeros((), dtype=torch.float64, device=X.device)
    for r0 in range(0, N, rows):
        x = X[r0 : r0 + rows].double()
        y = torch.einsum("nd,kde->nke", x, U) - mU
        S = torch.log(w) + log_det - 0.5 * d * math.log(2 * math.pi) - 0.5 * (y * y).sum(-1)
        L = torch.logsumexp(S, 1)
        G = torch.exp(S - L[:, None])
        ell += L.sum()
        n += G.sum(0)
        s += G.T @ x
        M2 += torch.einsum("nk,nd,ne->kde", G, x, x)
        scatter += x.T @ x
    nk = n + 10 * torch.finfo(torch.float64).eps
    mu = s / nk[:, None]
    if covariance == "tied":
        cov = (scatter - (nk[:, None] * mu).T @ mu) / nk.sum() + reg_covar * torch.eye(d, dtype=torch.float64,
                                                                                       device=X.device)
    else:
        cov = M2 / nk[:, None, None] - mu[:, :, None] * mu[:, None, :] + reg_covar * torch.eye(
            d, dtype=torch.float64, device=X.device)
        if covariance == "diag":
            cov = torch.diagonal(cov, dim1=1, dim2=2)
    return ell, nk / nk.sum(), mu, cov


def accuracy(v: Variant, X, params, reference):
    """Relative errors of one step's (ell, weights, means, covariances) against the float64 reference."""
    r = run_fit(v, X, params, 1, cuda_graph=False)
    ell, w, m, cov = reference
    got_cov = r.variances if v.covariance == "diag" else r.covariances
    rel = lambda a, b: float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))  # noqa: E731
    return (abs(float(r.log_likelihoods[0] - ell)) / abs(float(ell)), rel(r.weights, w), rel(r.means, m),
            rel(got_cov, cov))


def implied_rule(rows):
    """The thresholds of kernels/dispatch.py the valid full-covariance rows imply (None where no row says)."""
    best = {}
    for r in rows:
        if (r["covariance"] != "full" or r["status"] != "ok" or r["slab_dtype"] != "float32"
                or r.get("moments", "center") != "center" or r.get("config")):
            continue
        key = (r["shape"], r["dataflow"], r["algorithm"])
        best[key] = min(best.get(key, math.inf), float(r["ms_per_iter"]))
    shapes = {k[0] for k in best}
    one_pass_wins, two_pass_wins, lift_wins, products_wins = [], [], [], []
    for shape in shapes:
        N, K, d = parse_shape(shape)
        kd2, d_pad = pow2_at_least_16(K) * pow2_at_least_16(d) ** 2, pow2_at_least_16(d)
        by_alg = {a: min([best[k] for k in best if k[0] == shape and k[2] == a and k[1] == "products"] or [math.inf])
                  for a in ("one_pass", "two_pass")}  # the rule's dataflow: the lift runs only when asked
        by_flow = {f: min([best[k] for k in best if k[0] == shape and k[1] == f] or [math.inf])
                   for f in ("products", "lift")}
        (one_pass_wins if by_alg["one_pass"] <= by_alg["two_pass"] else two_pass_wins).append(kd2)
        (lift_wins if by_flow["lift"] <= by_flow["products"] else products_wins).append(d_pad)
    one_pass_max = max(one_pass_wins) if one_pass_wins else None
    consistent_alg = not (one_pass_wins and two_pass_wins and min(two_pass_wins) <= max(one_pass_wins))
    lift_min = min(lift_wins) if lift_wins else None
    consistent_flow = not (lift_wins and products_wins and max(products_wins) >= min(lift_wins))
    return one_pass_max, consistent_alg, lift_min, consistent_flow


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--precisions", default="tf32x3", help="comma-separated: tf32x3,ieee")
    p.add_argument("--n-iter", type=int, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--accuracy-rows", type=int, default=200_000)
    p.add_argument("--budget-s", type=float, default=230.0, help="stop starting new variants after this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", action="append", default=[],
                   help="FullConfig overrides for the rule's choice, field=value,... (repeatable)")
    p.add_argument("--configs-only", action="store_true",
                   help="time only the rule's choice, with its default config and with each --config")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("full_bench times the kernels on a GPU; none is visible")
    torch.backends.cuda.matmul.allow_tf32 = False
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "full_bench.csv"
    new = not path.exists()
    start = time.perf_counter()
    common = {"date": datetime.date.today().isoformat(), "git_commit": env.git_commit(),
              "device": torch.cuda.get_device_name()}
    rows = []
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        if new:
            writer.writeheader()
        for shape in a.shapes.split(","):
            N, K, d = parse_shape(shape)
            X = make_dataset(N, K, d, a.seed, "cuda").X
            params = initial_parameters(X, K, a.seed)
            Xa = X[: min(N, a.accuracy_rows)]
            refs = {c: reference_step(Xa, params[0], params[1], params[2] if c != "tied" else
                                      params[3].expand(K, d, d), c, 1e-6) for c in ("full", "tied", "diag")}
            print(f"{shape}: roofline tf32x3 full {roofline_ms('full', 'tf32x3', N, K, d):.3f} ms, tied "
                  f"{roofline_ms('tied', 'tf32x3', N, K, d):.3f} ms, diag {roofline_ms('diag', 'tf32x3', N, K, d):.3f} ms",
                  flush=True)
            float64_slab = shape == a.shapes.split(",")[0]
            for v in variants(N, K, d, a.precisions.split(","), float64_slab, a.config, a.configs_only):
                row = {**common, "shape": shape, "N": N, "K": K, "d": d, "covariance": v.covariance,
                       "dataflow": v.dataflow, "algorithm": v.algorithm, "precision": v.precision,
                       "slab_dtype": str(v.slab_dtype).replace("torch.", "") if v.slab_dtype else "",
                       "moments": v.moments, "config": v.config,
                       "roofline_ms": f"{roofline_ms(v.covariance, v.precision, N, K, d):.4f}",
                       "accuracy_rows": Xa.shape[0]}
                if time.perf_counter() - start > a.budget_s:
                    row["status"] = "skipped: time budget"
                else:
                    try:
                        graphed, times = time_fit(lambda g: run_fit(v, X, params, a.n_iter, g), a.reps, a.n_iter)
                        errs = accuracy(v, Xa, params, refs[v.covariance])
                        best = min(times)
                        graphed = graphed and v.algorithm != "torch_float64"  # torch ops, eager
                        row.update(status="ok", graphed=graphed, ms_per_iter=f"{best:.4f}",
                                   ms_per_iter_reps=" ".join(f"{t:.4f}" for t in times),
                                   roofline_frac=f"{float(row['roofline_ms']) / best:.3f}",
                                   **dict(zip(("err_ell", "err_weights", "err_means", "err_covariances"),
                                              (f"{e:.3e}" for e in errs))))
                    except Exception as e:  # a refusal (shared memory, registers) or a failure: a row, not a crash
                        row["status"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}" if str(e) else type(e).__name__
                        torch.cuda.synchronize()
                writer.writerow(row)
                f.flush()
                rows.append(row)
                print(f"  {v.covariance:4s} {v.dataflow:8s} {v.algorithm:13s} {v.precision:6s} "
                      f"{row['slab_dtype']:7s} {v.moments:9s} {v.config:20s} "
                      f"{row['status'][:60]:10s} {row.get('ms_per_iter', ''):>9s} ms/iter  roofline "
                      f"{row.get('roofline_frac', ''):>6s}  err ell {row.get('err_ell', '')} cov "
                      f"{row.get('err_covariances', '')}", flush=True)
            del X, Xa
            torch.cuda.empty_cache()
    print(f"\n{path} ({time.perf_counter() - start:.0f} s)")
    for shape in a.shapes.split(","):
        ok = [r for r in rows if r["shape"] == shape and r["status"] == "ok"]
        for covariance in ("full", "tied", "diag"):
            mine = [r for r in ok if r["covariance"] == covariance]
            if mine:
                b = min(mine, key=lambda r: float(r["ms_per_iter"]))
                print(f"{shape} {covariance}: fastest {b['dataflow']}/{b['algorithm']} {b['ms_per_iter']} ms/iter, "
                      f"{b['roofline_frac']} of the roofline")
        tied = [float(r["ms_per_iter"]) for r in ok if r["covariance"] == "tied"]
        diag = [float(r["ms_per_iter"]) for r in ok if r["covariance"] == "diag"]
        if tied and diag:
            print(f"{shape}: tied / diag = {min(tied) / min(diag):.2f}x (target <= 1.5x)")
    one_pass_max, alg_ok, lift_min, flow_ok = implied_rule(rows)
    print(f"implied ONE_PASS_MAX_KD2 >= {one_pass_max} ({'consistent' if alg_ok else 'NOT a threshold: wins interleave'}), "
          f"lift faster from d_pad = {lift_min} ({'consistent' if flow_ok else 'NOT a threshold: wins interleave'}); "
          f"kernels/dispatch.py has ONE_PASS_MAX_KD2 = {dispatch.ONE_PASS_MAX_KD2} and the products by default")


if __name__ == "__main__":
    main()
