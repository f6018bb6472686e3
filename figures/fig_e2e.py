"""The end-to-end figure: wall time of each arm's own fit per shape, and where Turbo-GMM's goes.

    python -m figures.fig_e2e results/h200/e2e.csv

From the CSV only. Left: one bar per arm per shape, the host-array wall time (log scale); a dot
on the bar marks the device-tensor wall time where the arm took one; a cell that ran past its limit
is a hatched bar up to the limit (its true time is longer); other failures are an x at the axis
floor; an arm run more than once at a shape shows its newest run. Where rows have the process's first fit
(``e2e_first_fit_s``), a triangle marks it (filled: the compilation caches were warm when the cell started;
hollow: empty). Where rows are of more than one covariance type, one such panel per type (diag first). Right:
Turbo-GMM's host-array fit split into its phases (the estimator's ``fit_profile_``), stacked, per shape (and
type). Writes fig_e2e.png/.pdf beside the CSV (``<stem>_fig.*`` for another CSV).
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
from figures.table_e2e import PHASES, covariance, newest_first, number  # noqa: E402
from harness.results import read_csv  # noqa: E402

TITLE = "End to end: own initialization, fit to convergence; faded: rejected by the gate"


def walls_panel(ax, rows: list[dict], floor: float, title: str) -> dict:
    """The bars of ``rows`` (one covariance type) on ``ax``; returns the grid's {(shape key, arm): row}."""
    shapes, arms, cell = shape_arm_grid(newest_first(rows)[::-1])  # an arm run at a shape more than once: its newest
    handles, slots = arm_bar_slots(rows, shapes, arms, cell)
    first_fits = False
    for _, x, width, color, r in slots:
        host = number(r, "e2e_wall_s_host") if r["status"] == "ok" else None
        if host is not None:
            ax.bar(x, host - floor, width, bottom=floor, color=color, alpha=1.0 if r["gate"] == "valid" else 0.4)
            device = number(r, "e2e_wall_s_device")
            if device is not None:
                ax.plot(x, device, "o", color="black", ms=3)
            first = number(r, "e2e_first_fit_s")
            if first is not None:
                first_fits = True
                ax.plot(x, first, "^", ms=5, color="black",
                        markerfacecolor="black" if r.get("cache_state") == "warm" else "none")
        elif r["status"] == "fail (TIMEOUT)":
            ax.bar(x, float(r["timeout_s"]) - floor, width, bottom=floor, color="none", edgecolor=color, hatch="//")
        else:
            ax.plot(x, floor * 1.2, "x", color=color)
    handles += [Line2D([], [], marker="o", ls="", color="black", ms=3, label="from a device tensor"),
                Patch(facecolor="none", edgecolor="gray", hatch="//", label="ran past its limit (lower bound)")]
    if first_fits:
        handles += [Line2D([], [], marker="^", ls="", color="black", ms=5, label="first fit (caches warm)"),
                    Line2D([], [], marker="^", ls="", color="black", ms=5, markerfacecolor="none",
                           label="first fit (caches empty)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    finish_log_axes(ax, shapes, floor, "wall time of one fit from a host array (s)", title, rows)
    return cell


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = [r for r in read_csv(csv_path) if not r["status"].startswith("unavailable")]
    if not rows:
        raise ValueError(f"{csv_path} has no e2e cell that ran")
    types = sorted({covariance(r) for r in rows}, key=lambda t: (t != "diag", t))
    fig, axes = plt.subplots(1, len(types) + 1, figsize=(12 + 8.4 * (len(types) - 1), 4.8),
                             gridspec_kw={"width_ratios": [2.2] * len(types) + [1]})
    ax_split = axes[-1]
    walls = [number(r, c) for r in rows for c in ("e2e_wall_s_host", "e2e_wall_s_device", "e2e_first_fit_s")
             if r["status"] == "ok"]
    walls += [float(r["timeout_s"]) for r in rows if r["status"] == "fail (TIMEOUT)"]
    floor = min(w for w in walls if w) / 3 if any(walls) else 1e-3
    ours = []  # (x label, Turbo-GMM's row) per type, per shape
    names = shape_labels(rows)
    for ax, kind in zip(axes, types):
        typed = [r for r in rows if covariance(r) == kind]
        cell = walls_panel(ax, typed, floor, TITLE if len(types) == 1 else f"{TITLE} ({kind} covariances)")
        shapes = list(dict.fromkeys(s for s, _ in cell))
        ours += [(names[s] if len(types) == 1 else f"{names[s]} {kind}", cell[(s, "turbo_gmm")])
                 for s in sorted(shapes, key=lambda s: (s[1], s[2], s[3], s[0]))
                 if (s, "turbo_gmm") in cell and cell[(s, "turbo_gmm")]["status"] == "ok"]

    phase_colors = plt.get_cmap("Set2")
    for i, (_, r) in enumerate(ours):
        bottom = 0.0
        for k, (col, name) in enumerate(PHASES):
            seconds = number(r, col)
            if seconds is None:
                continue
            ax_split.bar(i, seconds, 0.6, bottom=bottom, color=phase_colors(k), label=name if i == 0 else None)
            bottom += seconds
    ax_split.set_xticks(range(len(ours)))
    ax_split.set_xticklabels([label for label, _ in ours], fontsize=8, rotation=30)
    ax_split.set_ylabel("seconds (host-array fit)")
    ax_split.set_title("Turbo-GMM's fit by phase (fit_profile_)", fontsize=9)
    ax_split.legend(fontsize=7, loc="upper left")
    ax_split.grid(True, axis="y", lw=0.3)
    fig.tight_layout()
    stem = "fig_e2e" if Path(csv_path).stem == "e2e" else f"{Path(csv_path).stem}_fig"
    return save(fig, csv_path, out_dir, stem)


if __name__ == "__main__":
    csv_to_figure_cli(render, __doc__)
