"""The k-means figure: Lloyd's time per iteration and the own fit's wall time, per shape and arm.

    python -m figures.fig_kmeans results/h200/kmeans.csv

From the CSV only. Left: milliseconds per Lloyd iteration from the shared seeds (log scale), one bar per arm per
shape. Right: wall seconds of each library's own fit (log scale). A result the gate rejected is a faded, hatched
bar labelled "rejected" (kept, never dropped); a cell or own fit that failed is an x at the axis floor; arms that
could not run on this device (``unavailable``) are left out, and where nothing ran the panels say so. An arm run
more than once at a shape shows its newest run. Writes fig_kmeans.png/.pdf beside the CSV (``<stem>_fig.*`` for
another CSV, e.g. kmeans_smoke_fig.png).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from figures import arm_bar_slots, csv_to_figure_cli, finish_log_axes, save  # noqa: E402
from figures.table1 import shape_arm_grid  # noqa: E402
from figures.table_kmeans import newest_first, number  # noqa: E402
from harness.results import read_csv  # noqa: E402

PANELS = (  # (value column, status column, gate column, y label, title)
    ("ms_per_iter_min", "status", "gate", "ms per Lloyd iteration (min over runs)",
     "Lloyd from the shared k-means++ seeds"),
    ("e2e_wall_s", "e2e_status", "e2e_gate", "wall seconds of one fit (min over fits)",
     "Each library's own fit (own seeding, own stop rule)"),
)


def _panel(ax, rows, shapes, arms, cell, value_col, status_col, gate_col, ylabel, title) -> None:
    ran = [r for r in rows if r["status"] == "ok" and r.get(status_col) == "ok" and number(r, value_col)]
    values = [number(r, value_col) for r in ran]
    floor = min(values) / 3 if values else 1e-3
    handles, slots = arm_bar_slots(rows, shapes, arms, cell)
    for _, x, width, color, r in slots:
        value = number(r, value_col) if r in ran else None
        if value is not None:
            valid = r.get(gate_col) == "valid"
            ax.bar(x, value - floor, width, bottom=floor, color=color, alpha=1.0 if valid else 0.35,
                   hatch=None if valid else "xx", edgecolor=None if valid else "black")
            if not valid:
                ax.text(x, value * 1.15, "rejected", rotation=90, ha="center", va="bottom", fontsize=6)
        else:
            ax.plot(x, floor * 1.2, "x", color=color)
    handles += [Patch(facecolor="lightgray", alpha=0.35, hatch="xx", edgecolor="black",
                      label="rejected by the gate (kept)"),
                Line2D([], [], marker="x", ls="", color="gray", label="failed (status in the table)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    finish_log_axes(ax, shapes, floor, ylabel, title, rows)
    if values:
        ax.set_ylim(top=max(values) * 40)  # room above the bars for the legend and the "rejected" labels
    else:
        ax.text(0.5, 0.5, "no result on this device", transform=ax.transAxes, ha="center", va="center", fontsize=9)


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = [r for r in read_csv(csv_path) if not r["status"].startswith("unavailable")]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    if rows:
        shapes, arms, cell = shape_arm_grid(newest_first(rows)[::-1])  # an arm run at a shape more than once: newest
        for ax, panel in zip(axes, PANELS):
            _panel(ax, rows, shapes, arms, cell, *panel)
    else:
        for ax, (_, _, _, _, title) in zip(axes, PANELS):
            ax.set_title(title, fontsize=9)
            ax.text(0.5, 0.5, "no k-means cell ran on this device (every arm unavailable)", transform=ax.transAxes,
                    ha="center", va="center", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    stem = "fig_kmeans" if Path(csv_path).stem == "kmeans" else f"{Path(csv_path).stem}_fig"
    return save(fig, csv_path, out_dir, stem)


if __name__ == "__main__":
    csv_to_figure_cli(render, __doc__)
