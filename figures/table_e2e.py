"""The end-to-end table: every arm's own fit to convergence, per shape, from results CSVs only.

    python -m figures.table_e2e results/h200/e2e.csv

One row per (shape, arm): wall seconds of the fastest fit from a host NumPy array and from a
device tensor, the split of the fastest host fit (the phases the arm lets us see; "not split" is
the wall time no measured phase accounts for), iterations taken, the gate's float64 log-likelihood
per point (and its difference relative to the reference arm's), the ARI of the labels against the reference arm (scikit-learn where its fit is valid),
and the host wall time over Turbo-GMM's. Implementations are compared within one run: where Turbo-GMM ran at a
shape in several runs, each arm is divided by the Turbo-GMM row of its own commit, and only where none ran with
it by the newest one, which the ratio names. A cell that ran past its limit reads "> limit s" (a lower
bound); other failures and unavailable arms read their status. Writes e2e.md beside the CSV
(``<stem>.md`` for another CSV, e.g. e2e_smoke.md).
"""
from __future__ import annotations

from pathlib import Path

from figures import csv_to_figure_cli, pipe_table
from figures.table1 import run_text, shape_key, shape_labels, sorted_rows, speedup_text
from harness.results import read_csv

PHASES = [("transfer_s", "transfer"), ("validation_s", "validation"), ("init_s", "init"), ("em_s", "EM"),
          ("other_s", "other"), ("unsplit_s", "not split")]
HEADER = ["Shape", "Arm", "Run", "Wall, host array (s)", "Wall, device tensor (s)", "Split of the host fit (s)",
          "Iterations", "LL/point (float64; relative to the reference)", "ARI vs reference", "Host wall vs Turbo-GMM", "Gate"]


def number(row: dict, column: str) -> float | None:
    return float(row[column]) if row.get(column, "") != "" else None


def wall_text(row: dict, column: str) -> str:
    """Seconds, or what happened instead: a timeout as its lower bound."""
    if row["status"] == "fail (TIMEOUT)":
        return f"> {float(row['timeout_s']):.0f}"
    value = number(row, column)
    if row["status"] != "ok":
        return row["status"]
    return "—" if value is None else f"{value:.3f}"


def split_text(row: dict) -> str:
    """The measured phases of the host fit, in order, to 3 significant digits (a 2 ms phase reads 0.00200, not
    0.002); "not split" for the rest (empty when none)."""
    if row["status"] != "ok":
        return "—"
    parts = [f"{name} {number(row, col):#.3g}" for col, name in PHASES
             if number(row, col) is not None and (col != "unsplit_s" or number(row, col) >= 5e-4)]
    return ", ".join(parts) or "—"


def ll_text(ll: float | None, rel: float | None, is_reference: bool) -> str:
    """The float64 LL per point, with its difference relative to the reference arm's (not for the reference)."""
    if ll is None:
        return "—"
    return f"{ll:.6f}" if rel is None or is_reference else f"{ll:.6f} ({rel:+.1e})"


def newest_first(rows: list[dict]) -> list[dict]:
    """Rows by their record's timestamp, newest first (rows without one last)."""
    return sorted(rows, key=lambda r: r.get("timestamp") or "", reverse=True)


def turbo_reference(rows: list[dict], shape: tuple, commit: str) -> dict | None:
    """The valid Turbo-GMM row an arm's row at ``shape`` (its :func:`figures.table1.shape_key`: name, N, K, d)
    is divided by: the one of the same commit (one run), else the newest."""
    ours = [r for r in newest_first(rows) if r["arm"] == "turbo_gmm" and shape_key(r) == shape
            and r["status"] == "ok" and r["gate"] == "valid"]
    return next((r for r in ours if r.get("git_commit") == commit), ours[0] if ours else None)


def versus_text(r: dict, rows: list[dict]) -> str:
    """The host wall time over Turbo-GMM's, naming the Turbo-GMM run where it is another run's."""
    ref = turbo_reference(rows, shape_key(r), r.get("git_commit", ""))
    if r["arm"] == "turbo_gmm" or ref is None:
        return "—"
    base = number(ref, "e2e_wall_s_host")
    other = "" if ref.get("git_commit") == r.get("git_commit") else f" (vs {ref.get('git_commit') or '?'})"
    if r["status"] == "ok" and r["gate"] == "valid" and number(r, "e2e_wall_s_host") is not None:
        return speedup_text(number(r, "e2e_wall_s_host") / base) + other
    if r["status"] == "fail (TIMEOUT)":
        return f"> {float(r['timeout_s']) / base:.0f}x slower{other}"
    return "—"


def table_rows(rows: list[dict]) -> list[list[str]]:
    out, last, labels = [], None, shape_labels(rows)
    for r in sorted_rows(newest_first(rows)):  # an arm's runs at a shape, newest first
        ok = r["status"] == "ok"
        versus = versus_text(r, rows)
        ll, ari, rel = number(r, "ll_per_point"), number(r, "ari"), number(r, "rel_ll_diff")
        ref = f" ({r['reference_arm']})" if r.get("reference_arm") and r["reference_arm"] != "sklearn" else ""
        out.append([labels[shape_key(r)] if shape_key(r) != last else "", r["label"], run_text(r),
                    wall_text(r, "e2e_wall_s_host"),
                    wall_text(r, "e2e_wall_s_device") if ok else "—", split_text(r),
                    r["iterations"] or "—", ll_text(ll, rel, r.get("reference_arm") == r["arm"]),
                    f"{ari:.4f}{ref}" if ari is not None else "—", versus, r["gate"] or r["status"]])
        last = shape_key(r)
    return out


def markdown(table: list[list[str]], notes: list[str]) -> str:
    return pipe_table(HEADER, table, notes)


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = read_csv(csv_path)
    tols = sorted({r["tol"] for r in rows if r.get("tol")})
    caps = sorted({r["n_iter"] for r in rows})
    notes = [f"Each arm's own fit from its own default initialization to tol {', '.join(tols) or '?'} "
             f"(change of the mean log-likelihood per point) within {', '.join(caps)} iterations; wall times are "
             "the minimum over the timed fits (harness/PROTOCOL.md, the e2e protocol). \"not split\": wall time "
             "the arm gives no phase for. ARI against scikit-learn's labels unless another reference is named."]
    out_dir = Path(out_dir or Path(csv_path).parent)
    md = out_dir / f"{Path(csv_path).stem}.md"
    md.write_text(markdown(table_rows(rows), notes))
    return [md]


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
