"""The end-to-end figure: wall time of each arm's own fit per shape, and where Turbo-GMM's goes.

    python -m figures.fig_e2e results/h200/e2e.csv

From the CSV only. Left: one bar per arm per shape, the host-array wall time (log scale); a dot
on the bar marks the device-tensor wall time where the arm took one; a cell that ran past its limit
is a hatched bar up to the limit (its true time is longer); other failures are an x at the axis
floor; an arm run more than once at a shape shows its newest run. Right: Turbo-GMM's host-array fit
split into its phases (the estimator's ``fit_profile_``), stacked, per shape. Writes fig_e2e.png/.pdf beside
the CSV (``<stem>_fig.*`` for another CSV).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from figures import arm_bar_slots, csv_to_figure_cli, finish_log_axes, save  # noqa: E402
from figures.table1 import shape_arm_grid, shape_labels  # noqa: E402
from figures.table_e2e import PHASES, newest_first, number  # noqa: E402
from harness.results import read_csv  # noqa: E402


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = [r for r in read_csv(csv_path) if not r["status"].startswith("unavailable")]
    if not rows:
        raise ValueError(f"{csv_path} has no e2e cell that ran")
    shapes, arms, cell = shape_arm_grid(newest_first(rows)[::-1])  # an arm run at a shape more than once: its newest
    fig, (ax, ax_split) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [2.2, 1]})
    walls = [number(r, c) for r in rows for c in ("e2e_wall_s_host", "e2e_wall_s_device") if r["status"] == "ok"]
    walls += [float(r["timeout_s"]) for r in rows if r["status"] == "fail (TIMEOUT)"]
    floor = min(w for w in walls if w) / 3 if any(walls) else 1e-3
    handles, slots = arm_bar_slots(rows, shapes, arms, cell)
    for _, x, width, color, r in slots:
        host = number(r, "e2e_wall_s_host") if r["status"] == "ok" else None
        if host is not None:
            ax.bar(x, host - floor, width, bottom=floor, color=color, alpha=1.0 if r["gate"] == "valid" else 0.4)
            device = number(r, "e2e_wall_s_device")
            if device is not None:
                ax.plot(x, device, "o", color="black", ms=3)
        elif r["status"] == "fail (TIMEOUT)":
            ax.bar(x, float(r["timeout_s"]) - floor, width, bottom=floor, color="none", edgecolor=color, hatch="//")
        else:
            ax.plot(x, floor * 1.2, "x", color=color)
    handles += [Line2D([], [], marker="o", ls="", color="black", ms=3, label="from a device tensor"),
                Patch(facecolor="none", edgecolor="gray", hatch="//", label="ran past its limit (lower bound)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    finish_log_axes(ax, shapes, floor, "wall time of one fit from a host array (s)",
                    "End to end: own initialization, fit to convergence; faded: rejected by the gate", rows)

    ours = [(s, cell[(s, "turbo_gmm")]) for s in shapes
            if (s, "turbo_gmm") in cell and cell[(s, "turbo_gmm")]["status"] == "ok"]
    phase_colors = plt.get_cmap("Set2")
    for i, (shape, r) in enumerate(ours):
        bottom = 0.0
        for k, (col, name) in enumerate(PHASES):
            seconds = number(r, col)
            if seconds is None:
                continue
            ax_split.bar(i, seconds, 0.6, bottom=bottom, color=phase_colors(k), label=name if i == 0 else None)
            bottom += seconds
    ax_split.set_xticks(range(len(ours)))
    names = shape_labels(rows)
    ax_split.set_xticklabels([names[s] for s, _ in ours], fontsize=8, rotation=30)
    ax_split.set_ylabel("seconds (host-array fit)")
    ax_split.set_title("Turbo-GMM's fit by phase (fit_profile_)", fontsize=9)
    ax_split.legend(fontsize=7, loc="upper left")
    ax_split.grid(True, axis="y", lw=0.3)
    fig.tight_layout()
    stem = "fig_e2e" if Path(csv_path).stem == "e2e" else f"{Path(csv_path).stem}_fig"
    return save(fig, csv_path, out_dir, stem)


if __name__ == "__main__":
    csv_to_figure_cli(render, __doc__)
