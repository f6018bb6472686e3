"""Appendix C figure: float32 score error of the lifted and the centered form vs data offset.

    python -m figures.fig_conditioning results/h200/conditioning.csv

Log-log (offset 0 drawn at the left edge, labelled), from the CSV of
harness/studies/conditioning.py only. Writes fig_conditioning.png/.pdf beside the CSV.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from figures import csv_to_figure_cli, save  # noqa: E402


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = sorted(csv.DictReader(open(csv_path)), key=lambda r: float(r["offset"]))
    if not rows:
        raise ValueError(f"{csv_path} has no rows")
    offs = [float(r["offset"]) for r in rows]
    positive = [o for o in offs if o > 0]
    zero_at = min(positive) / 10 if positive else 1.0  # where offset 0 sits on the log axis
    xs = [o if o > 0 else zero_at for o in offs]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for key, label, style in (("err_lifted", "lifted (Lemma 1), float32", "o-"),
                              ("err_centered", "centered (2), float32", "s-")):
        ax.plot(xs, [float(r[key]) for r in rows], style, label=label)
    for x, r in zip(xs, rows):
        ax.annotate(f"{float(r['lifted_over_centered']):.2g}x", (x, float(r["err_lifted"])), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels(["0" if o == 0 else f"1e{int(round(math.log10(o)))}" for o in offs])
    r0 = rows[0]
    ax.set_xlabel("offset of data and means from the origin")
    ax.set_ylabel("max |S - S_ref| / max |S_ref|")
    ax.set_title(f"Score error vs float64 centered reference (d={r0['d']}, K={r0['K']}, N={r0['N']})\n"
                 "labels: lifted error / centered error", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="major", lw=0.3)
    fig.tight_layout()
    return save(fig, csv_path, out_dir, "fig_conditioning")


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
