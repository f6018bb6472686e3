"""Dispatch figure (paper §5.2, Appendix D): one-pass / two-pass time over the (K, d) grid at N = 1M.

    python -m figures.fig_dispatch results/h200/dispatch.csv

Each cell is ms/iter of Algorithm 2 divided by ms/iter of Algorithm 3 (minimum
over repetitions), on a log colour scale centred at 1 (blue: one pass faster).
Cells where one_pass did not run show the failure (OutOfResources, timeout, ...)
hatched. A dashed outline marks the paper's A100 rule (figures.claims), a black outline the cells where
the kernels' own rule picks one_pass for this device (the CSV's ``dispatch_choice``, written when the
harness collects it), and the paper's two A100 probes at K_pad*d_pad = 4096, (32, 128) and (256, 16),
are labelled.
Writes fig_dispatch.png/.pdf beside the CSV.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from figures import csv_to_figure_cli, save  # noqa: E402
from figures.claims import a100_one_pass  # noqa: E402
from figures.table1 import ms_per_iter  # noqa: E402
from harness.results import device_env, read_csv  # noqa: E402

PAPER_PROBES = {(32, 128): "A100: 14.7x faster", (256, 16): "A100: 17x slower"}


def short_status(status: str) -> str:
    for key, text in (("OutOfResources", "out of\nresources"), ("TIMEOUT", "timeout"), ("OOM", "OOM")):
        if key in status:
            return text
    return "failed"


def grid(rows: list[dict]):
    """{(K, d): {algorithm: row}}. A failed record may lack its algorithm (older
    runner): it is one_pass when the cell's two_pass row exists, else "unknown"."""
    cells: dict = {}
    for r in sorted(rows, key=lambda r: not r["algorithm"]):
        slot = cells.setdefault((int(r["K"]), int(r["d"])), {})
        alg = r["algorithm"] or next((a for a in ("one_pass", "two_pass") if a not in slot), "unknown")
        if not r["algorithm"] and "two_pass" not in slot:
            alg = "unknown"
        slot.setdefault(alg, r)
    return cells


def ratio(cell: dict) -> float | None:
    a, b = cell.get("one_pass"), cell.get("two_pass")
    if not a or not b or a["gate"] != "valid" or b["gate"] != "valid":
        return None
    return ms_per_iter(a) / ms_per_iter(b)


def rule_choice(cell: dict, csv_path: Path) -> str:
    """The kernels' dispatch choice at a cell, as the harness wrote it into the CSV."""
    choices = {r.get("dispatch_choice") for r in cell.values()}
    if len(choices) != 1 or not choices <= {"one_pass", "two_pass"}:
        raise ValueError(f"{csv_path}: dispatch_choice {sorted(map(str, choices))} at one (K, d); "
                         f"re-collect the CSV (python -m harness.results {Path(csv_path).with_suffix('')})")
    return choices.pop()


def device_name(csv_path: Path) -> str | None:
    return device_env(Path(csv_path).parent).get("gpu")


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = read_csv(csv_path)
    cells = grid(rows)
    Ks = sorted({k for k, _ in cells})
    ds = sorted({d for _, d in cells})
    gpu = device_name(csv_path)
    vals = [v for v in (ratio(c) for c in cells.values()) if v]
    span = max(abs(math.log10(v)) for v in vals) if vals else 1.0
    norm = LogNorm(10 ** -max(span, 0.1), 10 ** max(span, 0.1))
    cmap = plt.get_cmap("RdBu_r")
    fig, ax = plt.subplots(figsize=(1.4 * len(ds) + 2.5, 0.75 * len(Ks) + 1.8))
    for i, K in enumerate(Ks):
        for j, d in enumerate(ds):
            c = cells.get((K, d), {})
            v = ratio(c)
            if v is not None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color=cmap(norm(v))))
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8)
            else:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.85", hatch="//", edgecolor="0.6", lw=0))
                failed = c.get("one_pass") or c.get("unknown")
                text = short_status(failed["status"]) if failed else "missing"
                if "one_pass" not in c and "two_pass" not in c:
                    text = "neither\nran"
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
            if c and rule_choice(c, csv_path) == "one_pass":
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="k", lw=2))
            if a100_one_pass(K, d):
                ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, edgecolor="tab:orange", lw=1.2, ls="--"))
            if (K, d) in PAPER_PROBES:
                ax.text(j, i + 0.33, PAPER_PROBES[(K, d)], ha="center", va="center", fontsize=6, style="italic")
    ax.set_xlim(-0.5, len(ds) - 0.5)
    ax.set_ylim(len(Ks) - 0.5, -0.5)
    ax.set_xticks(range(len(ds)))
    ax.set_xticklabels(ds)
    ax.set_yticks(range(len(Ks)))
    ax.set_yticklabels(Ks)
    ax.set_xlabel("d")
    ax.set_ylabel("K")
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, label="one_pass ms / two_pass ms")
    N = int(rows[0]["N"]) if rows else 0
    ax.set_title(f"Algorithm 2 / Algorithm 3 time at N = {N:,} on {gpu or rows[0]['device']}\n"
                 "black outline: this device's rule picks one_pass; dashed: the paper's A100 rule; hatched: one_pass did not run", fontsize=9)
    fig.tight_layout()
    return save(fig, csv_path, out_dir, "fig_dispatch")


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
