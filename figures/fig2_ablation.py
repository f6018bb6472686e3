"""Figure 2 (paper §5.4): the ablation ladder's factors per shape and each rung's peak memory.

    python -m figures.fig2_ablation results/h200/ablation.csv

From the CSV of ``experiment=ablation`` only. Left: per shape, the factor each
rung buys over the one below it (A1/A2 fused score, A2/A3 E/M fusion, A3/A4
single sweep) and the product A1/A4, log scale, 1 = no change; a factor below 1
is a slowdown. Right: peak MB of every rung per shape. A rung that did not run
(A4 where its state does not fit: ``fail (OutOfResources)``) is written "n/a"
with its status, never estimated. Writes fig2_ablation.png/.pdf beside the CSV.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import csv_to_figure_cli, save  # noqa: E402
from figures.table1 import distinct_shapes, ms_per_iter  # noqa: E402
from harness.results import read_csv  # noqa: E402

RUNGS = ["ablation_a1", "ablation_a2", "ablation_a3", "ablation_a4"]
STEPS = [("fused score (A1/A2)", 0, 1), ("E/M fusion (A2/A3)", 1, 2), ("single sweep (A3/A4)", 2, 3),
         ("all three (A1/A4)", 0, 3)]


def rung_table(rows: list[dict]) -> dict:
    """{shape: {rung: (ms/iter or None, peak MB or None, status)}} over valid fits, shapes by (N, K, d)."""
    out: dict = {}
    for r in sorted(distinct_shapes(rows), key=lambda r: (int(r["N"]), int(r["K"]), int(r["d"]))):
        if r["arm"] not in RUNGS:
            continue
        ok = r["gate"] == "valid"
        out.setdefault(r["shape"], {})[r["arm"]] = (ms_per_iter(r) if ok else None,
                                                    float(r["peak_mb"]) if ok and r["peak_mb"] else None,
                                                    r["gate"] or r["status"])
    return out


def factors(table: dict) -> dict:
    """{shape: {step label: factor or None}}: time of the lower rung / time of the upper."""
    out = {}
    for shape, rungs in table.items():
        ms = [rungs.get(a, (None,))[0] for a in RUNGS]
        out[shape] = {label: (ms[lo] / ms[hi] if ms[lo] and ms[hi] else None) for label, lo, hi in STEPS}
    return out


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    table = rung_table(read_csv(csv_path))
    if not table:
        raise ValueError(f"{csv_path} has no ablation rows ({', '.join(RUNGS)})")
    fac = factors(table)
    shapes = list(table)
    colors = plt.get_cmap("tab10")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.6))
    w = 0.8 / len(STEPS)
    for j, (label, _, _) in enumerate(STEPS):
        for i, s in enumerate(shapes):
            x = i + (j - (len(STEPS) - 1) / 2) * w
            v = fac[s][label]
            if v is None:
                ax.text(x, 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color=colors(j),
                        transform=ax.get_xaxis_transform())
                continue
            ax.bar(x, v - 1.0 if v >= 1 else 1.0 - v, w, bottom=1.0 if v >= 1 else v, color=colors(j),
                   label=label if i == 0 else None, hatch="" if j < 3 else "..", edgecolor="k" if j == 3 else None,
                   lw=0.4)
            ax.text(x, v * (1.06 if v >= 1 else 0.94), f"{v:.2f}", rotation=90, ha="center",
                    va="bottom" if v >= 1 else "top", fontsize=6)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([s.replace("_", "/") for s in shapes], fontsize=8)
    ax.set_ylabel("speedup factor of the step (log)")
    ax.set_title("What each rung buys (time of rung below / time of rung)", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=7)
    vals = [v for f in fac.values() for v in f.values() if v]
    ax.set_ylim(min(vals + [0.5]) / 2.5, max(vals + [2.0]) * 2.5)
    ax.set_xlim(-0.5, len(shapes) - 0.5)

    w = 0.8 / len(RUNGS)
    for j, arm in enumerate(RUNGS):
        for i, s in enumerate(shapes):
            x = i + (j - (len(RUNGS) - 1) / 2) * w
            _, mb, status = table[s].get(arm, (None, None, "missing"))
            if mb is None:
                bx.text(x, 0.02, f"n/a: {status[:24]}", rotation=90, ha="center", va="bottom", fontsize=6,
                        transform=bx.get_xaxis_transform())
                continue
            bx.bar(x, mb, w, color=colors(4 + j), label=arm.replace("ablation_", "").upper() if i == 0 else None)
    bx.set_yscale("log")
    bx.set_xlim(-0.5, len(shapes) - 0.5)
    bx.set_xticks(range(len(shapes)))
    bx.set_xticklabels([s.replace("_", "/") for s in shapes], fontsize=8)
    bx.set_ylabel("peak memory (MB)")
    bx.set_title("Peak memory per rung", fontsize=9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, csv_path, out_dir, "fig2_ablation")


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
