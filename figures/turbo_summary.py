"""Turbo-GMM against the field, per shape: the question issue 7 and claim 1 ask of Table 1.

    python -m figures.turbo_summary results/h200/table1.csv

For every shape: Turbo-GMM's ms/iter and algorithm, the fraction of issue 23's roofline it reaches (the tf32x3
tensor-core time of the useful 8NKd FLOP, or the time to read X once, the longer: harness.roofline.diagonal_ms,
table1.csv's roofline_fraction, at the TF32 rate and HBM read bandwidth the device's env.json probes measured,
issue 23's H200 figures where there are none), the fastest valid fit of another system (not one of
this project's own arms, e.g. Turbo-GMM at fp64) and
the ratio (> 1: Turbo-GMM faster), Flash-GMM tf32x3's time (the paper's protocol;
shown also where the gate rejected its fit) and that ratio; then at how many shapes
Turbo-GMM is the fastest valid fit and its median over Flash-GMM where both fits are
valid. Each row names the commits and dates of the two cells it compares. Writes
turbo_summary.md beside the CSV.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from figures.claims import OURS, Results
from figures.table1 import ms_per_iter, sorted_rows
from harness.results import device_env
from harness.roofline import ISSUE_23_RATES, diagonal_ms

FLASH = "flash_gmm"


def rates(folder: Path) -> dict:
    """The roofline's rates: the TF32 TFLOP/s and HBM read GB/s of ``folder``/env.json's probes, and their source."""
    probes = device_env(folder).get("probes") or {}
    if probes.get("tf32_tflops") and probes.get("hbm_read_gb_per_s"):
        return {"tf32_tflops": probes["tf32_tflops"], "hbm_read_gb_per_s": probes["hbm_read_gb_per_s"],
                "source": "env.json probes"}
    return {**ISSUE_23_RATES, "source": "issue 23's H200 figures"}


def summarize(folder: Path) -> tuple[list[dict], dict]:
    """(one dict per shape with a Turbo-GMM row, totals) from ``folder``/table1.csv."""
    res = Results(folder)
    rate = rates(folder)
    by_shape: dict[str, list[dict]] = {}
    for r in sorted_rows(res.rows("table1") or []):
        by_shape.setdefault(r["shape"], []).append(r)
    out = []
    for shape, cells in by_shape.items():
        turbo = next((r for r in cells if r["arm"] == "turbo_gmm"), None)
        if turbo is None:
            continue
        t_ms = ms_per_iter(turbo) if turbo["gate"] == "valid" else None
        others = [(ms_per_iter(r), r) for r in cells if r["arm"] not in OURS and r["gate"] == "valid"]
        best_ms, best = min(others, key=lambda x: x[0]) if others else (None, None)
        flash = next((r for r in cells if r["arm"] == FLASH), None)
        f_ms = ms_per_iter(flash) if flash else None
        floor = diagonal_ms(int(turbo["N"]), int(turbo["K"]), int(turbo["d"]), turbo["precision"], rate)
        out.append({"shape": shape, "algorithm": turbo["algorithm"], "turbo_ms": t_ms, "turbo_cell": _cell(turbo),
                    "roofline": floor / t_ms if t_ms and floor else None,
                    "runner_up": best["label"] if best else None, "runner_up_ms": best_ms,
                    "runner_up_cell": _cell(best) if best else None,
                    "ratio": best_ms / t_ms if t_ms and best_ms else None,
                    "flash_ms": f_ms, "flash_gate": flash["gate"] if flash else None,
                    "flash_ratio": f_ms / t_ms if t_ms and f_ms else None})
    over_flash = res.turbo_ratios(FLASH)  # claim 1's ratios: both fits valid
    totals = {"shapes": len(out), "contested": sum(1 for r in out if r["ratio"]),
              "fastest": sum(1 for r in out if r["ratio"] and r["ratio"] > 1),
              "median_over_flash": statistics.median(over_flash.values()) if over_flash else None,
              "flash_shapes": len(over_flash), "rates": rate}
    return out, totals


def _cell(r: dict) -> str:
    return f"{r['git_commit'][:7]} {r['timestamp'][:10]}" if r.get("git_commit") else "—"


def markdown(rows: list[dict], totals: dict) -> str:
    def ms(x):
        return f"{x:.3f}" if x is not None else "—"

    def ratio(x):
        return f"{x:.2f}×" if x is not None else "—"

    lines = ["| shape | Turbo-GMM ms/iter | roofline reached | fastest valid fit of another system | ratio | "
             "Flash-GMM (tf32x3) | ratio | cells (commit, date): Turbo-GMM / other |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        alg = " (Alg. 3)" if r["algorithm"] == "two_pass" else ""
        flash = ms(r["flash_ms"]) + ("" if r["flash_gate"] in (None, "valid") else " (rejected)")
        roof = f"{r['roofline']:.0%}" if r["roofline"] is not None else "—"
        lines.append(f"| {r['shape']}{alg} | {ms(r['turbo_ms'])} | {roof} | {r['runner_up'] or '—'} {ms(r['runner_up_ms'])} | "
                     f"{ratio(r['ratio'])} | {flash} | {ratio(r['flash_ratio'])} | {r['turbo_cell']} / "
                     f"{r['runner_up_cell'] or '—'} |")
    med = totals["median_over_flash"]
    rate = totals["rates"]
    lines += ["", f"Turbo-GMM is the fastest valid fit at {totals['fastest']} of the {totals['contested']} shapes "
              f"where another system's fit is valid ({totals['shapes']} shapes in all). "
              f"Median over Flash-GMM (tf32x3) where both fits are valid: "
              f"{ratio(med)} over {totals['flash_shapes']} shapes. Roofline at {rate['tf32_tflops']:.0f} TF32 "
              f"TFLOP/s (each useful FLOP charged 3 times) and {rate['hbm_read_gb_per_s'] / 1e3:.2f} TB/s of HBM read "
              f"({rate['source']})."]
    return "\n".join(lines) + "\n"


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    """turbo_summary.md from a results folder's table1.csv (``csv_path``)."""
    rows, totals = summarize(csv_path.parent)
    out = (out_dir or csv_path.parent) / "turbo_summary.md"
    out.write_text(markdown(rows, totals))
    return [out]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    a = ap.parse_args(argv)
    for p in render(a.csv):
        print(p)


if __name__ == "__main__":
    main()
