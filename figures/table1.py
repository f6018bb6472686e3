"""Table 1: every arm at every shape, from results CSVs only (Markdown and LaTeX).

    python -m figures.table1 results/h200/table1.csv [--keep-rejected flash_gmm_bf16:1M_4096_32]

ms/iter is the CSV's ``ms_per_iter_min``, the minimum over the raw repetition seconds,
derived for every arm alike by harness/results.py. Only valid fits get a speedup, except cells named with --keep-rejected:
the paper's one disclosed exception, printed and marked with a dagger, never silent. Rows are keyed by
shape name *and* N, K, d (a ``shape.N=...`` override keeps the name: it is a shape of its own, labelled with its
sizes, and never divided by another size's Turbo-GMM row). A note under the table names the run(s) (record
date, commit) the rows come from, and says so where they come from more than one commit (‡ marks a speedup
across commits).
Writes table1.md and table1.tex beside the CSV (``<stem>_table1.*`` for another
experiment's CSV, e.g. smoke_table1.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from figures import pipe_table
from harness.results import arm_order, read_csv


def ms_per_iter(row: dict) -> float | None:
    """The cell's ms per EM iteration (minimum over its repetitions), None if it did not run."""
    ms = row["ms_per_iter_min"]
    return float(ms) if ms != "" and row["status"] == "ok" else None


def shape_key(row: dict) -> tuple[str, int, int, int]:
    """A row's shape as the tables and figures key it: its name and the N, K, d it ran at. A shape override
    (``shape=tiny_7_5 shape.N=200000``) keeps the name, so the name alone is not the shape."""
    return row["shape"], int(row["N"]), int(row["K"]), int(row["d"])


def shape_labels(rows: list[dict]) -> dict:
    """{shape_key: label}: the name with / for _, and the N, K, d where the rows hold that name at more than
    one size (an overridden shape beside the default one)."""
    sizes: dict = {}
    for r in rows:
        sizes.setdefault(r["shape"], set()).add(shape_key(r))
    return {k: name.replace("_", "/") + ("" if len(keys) == 1 else f" (N={k[1]}, K={k[2]}, d={k[3]})")
            for name, keys in sizes.items() for k in keys}


def distinct_shapes(rows: list[dict]) -> list[dict]:
    """The rows, each shape name held at more than one size renamed ``<name>@N<N>_K<K>_d<d>`` in every one of
    its rows, for readers that key rows by the ``shape`` column (the claims, the ablation): no row is ever
    compared with one of another N, K, d under a shared name; a name held at one size stays as it is."""
    if not all(r.get(c) not in (None, "") for r in rows for c in ("shape", "N", "K", "d")):
        return rows  # a study's CSV (conditioning, exactness) whose rows are not keyed by shape
    sizes: dict = {}
    for r in rows:
        sizes.setdefault(r["shape"], set()).add(shape_key(r))
    return [r if len(sizes[r["shape"]]) == 1 else dict(r, shape="{}@N{}_K{}_d{}".format(*shape_key(r)))
            for r in rows]


def arm_label(row: dict) -> str:
    return row["label"] + (" (Alg. 3)" if row["arm"] == "turbo_gmm" and row["algorithm"] == "two_pass" else "")


def sorted_rows(rows: list[dict]) -> list[dict]:
    rank = {a: i for i, a in enumerate(arm_order())}
    return sorted(rows, key=lambda r: (int(r["N"]), int(r["K"]), int(r["d"]), r["shape"],
                                       rank.get(r["arm"], len(rank)), r["arm"]))


def shape_arm_grid(rows: list[dict]) -> tuple[list[tuple], list[str], dict]:
    """(shape keys in (N, K, d) order, arms in table order, {(shape key, arm): row}): the layout of a grouped
    bar figure (:func:`shape_key`: an overridden shape is a shape of its own)."""
    shapes = list(dict.fromkeys(shape_key(r) for r in sorted_rows(rows)))
    rank = {a: i for i, a in enumerate(arm_order())}
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (rank.get(a, len(rank)), a))
    return shapes, arms, {(shape_key(r), r["arm"]): r for r in rows}


def run_text(row: dict) -> str:
    """The run a row comes from: its record's date and commit."""
    return " ".join(x for x in ((row.get("timestamp") or "")[:10], row.get("git_commit") or "") if x) or "—"


def run_notes(rows: list[dict]) -> list[str]:
    """The run(s) the rows come from (:func:`run_text`: record date and commit, with their row counts); where
    the rows come from more than one commit, a line saying so and what ‡ marks."""
    def short(commit: str) -> str:  # a full hash as git log --oneline gives it, "+dirty" kept
        return commit[:7] + commit[40:] if len(commit) >= 40 else commit

    runs: dict = {}
    for r in rows:
        run = run_text(dict(r, git_commit=short(r.get("git_commit") or "")))
        runs[run] = runs.get(run, 0) + 1
    listed = "; ".join(f"{run} ({n} row{'s' if n != 1 else ''})" for run, n in sorted(runs.items()))
    commits = sorted({short(r.get("git_commit") or "") or "?" for r in rows})
    if len(commits) <= 1:
        return [f"Run: {listed}."] if rows else []
    return [f"Runs: {listed}.",
            f"Rows come from {len(commits)} commits ({', '.join(commits)}), not one run: a speedup marked ‡ divides "
            "by a Turbo-GMM row of another commit."]


def speedup_text(ratio: float) -> str:
    """ratio = arm time / Turbo-GMM time."""
    return f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"


def table_rows(rows: list[dict], keep_rejected: set[tuple[str, str]]) -> list[list[str]]:
    """[shape, arm, ms/iter, speedup, mem, gate] per row, shapes in (N, K, d) order. A speedup divides by the
    Turbo-GMM row of the same shape name and the same N, K, d (:func:`shape_key`), never another size's; one
    whose row comes from another commit than that Turbo-GMM row's is marked ‡ (:func:`run_notes`)."""
    turbo = {shape_key(r): r for r in rows if r["arm"] == "turbo_gmm" and r["gate"] == "valid" and ms_per_iter(r)}
    labels = shape_labels(rows)
    out, last = [], None
    for r in sorted_rows(rows):
        key = shape_key(r)
        ms = ms_per_iter(r)
        kept = (r["arm"], r["shape"]) in keep_rejected
        usable = ms is not None and (r["gate"] == "valid" or kept)
        if r["arm"] == "turbo_gmm":
            speed = "—"
        elif usable and key in turbo:
            other_run = (r.get("git_commit") or "") != (turbo[key].get("git_commit") or "")
            speed = speedup_text(ms / ms_per_iter(turbo[key])) + (" †" if kept else "") + (" ‡" if other_run else "")
        else:
            speed = "—"
        mem = f"{float(r['peak_mb']):.0f}" if r["peak_mb"] else "—"
        gate = r["gate"] or r["status"]
        out.append([labels[key] if key != last else "", arm_label(r),
                    f"{ms:.2f}" if ms is not None else r["status"], speed, mem, gate + (" †" if kept else "")])
        last = key
    return out


HEADER = ["Shape", "Arm", "ms/iter", "Speedup vs Turbo-GMM", "Mem (MB)", "Gate"]


def markdown(table: list[list[str]], notes: list[str]) -> str:
    return pipe_table(HEADER, table, notes)


def _tex(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("—", "---"), ("†", r"$^\dagger$"), ("‡", r"$^\ddagger$"), ("x slower", r"$\times$ slower"), ("x faster", r"$\times$ faster")):
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
    notes += run_notes(rows)
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
