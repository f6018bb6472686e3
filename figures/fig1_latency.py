"""Figure 1: ms/iter per shape, one bar per arm, log scale, grouped by regime.

    python -m figures.fig1_latency results/h200/table1.csv

Reads the CSV only. A shape in two regimes (1M_32_32) appears in both groups, so the
paper's sixteen shapes give seventeen bar groups. Failed or gate-rejected cells are
drawn as a marker at the axis floor (x: failed to run, r: rejected by the gate);
shapes where Turbo-GMM dispatched to Algorithm 3 (two_pass) are starred. Cells named
with --keep-rejected ARM:SHAPE are drawn hatched with a dagger, and printed.
Writes fig1_latency.png/.pdf beside the CSV (``<stem>_fig1_latency.*`` for other CSVs).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from figures import save  # noqa: E402
from figures.table1 import ms_per_iter, shape_key, shape_labels, sorted_rows  # noqa: E402
from harness.results import arm_order, read_csv  # noqa: E402

REGIMES = ["large_N", "large_K", "K_d", "small_N"]


def groups(rows: list[dict]) -> list[tuple[str, tuple]]:
    """(regime, shape key) bar groups in regime order, shapes by (N, K, d) within a regime; a shape key is
    (name, N, K, d) (:func:`figures.table1.shape_key`), so an overridden shape is a group of its own."""
    shapes = list(dict.fromkeys(shape_key(r) for r in sorted_rows(rows)))
    tags = {shape_key(r): [t for t in r["regimes"].split(";") if t] for r in rows}
    known = [(g, s) for g in REGIMES for s in shapes if g in tags[s]]
    other = [(t or "other", s) for s in shapes for t in (tags[s] or [""]) if t not in REGIMES]
    return known + other


def render(csv_path: Path, out_dir: Path | None = None, keep_rejected=frozenset()) -> list[Path]:
    rows = read_csv(csv_path)
    for a, s in sorted(keep_rejected):
        print(f"† kept although the gate rejected it (disclosed exception): {a} at {s}")
    cells = {(shape_key(r), r["arm"]): r for r in rows}
    names = shape_labels(rows)
    rank = {a: i for i, a in enumerate(arm_order())}
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (rank.get(a, len(rank)), a))
    labels = {r["arm"]: r["label"] for r in rows}
    alg3 = {shape_key(r) for r in rows if r["arm"] == "turbo_gmm" and r["algorithm"] == "two_pass"}
    bars = groups(rows)
    valid = [ms_per_iter(r) for r in rows if r["gate"] == "valid" and ms_per_iter(r)]
    floor = 10 ** math.floor(math.log10(min(valid)) - 0.5) if valid else 1e-2
    top = 10 ** math.ceil(math.log10(max(valid)) + 0.3) if valid else 1e2

    width = 0.8 / max(1, len(arms))
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(bars) + 2), 4.5))
    colors = plt.get_cmap("tab10")
    for j, arm in enumerate(arms):
        xs, hs, fx, fm, kept = [], [], [], [], []
        for i, (_, shape) in enumerate(bars):
            r = cells.get((shape, arm))
            if r is None:
                continue
            x = i + (j - (len(arms) - 1) / 2) * width
            ms = ms_per_iter(r)
            if r["gate"] == "valid" and ms:
                xs.append(x)
                hs.append(ms)
            elif ms and (arm, shape[0]) in keep_rejected:
                kept.append((x, ms))
            elif not r["status"].startswith("unavailable"):
                fx.append(x)
                fm.append("r" if r["status"] == "ok" else "x")
        ax.bar(xs, [h - floor for h in hs], width, bottom=floor, color=colors(j % 10))
        for x, ms in kept:
            ax.bar([x], [ms - floor], width, bottom=floor, color=colors(j % 10), hatch="//", edgecolor="k", lw=0.5)
            ax.text(x, ms * 1.05, "†", ha="center", va="bottom", fontsize=8)
        for x, m in zip(fx, fm):
            ax.text(x, floor * 1.15, m, ha="center", va="bottom", fontsize=7, color=colors(j % 10), fontweight="bold")
    ax.set_yscale("log")
    ax.set_ylim(floor, top)
    ax.set_ylabel("ms / EM iteration (min over reps)")
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([names[s] + ("*" if s in alg3 else "") for _, s in bars], rotation=60, ha="right", fontsize=8)
    prev = None
    for i, (g, _) in enumerate(bars):
        if g != prev:
            if i:
                ax.axvline(i - 0.5, color="0.6", lw=0.8)
            ax.text(i - 0.4, top, g, va="bottom", fontsize=8)
            prev = g
    # one legend entry per arm even when none of its cells drew a bar (all failed or rejected)
    handles = [Patch(facecolor=colors(j % 10), label=labels[arm]) for j, arm in enumerate(arms)]
    ax.legend(handles=handles, fontsize=7, ncol=min(5, len(arms)), loc="upper left", bbox_to_anchor=(0, -0.28))
    ax.set_title("* Turbo-GMM ran Algorithm 3; x failed, r rejected by the gate (at the axis floor)", fontsize=8, pad=16)
    fig.tight_layout()
    stem = "fig1_latency" if Path(csv_path).stem == "table1" else f"{Path(csv_path).stem}_fig1_latency"
    return save(fig, csv_path, out_dir, stem)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--keep-rejected", action="append", default=[], metavar="ARM:SHAPE",
                    help="draw this rejected cell's latency, hatched and flagged (repeatable)")
    ap.add_argument("--out-dir", type=Path)
    a = ap.parse_args(argv)
    for p in render(a.csv, a.out_dir, {tuple(k.split(":", 1)) for k in a.keep_rejected}):
        print(p)


if __name__ == "__main__":
    main()
