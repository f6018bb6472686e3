"""What bounds each profiled kernel, from its Nsight Compute counters: the time each unit of the SM would need
for the kernel's work at 100% of its peak (the launch's duration x that unit's utilization), the unit that
needs the most, and the top stall reasons; where the launch's source page was exported too, the share of its
warp samples parked at a warp-specialized kernel's join and the top stall reasons of the samples that are not.

    python -m figures.table_counters results/h200/ncu

Reads every ``*.raw.csv`` (``ncu --csv --page raw`` of one launch, as results/<device>/ncu/README.md says)
and that README's table for each file's shape and commit, and a ``*.source.csv.gz`` beside a raw CSV where
there is one (``ncu --csv --page source --print-source sass``, gzipped); writes counters.md beside the ncu folder.
A warp-specialized kernel's one-warp loader partition gets a warpgroup of its own, whose three other warps wait at
the join's ``BAR.SYNC`` through the whole sweep (3 of 12 warps in kernels/diag/one_pass_ws.py, 3 of 8 in two_pass_ws.py):
ncu counts their samples as "barrier" stalls although they take no issue slot, so the raw page's barrier share
says little about the warps that work.
On Hopper the tensor cores and the float64 CUDA cores issue through one pipe (sm__pipe_shared_cycles:
DMMA and DFMA do not overlap), so that pipe is a unit of its own here; "shared memory" is the L1's
shared-memory wavefronts (one a cycle per SM at peak), of which the bank-conflict share is shown.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import re
from pathlib import Path

ELAPSED = ".pct_of_peak_sustained_elapsed"
# (unit, metric): utilization in % of the unit's peak over the launch's elapsed cycles
UNITS = (
    ("issue", "sm__inst_issued.avg" + ELAPSED),
    ("tensor", "sm__pipe_tensor_cycles_active.avg" + ELAPSED),
    ("FP64", "sm__pipe_fp64_cycles_active.avg" + ELAPSED),
    ("tensor + FP64 pipe", "sm__pipe_shared_cycles_active.avg" + ELAPSED),
    ("FMA", "sm__pipe_fma_cycles_active.avg" + ELAPSED),
    ("ALU", "sm__pipe_alu_cycles_active.avg" + ELAPSED),
    ("XU", "sm__inst_executed_pipe_xu.avg" + ELAPSED),
    ("shared memory", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" + ELAPSED),
    ("L1", "l1tex__throughput.avg" + ELAPSED),
    ("L2", "lts__throughput.avg" + ELAPSED),
    ("DRAM", "gpu__dram_throughput.avg" + ELAPSED),
)
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
NOT_A_STALL = {"selected"}  # the cycle a warp issues
INDEX_ROW = re.compile(r"^\| `(ncu_[^`]+?)\.\*` \| (.*) \| (\S+) \| (\w+) \|$")


TO_MS = {"ms": 1.0, "us": 1e-3, "usecond": 1e-3, "msecond": 1.0, "s": 1e3, "second": 1e3}


def read_raw(path: Path) -> dict[str, str]:
    """metric name -> value (as printed) of a one-launch ``ncu --page raw`` CSV; the duration in ms under
    "duration_ms" (ncu prints it in ms or us)."""
    with open(path, newline="") as f:
        header, units, values = list(csv.reader(f))[:3]
    raw = dict(zip(header, values))
    i = header.index("gpu__time_duration.sum")
    raw["duration_ms"] = str(float(values[i].replace(",", "")) * TO_MS[units[i]])
    return raw


def number(raw: dict[str, str], name: str) -> float:
    return float(raw[name].replace(",", ""))


def index(readme: Path) -> dict[str, dict]:
    """file stem -> {variant, shape, commit} from the ncu README's table."""
    out = {}
    for line in readme.read_text(encoding="utf-8").splitlines() if readme.exists() else []:
        if m := INDEX_ROW.match(line.strip()):
            out[m.group(1)] = {"variant": m.group(2), "shape": m.group(3), "commit": m.group(4)}
    return out


def bounds(raw: dict[str, str]) -> dict:
    """One launch's duration, occupancy, per-unit utilization and time at 100%, the binding unit and stalls."""
    ms = number(raw, "duration_ms")
    util = {unit: number(raw, metric) for unit, metric in UNITS if raw.get(metric, "") != ""}
    unit, pct = max(util.items(), key=lambda kv: kv[1])
    wavefronts = number(raw, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
    conflicts = number(raw, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")
    stalls = {m.group(1): number(raw, k) for k in raw if (m := STALL.fullmatch(k)) and m.group(1) not in NOT_A_STALL}
    total = sum(stalls.values())
    return {"kernel": raw["Kernel Name"], "ms": ms, "warps": number(raw, "sm__warps_active.avg.per_cycle_active"),
            "registers": int(number(raw, "launch__registers_per_thread")), "util": util, "bound": unit,
            "floor_ms": ms * pct / 100, "conflict_share": conflicts / wavefronts if wavefronts else 0.0,
            "stalls": sorted(((k, v / total) for k, v in stalls.items()), key=lambda kv: -kv[1])[:3]}


def sampled_stalls(path: Path) -> dict:
    """From a source page (SASS lines with their warp-state samples): the share of samples parked at a join (a NOP
    right after a BAR.SYNC, its samples all but 1% barrier) and every stall reason of the rest, "selected" (issuing)
    among them, as shares of those samples, largest first. The page has no column for the raw page's "gmma" reason (a
    warp waiting to issue a wgmma): the samples of an HGMMA line that no column takes are counted as gmma."""
    with gzip.open(path, "rt", newline="") as f:
        lines = list(csv.reader(f))[1:]  # the first line names the kernel
    header, body = lines[0], [dict(zip(lines[0], r)) for r in lines[1:]]
    reasons = [h for h in header if h.startswith("stall_") and not h.endswith("(Not Issued)")]

    def count(r, key):
        return float(r.get(key) or 0)

    parked = total = 0.0
    sums = {k.removeprefix("stall_"): 0.0 for k in reasons}
    sums["gmma"] = 0.0
    for prev, r in zip([{}] + body, body):
        samples = count(r, "Warp Stall Sampling (All Samples)")
        total += samples
        source = r["Source"].strip()
        if (source == "NOP" and prev.get("Source", "").strip().startswith("BAR.SYNC")
                and samples > 0 and count(r, "stall_barrier") >= 0.99 * samples):
            parked += samples
            continue
        for k in reasons:
            sums[k.removeprefix("stall_")] += count(r, k)
        if "HGMMA" in source:
            sums["gmma"] += samples - sum(count(r, k) for k in reasons)
    working = total - parked
    shares = sorted(((k, v / working) for k, v in sums.items()), key=lambda kv: -kv[1])
    return {"parked_share": parked / total, "working_stalls": shares}


def rows(ncu_dir: Path) -> list[dict]:
    meta = index(ncu_dir / "README.md")
    out = []
    for path in sorted(ncu_dir.glob("*.raw.csv")):
        stem = path.name.removesuffix(".raw.csv")
        source = ncu_dir / f"{stem}.source.csv.gz"
        out.append({"file": stem, **meta.get(stem, {"variant": "", "shape": "?", "commit": "?"}),
                    **bounds(read_raw(path)), **(sampled_stalls(source) if source.exists() else {})})
    return out


def markdown(table: list[dict]) -> str:
    units = [u for u, _ in UNITS]
    lines = ["Generated by `python -m figures.table_counters` from the Nsight Compute CSVs in [`ncu/`](ncu/README.md) "
             "(one launch each). Per unit: its utilization over the launch (% of peak); **bound**: the unit with "
             "the highest, and the time it alone would take for this launch's work at 100% (ms × %/100), a floor "
             "for the kernel as compiled. Shared memory: L1 wavefronts, with the share that is bank conflicts. "
             "Parked: the share of warp samples waiting at a warp-specialized kernel's join (no issue slot taken), "
             "and the top stalls of the other samples, where the launch's source page was exported.", "",
             "| counters | kernel | shape | commit | ms | warps/SM | registers | " + " | ".join(units)
             + " | bound: floor ms | top stalls (share) | parked | top 4 stalls past the parked (share) |",
             "| " + " | ".join(["---"] * (11 + len(units))) + " |"]
    for r in table:
        cells = []
        for u in units:
            v = r["util"].get(u)
            cell = "—" if v is None else f"{v:.0f}%"
            if u == "shared memory" and v is not None:
                cell += f" ({r['conflict_share']:.0%} conflicts)"
            cells.append(f"**{cell}**" if u == r["bound"] else cell)
        stalls = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in r["stalls"])
        parked, working = "—", "—"
        if "parked_share" in r:
            parked = f"{r['parked_share']:.0%}"
            working = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in r["working_stalls"][:4])
        lines.append(f"| `{r['file']}` | `{r['kernel']}` | {r['shape']} | {r['commit']} | {r['ms']:.2f} | "
                     f"{r['warps']:.0f} | {r['registers']} | " + " | ".join(cells)
                     + f" | {r['bound']}: {r['floor_ms']:.2f} | {stalls} | {parked} | {working} |")
    return "\n".join(lines) + "\n"


def render(ncu_dir: Path) -> list[Path]:
    """counters.md beside ``ncu_dir`` from its raw CSVs; nothing where it holds none."""
    table = rows(ncu_dir)
    if not table:
        return []
    out = ncu_dir.parent / "counters.md"
    out.write_text(markdown(table), encoding="utf-8")
    return [out]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ncu_dir", type=Path)
    for p in render(ap.parse_args(argv).ncu_dir):
        print(p)


if __name__ == "__main__":
    main()
