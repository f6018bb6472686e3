"""The k-means table: per shape and arm, Lloyd from the shared seeds and the library's own fit, from results CSVs only.

    python -m figures.table_kmeans results/h200/kmeans.csv

One row per (shape, arm) (harness/PROTOCOL.md, "The k-means protocol"): Lloyd's milliseconds per iteration (the
minimum over the timed runs, of the iterations the library ran: a fixed point may end one before
``kmeans.iterations``), the iterations, the float64 inertia of its centers relative to the reference's (scikit-
learn's Lloyd from the same seeds; "f64" marks the float64 Lloyd reference where scikit-learn has no valid fit at
the shape), and its time over Turbo-GMM's; then the own fit's wall seconds (its own seeding and stop rule), its
iterations, its inertia relative to scikit-learn's own fit (or "f64": to the float64 Lloyd after the shared
iterations), and its time over Turbo-GMM's; then the gate's verdicts. Only valid results get a ratio; a rejected
one keeps its numbers and reads "rejected (...)" in the gate column, never dropped. An arm that could not run
reads its status (``unavailable: <reason>``). Each arm is divided by the Turbo-GMM row of its own commit where
one ran with it, else the newest (named). Writes kmeans.md beside the CSV (``<stem>.md`` for another CSV, e.g.
kmeans_smoke.md).
"""
from __future__ import annotations

from pathlib import Path

from figures import csv_to_figure_cli, pipe_table
from figures.table1 import run_notes, run_text, shape_key, shape_labels, sorted_rows, speedup_text
from harness.results import read_csv

OURS = "kmeans_turbo_gmm"
REFERENCE = "kmeans_sklearn"
HEADER = ["Shape", "Arm", "Run", "Lloyd ms/iter", "Lloyd iterations", "Lloyd inertia vs reference",
          "Lloyd vs Turbo-GMM", "Own fit (s)", "Own-fit iterations", "Own-fit inertia vs reference",
          "Own fit vs Turbo-GMM", "Gate (Lloyd; own fit)"]


def number(row: dict, column: str) -> float | None:
    return float(row[column]) if row.get(column, "") not in ("", None) else None


def lloyd_ok(row: dict) -> bool:
    return row["status"] == "ok" and row["gate"] == "valid" and number(row, "ms_per_iter_min") is not None


def own_ok(row: dict) -> bool:
    return row.get("e2e_status") == "ok" and row.get("e2e_gate") == "valid" and number(row, "e2e_wall_s") is not None


def newest_first(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r.get("timestamp") or "", reverse=True)


def ours_for(rows: list[dict], row: dict, usable) -> dict | None:
    """The Turbo-GMM row that ``row`` is divided by: same shape (name, N, K, d), ``usable``, of the same commit
    where there is one, else the newest."""
    ours = [r for r in newest_first(rows) if r["arm"] == OURS and shape_key(r) == shape_key(row) and usable(r)]
    return next((r for r in ours if r.get("git_commit") == row.get("git_commit")), ours[0] if ours else None)


def versus(rows: list[dict], row: dict, usable, column: str) -> str:
    """The row's ``column`` over Turbo-GMM's, as "Nx slower/faster" (figures.table1.speedup_text)."""
    if row["arm"] == OURS or not usable(row):
        return "—"
    ref = ours_for(rows, row, usable)
    if ref is None:
        return "—"
    other = "" if ref.get("git_commit") == row.get("git_commit") else f" (vs {ref.get('git_commit') or '?'})"
    return speedup_text(number(row, column) / number(ref, column)) + other


def relative_text(row: dict, column: str, reference_column: str) -> str:
    value = number(row, column)
    if value is None:
        return "—"
    mark = "" if row.get(reference_column) in (REFERENCE, "", None) else " f64"
    return f"{value:+.1e}{mark}"


def short_status(status: str) -> str:
    """A status without its reason (the gate column gives it whole): "unavailable", "fail (ERROR)", "fail (OOM)"."""
    if status.startswith("unavailable"):
        return "unavailable"
    return "fail (ERROR)" if status.startswith("fail (ERROR") else status


def lloyd_text(row: dict) -> str:
    if row["status"] == "fail (TIMEOUT)":
        return f"> {float(row['timeout_s']):.0f} s (timeout)"
    if row["status"] != "ok":
        return short_status(row["status"])
    ms = number(row, "ms_per_iter_min")
    return "—" if ms is None else f"{ms:.3f}"


def own_text(row: dict) -> str:
    status = row.get("e2e_status") or ""
    if row["status"] != "ok":
        return "—"
    if status == "fail (TIMEOUT)":
        return f"not done in the cell's {float(row['timeout_s']):.0f} s"
    if status != "ok":
        return short_status(status) or "—"
    return f"{number(row, 'e2e_wall_s'):.3f}"


def gate_text(row: dict) -> str:
    if row["status"] != "ok":
        return row["status"]
    own = row.get("e2e_gate") or row.get("e2e_status") or "—"
    return f"{row['gate']}; {own}"


def short_run(row: dict) -> str:
    """:func:`figures.table1.run_text` with the commit as ``git log --oneline`` gives it ("+dirty" kept)."""
    commit = row.get("git_commit") or ""
    return run_text(dict(row, git_commit=commit[:7] + commit[40:] if len(commit) >= 40 else commit))


def table_rows(rows: list[dict]) -> list[list[str]]:
    out, last, labels = [], None, shape_labels(rows)
    for r in sorted_rows(newest_first(rows)):  # an arm's runs at a shape, newest first
        ok = r["status"] == "ok"
        own = r.get("e2e_status") == "ok"
        out.append([labels[shape_key(r)] if shape_key(r) != last else "", r["label"], short_run(r), lloyd_text(r),
                    (r.get("n_iter_reported") or "—") if ok else "—",
                    relative_text(r, "rel_inertia_diff", "reference_arm") if ok else "—",
                    versus(rows, r, lloyd_ok, "ms_per_iter_min"), own_text(r),
                    (r.get("iterations") or "—") if own else "—",
                    relative_text(r, "e2e_rel_inertia_diff", "e2e_reference") if own else "—",
                    versus(rows, r, own_ok, "e2e_wall_s"), gate_text(r)])
        last = shape_key(r)
    return out


def markdown(table: list[list[str]], notes: list[str]) -> str:
    return pipe_table(HEADER, table, notes)


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = read_csv(csv_path)
    iterations = sorted({r["n_iter"] for r in rows}) or ["?"]
    notes = [f"Lloyd: {', '.join(iterations)} iterations from the shared k-means++ seeds (scikit-learn's, "
             "RandomState(seed)), early stop off, ms per iteration the minimum over the timed runs of the whole fit "
             "call over the iterations it ran; inertia relative to scikit-learn's Lloyd from the same seeds (f64: to "
             "the float64 Lloyd reference, where scikit-learn has no valid row). Own fit: each library's fit with its "
             "own seeding, stop rule and default tolerance, wall seconds the minimum over the timed fits; inertia "
             "relative to scikit-learn's own fit (f64: to the float64 Lloyd after the shared iterations). The gate "
             "rejects a Lloyd result whose float64 inertia exceeds the float64 Lloyd reference's by more than 1e-4 "
             "relative, and any non-finite centers (harness/PROTOCOL.md, the k-means protocol). Data: the shape's "
             "generator with ceil(K / kmeans.clusters_per_component) components (the CSV's data_components)."]
    notes += run_notes(rows)
    out_dir = Path(out_dir or Path(csv_path).parent)
    md = out_dir / f"{Path(csv_path).stem}.md"
    md.write_text(markdown(table_rows(rows), notes))
    return [md]


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
