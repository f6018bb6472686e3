"""Memory figure (paper §5.3): peak MB vs K at N = 1M, d = 32, every arm, log scale.

    python -m figures.fig_memory results/h200/table1.csv

From the CSV only. Valid fits are solid markers joined by lines; fits the gate
rejected are open markers (their peak was measured, but §5.1 drops them from
memory comparisons); cells that failed to run are listed under the plot.
Writes fig_memory.png/.pdf beside the CSV.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import csv_to_figure_cli, save  # noqa: E402
from harness.results import arm_order, read_csv  # noqa: E402

N_SWEEP, D_SWEEP = 1_000_000, 32


def sweep_rows(rows: list[dict]) -> list[dict]:
    """The large-K sweep: N = 1M, d = 32, every K."""
    return [r for r in rows if int(r["N"]) == N_SWEEP and int(r["d"]) == D_SWEEP]


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = sweep_rows(read_csv(csv_path))
    if not rows:
        raise ValueError(f"{csv_path} has no N={N_SWEEP}, d={D_SWEEP} rows")
    rank = {a: i for i, a in enumerate(arm_order())}
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (rank.get(a, len(rank)), a))
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    failed = []
    for j, arm in enumerate(arms):
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: int(r["K"]))
        ok = [(int(r["K"]), float(r["peak_mb"])) for r in mine if r["gate"] == "valid" and r["peak_mb"]]
        rej = [(int(r["K"]), float(r["peak_mb"])) for r in mine if r["gate"].startswith("rejected") and r["peak_mb"]]
        failed += [f"{mine[0]['label']} K={r['K']}: {r['status']}" for r in mine
                   if r["status"] != "ok" and not r["status"].startswith("unavailable")]
        label = mine[0]["label"]
        if ok:
            ax.plot(*zip(*ok), "o-", color=colors(j % 10), label=label)
        if rej:
            ax.plot(*zip(*rej), "o", mfc="none", color=colors(j % 10), label=None if ok else f"{label} (rejected only)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    Ks = sorted({int(r["K"]) for r in rows})
    ax.set_xticks(Ks)
    ax.set_xticklabels([str(k) for k in Ks])
    ax.set_xlabel(f"K (N = {N_SWEEP:,}, d = {D_SWEEP})")
    ax.set_ylabel("peak memory (MB)")
    ax.set_title("Peak memory vs K; open markers: fit rejected by the gate", fontsize=9)
    ax.grid(True, which="major", lw=0.3)
    ax.legend(fontsize=7, loc="upper left")
    if failed:
        fig.text(0.01, 0.01, "did not run: " + "; ".join(failed), fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.06 if failed else 0, 1, 1))
    return save(fig, csv_path, out_dir, "fig_memory")


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
