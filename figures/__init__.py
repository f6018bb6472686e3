"""Tables and figures of the paper, rendered from results CSVs alone (no GPU)."""
from __future__ import annotations

import argparse
from pathlib import Path


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


def csv_to_figure_cli(render, doc: str, argv=None) -> None:
    """``python -m figures.<name> CSV [--out-dir DIR]``: render and print the paths."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--out-dir", type=Path)
    a = ap.parse_args(argv)
    for p in render(a.csv, a.out_dir):
        print(p)
