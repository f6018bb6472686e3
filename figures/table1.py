"""Table 1: every arm at every shape, from results CSVs only (Markdown and LaTeX).

    python -m figures.table1 results/h200/table1.csv [--keep-rejected flash_gmm_bf16:1M_4096_32]

ms/iter is the CSV's ``ms_per_iter_min``, the minimum over the raw repetition seconds,
derived for every arm alike by harness/results.py. Only valid fits get a speedup, except cells named with --keep-rejected:
the paper's one disclosed exception, printed and marked with a dagger, never silent.
Writes table1.md and table1.tex beside the CSV (``<stem>_table1.*`` for another
experiment's CSV, e.g. smoke_table1.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.results import arm_order, read_csv


def ms_per_iter(row: dict) -> float | None:
    """The cell's ms per EM iteration (minimum over its repetitions), None if it did not run."""
    ms = row["ms_per_iter_min"]
    return float(ms) if ms != "" and row["status"] == "ok" else None


def shape_label(row: dict) -> str:
    return row["shape"].replace("_", "/")


def arm_label(row: dict) -> str:
    return row["label"] + (" (Alg. 3)" if row["arm"] == "turbo_gmm" and row["algorithm"] == "two_pass" else "")


def sorted_rows(rows: list[dict]) -> list[dict]:
    rank = {a: i for i, a in enumerate(arm_order())}
    return sorted(rows, key=lambda r: (int(r["N"]), int(r["K"]), int(r["d"]), r["shape"],
                                       rank.get(r["arm"], len(rank)), r["arm"]))


def shape_arm_grid(rows: list[dict]) -> tuple[list[str], list[str], dict]:
    """(shapes in (N, K, d) order, arms in table order, {(shape, arm): row}): the layout of a grouped bar figure."""
    shapes = list(dict.fromkeys(r["shape"] for r in sorted_rows(rows)))
    rank = {a: i for i, a in enumerate(arm_order())}
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (rank.get(a, len(rank)), a))
    return shapes, arms, {(r["shape"], r["arm"]): r for r in rows}


def run_text(row: dict) -> str:
    """The run a row comes from: its record's date and commit."""
    return " ".join(x for x in ((row.get("timestamp") or "")[:10], row.get("git_commit") or "") if x) or "—"


def speedup_text(ratio: float) -> str:
    """ratio = arm time / Turbo-GMM time."""
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


def table_rows(rows: list[dict], keep_rejected: set[tuple[str, str]]) -> list[list[str]]:
    """[shape, arm, ms/iter, speedup, mem, gate] per row, shapes in (N, K, d) order."""
    turbo = {r["shape"]: ms_per_iter(r) for r in rows if r["arm"] == "turbo_gmm" and r["gate"] == "valid"}
    out, last = [], None
    for r in sorted_rows(rows):
        ms = ms_per_iter(r)
        kept = (r["arm"], r["shape"]) in keep_rejected
        usable = ms is not None and (r["gate"] == "valid" or kept)
        if r["arm"] == "turbo_gmm":
            speed = "—"
        elif usable and turbo.get(r["shape"]):
            speed = speedup_text(ms / turbo[r["shape"]]) + (" †" if kept else "")
        else:
            speed = "—"
        mem = f"{float(r['peak_mb']):.0f}" if r["peak_mb"] else "—"
        gate = r["gate"] or r["status"]
        out.append([shape_label(r) if r["shape"] != last else "", arm_label(r),
                    f"{ms:.2f}" if ms is not None else r["status"], speed, mem, gate + (" †" if kept else "")])
        last = r["shape"]
    return out


HEADER = ["Shape", "Arm", "ms/iter", "Speedup vs Turbo-GMM", "Mem (MB)", "Gate"]


def markdown(table: list[list[str]], notes: list[str]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
    return "\n".join(lines + [""] + notes) + "\n"


def _tex(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("—", "---"), ("†", r"$^\dagger$"), ("x slower", r"$\times$ slower"), ("x faster", r"$\times$ faster")):
        s = s.replace(a, b)
    return s


def latex(table: list[list[str]], notes: list[str]) -> str:
    lines = [r"\begin{tabular}{llrlrl}", r"\toprule", " & ".join(HEADER) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(c) for c in row) + r" \\" for row in table]
    lines += [r"\bottomrule", r"\end{tabular}"] + [f"% {n}" for n in notes]
    return "\n".join(lines) + "\n"


def render(csv_paths: list[Path], keep_rejected: set[tuple[str, str]], out_dir: Path | None = None) -> list[Path]:
    rows = [r for p in csv_paths for r in read_csv(p)]
    notes = [f"† kept although the gate rejected it (disclosed exception): {a} at {s}" for a, s in sorted(keep_rejected)]
    for n in notes:
        print(n)
    table = table_rows(rows, keep_rejected)
    out_dir = Path(out_dir or Path(csv_paths[0]).parent)
    stem = "table1" if Path(csv_paths[0]).stem == "table1" else f"{Path(csv_paths[0]).stem}_table1"
    md, tex = out_dir / f"{stem}.md", out_dir / f"{stem}.tex"
    md.write_text(markdown(table, notes))
    tex.write_text(latex(table, notes))
    return [md, tex]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", type=Path)
    ap.add_argument("--keep-rejected", action="append", default=[], metavar="ARM:SHAPE",
                    help="keep this rejected cell's latency and speedup, flagged (repeatable)")
    ap.add_argument("--out-dir", type=Path)
    a = ap.parse_args(argv)
    keep = {tuple(k.split(":", 1)) for k in a.keep_rejected}
    for p in render(a.csv, keep, a.out_dir):
        print(p)


if __name__ == "__main__":
    main()
