"""Tables and figures of the paper, rendered from results CSVs alone (no GPU)."""
from __future__ import annotations

import argparse
from pathlib import Path


def pipe_table(header: list[str], table: list[list], notes: list[str]) -> str:
    """A Markdown pipe table (cells' own pipes escaped), then the notes, a line each."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in table]
    return "\n".join(lines + [""] + notes) + "\n"


def save(fig, csv_path, out_dir, stem: str) -> list[Path]:
    """Write ``<stem>.png`` (150 dpi) and ``<stem>.pdf`` beside the CSV (or into
    ``out_dir``), close the figure and return the paths. The PDF carries no creation
    date, so re-rendering unchanged CSVs leaves the committed files unchanged."""
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir or Path(csv_path).parent)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150, metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
    plt.close(fig)
    return paths


def arm_bar_slots(rows: list[dict], shapes: list[tuple], arms: list[str], cell: dict):
    """A grouped bar chart's layout (shapes along x, each shape's arms side by side, from
    :func:`figures.table1.shape_arm_grid`): a legend patch per arm in tab10's colours, and (arm, x, width, colour,
    row) for every (shape key, arm) cell that has a row, arm by arm."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    colors, width = plt.get_cmap("tab10"), 0.8 / len(arms)
    handles, slots = [], []
    for j, arm in enumerate(arms):
        handles.append(Patch(color=colors(j % 10), label=next(r["label"] for r in rows if r["arm"] == arm)))
        slots += [(arm, i - 0.4 + (j + 0.5) * width, width, colors(j % 10), cell[(shape, arm)])
                  for i, shape in enumerate(shapes) if (shape, arm) in cell]
    return handles, slots


def finish_log_axes(ax, shapes: list[tuple], floor: float, ylabel: str, title: str, rows: list[dict]) -> None:
    """The shape axis (shape keys of :func:`figures.table1.shape_arm_grid`, labelled as among ``rows``) and
    the log time axis from ``floor`` of a grouped bar chart."""
    from figures.table1 import shape_labels

    labels = shape_labels(rows)
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels([labels[s] for s in shapes], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="y", which="major", lw=0.3)


def csv_to_figure_cli(render, doc: str, argv=None) -> None:
    """``python -m figures.<name> CSV [--out-dir DIR]``: render and print the paths."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--out-dir", type=Path)
    a = ap.parse_args(argv)
    for p in render(a.csv, a.out_dir):
        print(p)
