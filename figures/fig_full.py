"""The full-covariance latency figure: ms per EM iteration of every arm per shape of experiment=full.

    python -m figures.fig_full results/h200/full.csv

From the CSV only. One bar per arm per shape (log scale), faded where the gate rejected the fit; a cell
that failed is an x at the axis floor, an arm that cannot run or fit full covariances there is left out
(the table says why). Turbo-GMM's roofline (figures/table_full.py) is a black tick over its bar. Writes
fig_full.png/.pdf beside the CSV (``<stem>_fig.*`` for another CSV, e.g. full_smoke_fig.png).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from figures import arm_bar_slots, csv_to_figure_cli, finish_log_axes, save  # noqa: E402
from figures.table1 import ms_per_iter, shape_arm_grid  # noqa: E402
from figures.table_full import roofline_ms  # noqa: E402
from harness.results import device_env, read_csv  # noqa: E402

LEFT_OUT = ("unavailable", "unsupported")


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = [r for r in read_csv(csv_path) if not r["status"].startswith(LEFT_OUT)]
    if not rows:
        raise ValueError(f"{csv_path} has no full-covariance cell that ran")
    shapes, arms, cell = shape_arm_grid(rows)
    rates = device_env(Path(csv_path).parent).get("probes", {})
    times = [ms for r in rows if (ms := ms_per_iter(r)) is not None]
    floor = min(times) / 3 if times else 1e-3
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(shapes) + 2), 4.6))
    handles, slots = arm_bar_slots(rows, shapes, arms, cell)
    for arm, x, width, color, r in slots:
        ms = ms_per_iter(r)
        if ms is None:
            ax.plot(x, floor * 1.2, "x", color=color)
            continue
        ax.bar(x, ms - floor, width, bottom=floor, color=color, alpha=1.0 if r["gate"] == "valid" else 0.35)
        bound = roofline_ms(r, rates) if arm == "turbo_gmm" else None
        if bound is not None:
            ax.hlines(bound[0], x - width / 2, x + width / 2, color="black", lw=1.5)
    handles += [Line2D([], [], color="black", lw=1.5, label="Turbo-GMM's roofline"),
                Line2D([], [], marker="x", ls="", color="gray", label="failed (see the table)")]
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    finish_log_axes(ax, shapes, floor, "ms per EM iteration (min over repetitions)",
                    "Full covariances, 10 iterations from the shared init; faded: rejected by the gate", rows)
    fig.tight_layout()
    stem = "fig_full" if Path(csv_path).stem == "full" else f"{Path(csv_path).stem}_fig"
    return save(fig, csv_path, out_dir, stem)


if __name__ == "__main__":
    csv_to_figure_cli(render, __doc__)
