"""Issue 20 per shape: fp64 against tf32x3, and the floor the float64 pipe puts under an fp64 iteration.

    python -m figures.table_fp64 results/h200

Reads table1.csv's turbo_gmm (tf32x3) and turbo_gmm_fp64 rows and the Nsight Compute launches of the fp64 one
pass in ncu/ (``ncu_fp64_one_pass_*`` files; the ncu README's table gives their shapes and commits): the reference
is the newest at issue 20's shape (else the newest), and a one-pass shape with a launch of its own takes that one,
whose busiest unit's floor is shown too. On Hopper DMMA and the float64 CUDA-core instructions issue through one
pipe (``sm__pipe_shared_cycles``), so an fp64 iteration cannot be shorter than its products at the DMMA peak that
launch reports
(``sm__ops_path_tensor_src_fp64.sum.peak_sustained_elapsed.per_second``) plus the float64 arithmetic (the
exponentials, the lift's centering and squaring, the scaling of Gamma) at the rate that launch spent on the pipe
per (row, component) entry (its FP64 utilization x duration / (N K_pad)). Algorithm 2 issues 8 N K_pad d_pad
FLOP of products and that arithmetic once an entry; Algorithm 3 scores twice: 12 N K_pad d_pad and twice the
arithmetic. The arithmetic's charge is the profiled launch's (its d_pad): an estimate at other feature counts.
Against that floor: issue 20's target, 1.5x the tf32x3 iteration, and cuBLAS's DGEMM (env.json's fp64 probe),
the most of the DMMA peak a kernel on this device was measured to keep. Where ``shared_wavefronts.csv`` (written by
harness.studies.shared_wavefronts --out) has the fp64 one pass's row tile at a shape's (K_pad, d_pad), also the
floor its shared-memory wavefronts put under that kernel as compiled: its tiles times the tile's wavefronts at one a
cycle per SM (the SM count and clock of the same ncu launch); the model leaves out the L1's other traffic (the
profiled launch's L1 was busier than its shared wavefronts alone). Writes fp64.md beside table1.csv.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from figures.claims import lane_width
from figures.table1 import ms_per_iter, sorted_rows
from figures.table_counters import bounds, index, number, read_raw
from harness.results import device_env, read_csv
from harness.roofline import compute_ms


TF32X3_ARM, FP64_ARM = "turbo_gmm", "turbo_gmm_fp64"
FP64_LAUNCH = "ncu_fp64_one_pass"  # the fp64 one pass's ncu files (ncu/README.md)
ISSUE_20_RATIO = 1.5  # fp64 at most this many times the tf32x3 iteration of the same commit
ISSUE_20_TARGET = ("20M_32_32", 4.5)  # and this many ms/iter at this shape
DMMA_PEAK = "sm__ops_path_tensor_src_fp64.sum.peak_sustained_elapsed.per_second"
FP64_PIPE = "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"
# products (FLOP per N K_pad d_pad) and float64 arithmetic passes over the entries, per algorithm
WORK = {"one_pass": (8, 1), "two_pass": (12, 2)}
WAVEFRONTS = "shared_wavefronts.csv"


def fp64_launches(ncu_dir: Path, dims: dict[str, tuple[int, int, int]]) -> list[dict]:
    """The fp64 one pass's launches in the ncu README's table (oldest first) at shapes of ``dims`` (shape -> (N, K,
    d)): each one's DMMA peak (TFLOP/s at its clock), its float64 arithmetic's pipe time per (row, component) entry
    (ps), its SM count and clock, its busiest unit and that unit's floor (figures.table_counters.bounds), its file,
    shape and commit."""
    found = []
    for stem, meta in index(ncu_dir / "README.md").items():
        if not (stem.startswith(FP64_LAUNCH) and (ncu_dir / f"{stem}.raw.csv").exists() and meta["shape"] in dims):
            continue
        raw = read_raw(ncu_dir / f"{stem}.raw.csv")
        N, K, _ = dims[meta["shape"]]
        ms = number(raw, "duration_ms")
        busiest = bounds(raw)
        found.append({"fp64_tflops": number(raw, DMMA_PEAK) / 1e12,
                      "ps_per_entry": 1e9 * ms * number(raw, FP64_PIPE) / 100 / (N * lane_width(K)),
                      "sm_count": number(raw, "launch__sm_count"),
                      "clock_hz": number(raw, "sm__cycles_elapsed.avg") / ms * 1e3,
                      "unit": busiest["bound"], "unit_floor_ms": busiest["floor_ms"],
                      "file": stem, "shape": meta["shape"], "commit": meta["commit"]})
    return found


def pipe_rates(found: list[dict]) -> dict | None:
    """The reference launch among :func:`fp64_launches`: the newest at issue 20's shape, else the newest; None
    without one."""
    at_target = [r for r in found if r["shape"] == ISSUE_20_TARGET[0]]
    return (at_target or found or [None])[-1]


def one_pass_tiles(folder: Path) -> dict[tuple[int, int], dict]:
    """(K_pad, d_pad) -> the fp64 one pass's row tile from ``folder``/shared_wavefronts.csv: its rows (BLOCK_N), its
    load + store wavefronts, the commit that compiled it; empty without the CSV."""
    path = folder / WAVEFRONTS
    found = read_csv(path) if path.exists() else []
    return {(lane_width(r["K"]), lane_width(r["d"])):
            {"rows": int(r["BLOCK_N"]), "commit": r["git_commit"][:7],
             "wavefronts": int(r["load_wavefronts"]) + int(r["store_wavefronts"])}
            for r in found if r["precision"] == "fp64" and r["kernel"] == "one_pass"}


def floor_ms(N: int, K: int, d: int, algorithm: str, rates: dict) -> tuple[float, float]:
    """(the products at the DMMA peak, the float64 arithmetic at its per-entry rate) in ms for one iteration."""
    flop_per_entry, passes = WORK[algorithm]
    k_pad, d_pad = lane_width(K), lane_width(d)
    products = compute_ms(flop_per_entry * N * k_pad * d_pad, "fp64", rates)
    return products, passes * N * k_pad * rates["ps_per_entry"] * 1e-9


def rows(folder: Path) -> tuple[list[dict], dict | None]:
    """(one dict per shape with both arms' rows, the pipe rates) from ``folder``'s table1.csv and ncu/."""
    cells = {}
    for r in sorted_rows([r for r in read_csv(folder / "table1.csv") if r["arm"] in (TF32X3_ARM, FP64_ARM)]):
        cells.setdefault(r["shape"], {})[r["arm"]] = r
    dims = {shape: tuple(int(r[k]) for k in "NKd") for shape, arms in cells.items() for r in arms.values()}
    launches = fp64_launches(folder / "ncu", dims)
    rates = pipe_rates(launches)
    own = {r["shape"]: r for r in launches}  # the newest launch at each shape
    tiles = one_pass_tiles(folder) if rates else {}
    out = []
    for shape, arms in cells.items():
        if len(arms) < 2:
            continue
        tf, fp = arms[TF32X3_ARM], arms[FP64_ARM]
        t_ms, f_ms = (ms_per_iter(r) if r["gate"] == "valid" else None for r in (tf, fp))
        N, K, d = dims[shape]
        row = {"shape": shape, "algorithm": fp["algorithm"], "tf32x3_ms": t_ms, "fp64_ms": f_ms,
               "tf32x3_gate": tf["gate"], "fp64_gate": fp["gate"],
               "commits": sorted({tf["git_commit"], fp["git_commit"]}),
               "ratio": f_ms / t_ms if t_ms and f_ms else None,
               "target_ms": ISSUE_20_RATIO * t_ms if t_ms else None}
        if rates and fp["algorithm"] in WORK:
            launch = own.get(shape) if fp["algorithm"] == "one_pass" else None
            products, arithmetic = floor_ms(N, K, d, fp["algorithm"], launch or rates)
            row.update(products_ms=products, arithmetic_ms=arithmetic, floor_ms=products + arithmetic,
                       own_launch=launch)
            tile = tiles.get((lane_width(K), lane_width(d))) if fp["algorithm"] == "one_pass" else None
            if tile:
                row["shared_ms"] = 1e3 * math.ceil(N / tile["rows"]) * tile["wavefronts"] / (rates["sm_count"]
                                                                                          * rates["clock_hz"])
                row["shared_commit"] = tile["commit"]
            if row["target_ms"]:
                row["floor_share"] = row["floor_ms"] / row["target_ms"]
                row["shared_share"] = row["shared_ms"] / row["target_ms"] if tile else None
                if launch:
                    row["unit_share"] = launch["unit_floor_ms"] / row["target_ms"]
        out.append(row)
    return out, rates


def markdown(table: list[dict], rates: dict | None, dgemm_tflops: float | None) -> str:
    def f(v, fmt="{:.3f}"):
        return "—" if v is None else fmt.format(v)

    lines = ["Generated by `python -m figures.table_fp64` from `table1.csv` (arms turbo_gmm, tf32x3, and "
             "turbo_gmm_fp64) and the fp64 one pass's Nsight Compute counters in [`ncu/`](ncu/README.md). "
             f"Issue 20's target: fp64 at most {ISSUE_20_RATIO}x the tf32x3 iteration, and "
             f"{ISSUE_20_TARGET[1]} ms/iter at {ISSUE_20_TARGET[0]}.", ""]
    if rates:
        lines += [f"The floor: the products at the DMMA peak of `{rates['file']}` ({rates['shape']}, "
                  f"{rates['commit']}: {rates['fp64_tflops']:.1f} TFLOP/s) plus the float64 arithmetic at the "
                  f"{rates['ps_per_entry']:.2f} ps per (row, component) entry that launch spent on the same pipe "
                  "(twice for Algorithm 3); "
                  "floor / target is how busy that pipe must be to meet the target, where cuBLAS's DGEMM keeps "
                  + (f"{dgemm_tflops / rates['fp64_tflops']:.0%} of it (env.json probe, {dgemm_tflops:.1f} TFLOP/s)."
                     if dgemm_tflops else "an unprobed share of it.")
                  + (f" The shared-memory floor is the kernel's as compiled, not the device's: the fp64 one pass's "
                     f"row tiles times their wavefronts in [`{WAVEFRONTS}`]({WAVEFRONTS}) (an offline sm_90 compile) "
                     f"at one a cycle on each of {rates['sm_count']:.0f} SMs at {rates['clock_hz'] / 1e9:.2f} GHz."
                     if any(r.get("shared_ms") for r in table) else "")
                  + (" Where a shape has an ncu launch of its own, its products and arithmetic are that launch's, and "
                     "the last column is its busiest unit's floor (counters.md: the launch's duration x that unit's "
                     "utilization) over the target." if any(r.get("own_launch") for r in table) else ""), ""]
    lines += ["| shape | algorithm | tf32x3 ms | fp64 ms | fp64 / tf32x3 | target ms (1.5x) | products ms | "
              "+ arithmetic ms | pipe floor ms | pipe floor / target | shared-memory floor ms | shared / target | "
              "commits | ncu of the shape: busiest unit's floor / target |", "| " + " | ".join(["---"] * 14) + " |"]
    for r in table:
        fp = f(r["fp64_ms"]) if r["fp64_gate"] == "valid" else r["fp64_gate"] or "did not run"
        tf = f(r["tf32x3_ms"]) if r["tf32x3_gate"] == "valid" else r["tf32x3_gate"] or "did not run"
        ratio = f(r["ratio"], "{:.2f}x")
        if r["ratio"] is not None and r["ratio"] <= ISSUE_20_RATIO:
            ratio = f"**{ratio}**"
        commits = ", ".join(r["commits"]) + (f" (wavefronts: {r['shared_commit']})" if r.get("shared_commit") else "")
        lines.append(f"| {r['shape']} | {r['algorithm']} | {tf} | {fp} | {ratio} | {f(r['target_ms'])} | "
                     f"{f(r.get('products_ms'))} | {f(r.get('arithmetic_ms'))} | {f(r.get('floor_ms'))} | "
                     f"{f(r.get('floor_share'), '{:.1%}')} | {f(r.get('shared_ms'))} | "
                     f"{f(r.get('shared_share'), '{:.1%}')} | {commits} | {_own(r)} |")
    met = [r["shape"] for r in table if r["ratio"] is not None and r["ratio"] <= ISSUE_20_RATIO]
    missed = [r for r in table if r["shape"] not in met]
    pipe = [r["shape"] for r in missed if (r.get("floor_share") or 0) > 1]
    shared = [r["shape"] for r in missed if r["shape"] not in pipe and (r.get("shared_share") or 0) > 1]
    counted = [r["shape"] for r in missed if r["shape"] not in pipe + shared and (r.get("unit_share") or 0) > 1]
    lines += ["", f"Within {ISSUE_20_RATIO}x: {len(met)} of {len(table)} shapes ({', '.join(met) or 'none'})."]
    if rates:
        lines.append(f"The pipe's floor above the target (out of reach at 100% of it): {len(pipe)} "
                     f"({', '.join(pipe) or 'none'}). The kernel's shared-memory floor above it: {len(shared)} "
                     f"({', '.join(shared) or 'none'}). A unit of the shape's own ncu launch above it: {len(counted)} "
                     f"({', '.join(counted) or 'none'}). The rest need the pipe as busy as their pipe floor / target: "
                     + (", ".join(f"{r['shape']} {r['floor_share']:.0%}" for r in missed
                                  if r["shape"] not in pipe + shared + counted and r.get("floor_share")) or "none")
                     + ".")
    else:
        lines.append("No counters of the fp64 one pass in ncu/ at a shape of this table: no floor.")
    target = next((r for r in table if r["shape"] == ISSUE_20_TARGET[0]), None)
    if target and target.get("floor_ms") and target["fp64_ms"]:
        lines.append(f"At {ISSUE_20_TARGET[0]}: {target['fp64_ms']:.3f} ms/iter against {ISSUE_20_TARGET[1]} ms, "
                     f"which needs the pipe {target['floor_ms'] / ISSUE_20_TARGET[1]:.0%} busy; the floor is "
                     f"{target['floor_ms'] / target['fp64_ms']:.0%} of this row's time.")
    return "\n".join(lines) + "\n"


def _own(row: dict) -> str:
    """The last column: the shape's own launch's busiest unit, its floor over the target, the launch's commit."""
    launch = row.get("own_launch")
    if not launch or row.get("unit_share") is None:
        return "—"
    return f"{launch['unit']} {launch['unit_floor_ms']:.3f} ms, {row['unit_share']:.1%} ({launch['commit']})"


def render(folder: Path) -> list[Path]:
    """fp64.md in ``folder`` where its table1.csv has both arms at some shape; nothing otherwise."""
    if not (folder / "table1.csv").exists():
        return []
    table, rates = rows(folder)
    if not table:
        return []
    probes = device_env(folder).get("probes") or {}
    out = folder / "fp64.md"
    out.write_text(markdown(table, rates, probes.get("fp64_tflops")), encoding="utf-8")
    return [out]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    for p in render(ap.parse_args(argv).folder):
        print(p)


if __name__ == "__main__":
    main()
