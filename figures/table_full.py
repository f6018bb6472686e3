"""The full-covariance table: every arm per shape of experiment=full, from results CSVs only.

    python -m figures.table_full results/h200/full.csv

One row per (shape, arm): ms/iter (``ms_per_iter_min``), the speed against the shape's fastest valid
fit (for that fit: its lead over the runner-up, the second-fastest valid fit), Turbo-GMM's fraction of
its roofline, peak memory, the gate and the run (date and commit). Only valid fits are ranked.

The roofline of one full-covariance EM iteration of the ``products`` dataflow (kernels/full/tiles.py),
counted as tensor-core FLOPs (a multiply-add = 2):

- score, y = (x - c) [U_1 | ... | U_K]: an N x d by d x K d product, 2 N K d^2;
- statistics, per responsibility tile g (N x K): s = (x - c)^T g, 2 N K d; the second moments as
  phi^T g over the P = b (b + 1) / 2 block pairs (I <= J) of b = ceil(d / 8) feature blocks of 8,
  64 lanes each, 2 N K 64 P (about N K d^2 + 8 N K d);

F = 2 N K (d^2 + d + 64 P) per iteration, whatever the algorithm (Algorithm 3 scores twice: that is
its cost, not more useful work). Its time at the precision used, and the HBM time of the bytes of X per
pass (N d 4; one pass for one_pass, two for two_pass), at the device's probed rates (its env.json:
harness.roofline.bound_ms, tf32x3 charged three TF32 products per product, ieee the float32 FMA rate, fp64
the float64 one). The roofline time is the longer of the two; the fraction is it over the measured time.
Writes full.md beside the CSV (``<stem>.md`` for another CSV, e.g. full_smoke.md).
"""
from __future__ import annotations

import math
from pathlib import Path

from figures import csv_to_figure_cli
from figures.table1 import arm_label, ms_per_iter, run_text, shape_key, shape_labels, sorted_rows
from figures.table_e2e import number
from harness.roofline import bound_ms

PAIR_BLOCK = 8  # turbo_gmm.full.parameters.PAIR_BLOCK: features per block of the second-moment pairs
HEADER = ["Shape", "Arm", "ms/iter", "vs fastest valid", "Roofline (Turbo-GMM)", "Mem (MB)", "Gate", "Run"]


def products_flops(N: int, K: int, d: int) -> float:
    """Tensor-core FLOPs of one iteration of the products dataflow (module docstring)."""
    blocks = math.ceil(d / PAIR_BLOCK)
    pairs = blocks * (blocks + 1) // 2
    return 2.0 * N * K * (d * d + d + PAIR_BLOCK * PAIR_BLOCK * pairs)


def roofline_ms(row: dict, rates: dict) -> tuple[float, str] | None:
    """(roofline ms per iteration, its bound: "compute" or "HBM") of a Turbo-GMM row at the device's probed
    ``rates``; None at a precision or rate they do not give."""
    N, K, d = int(row["N"]), int(row["K"]), int(row["d"])
    passes = 2 if row.get("algorithm") == "two_pass" else 1
    return bound_ms(products_flops(N, K, d), passes * N * d * 4, row.get("precision", ""), rates)


def ranked(rows: list[dict]) -> dict:
    """shape key (name, N, K, d) -> its valid fits as [(ms/iter, row)], fastest first."""
    out: dict = {}
    for r in rows:
        ms = ms_per_iter(r)
        if ms is not None and r["gate"] == "valid":
            out.setdefault(shape_key(r), []).append((ms, r))
    return {s: sorted(v, key=lambda t: t[0]) for s, v in out.items()}


def speed_text(row: dict, ranks: list) -> str:
    ms = ms_per_iter(row)
    if ms is None or row["gate"] != "valid" or not ranks:
        return "—"
    fastest_ms, fastest = ranks[0]
    if row is fastest:
        if len(ranks) == 1:
            return "fastest (no other valid fit)"
        runner_ms, runner = ranks[1]
        return f"fastest, {runner_ms / ms:.2f}x ahead of {arm_label(runner)}"
    return f"{ms / fastest_ms:.2f}x slower"


def roofline_text(row: dict, rates: dict) -> str:
    ms, bound = ms_per_iter(row), roofline_ms(row, rates)
    if row["arm"] != "turbo_gmm" or ms is None or bound is None or row["gate"] != "valid":
        return "—"
    return f"{bound[0] / ms:.0%} of {row['precision']} {bound[1]} ({bound[0]:.3g} ms)"


def table_rows(rows: list[dict], rates: dict) -> list[list[str]]:
    ranks, labels = ranked(rows), shape_labels(rows)
    out, last = [], None
    for r in sorted_rows(rows):
        ms = ms_per_iter(r)
        mem = number(r, "peak_mb")
        out.append([labels[shape_key(r)] if shape_key(r) != last else "", arm_label(r),
                    f"{ms:.2f}" if ms is not None else r["status"], speed_text(r, ranks.get(shape_key(r), [])),
                    roofline_text(r, rates), f"{mem:.0f}" if mem is not None else "—", r["gate"] or r["status"],
                    run_text(r)])
        last = shape_key(r)
    return out


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    from harness.results import device_env, read_csv

    table = table_rows(read_csv(csv_path), device_env(Path(csv_path).parent).get("probes", {}))
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
    lines += ["", "Full covariances, 10 EM iterations from the shared init; only fits the float64 gate accepts are "
              "ranked. Roofline: products-dataflow FLOPs or HBM bytes of X at the device's probed rates (env.json; "
              "figures/table_full.py). "
              "Run: the date and commit of each row; where a shape's rows come from several runs, their ratios "
              "span those runs."]
    out_dir = Path(out_dir or Path(csv_path).parent)
    md = out_dir / f"{Path(csv_path).stem}.md"
    md.write_text("\n".join(lines) + "\n")
    return [md]


if __name__ == "__main__":
    csv_to_figure_cli(render, __doc__)
