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

Two kinds of column appear only where some row has them, so a CSV without them renders as it did before they
existed: "Covariances" (where a row is not diagonal: a shape's rows by covariance type, diag first, each compared
only with rows of its own type), and the cold start (where a row has ``e2e_first_fit_s``): the wall time of the
cell process's first fit, before any warm-up, with whether the compilation caches were empty or warm when the cell
started, and the seconds it took over the fastest timed host fit; a row without it reads "—".
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
COVARIANCE_HEADER = "Covariances"  # after Shape, where a row is not diagonal
FIRST_FIT_HEADER = ["First fit, host array (s; caches)", "First fit over the fastest (s)"]  # after the walls


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


def covariance(row: dict) -> str:
    """The row's covariance type; rows made before the column are diagonal."""
    return row.get("covariance_type") or "diag"


def first_fit_texts(row: dict) -> list[str]:
    """The process's first fit (with the caches' state when the cell started) and its excess over the fastest
    timed host fit; "—" for a row without it (made before the column) or a cell that did not finish."""
    first, host = number(row, "e2e_first_fit_s"), number(row, "e2e_wall_s_host")
    if row["status"] != "ok" or first is None:
        return ["—", "—"]
    state = f" ({row['cache_state']})" if row.get("cache_state") else ""
    return [f"{first:.3f}{state}", f"{first - host:+.3f}" if host is not None else "—"]


def ll_text(ll: float | None, rel: float | None, is_reference: bool) -> str:
    """The float64 LL per point, with its difference relative to the reference arm's (not for the reference)."""
    if ll is None:
        return "—"
    return f"{ll:.6f}" if rel is None or is_reference else f"{ll:.6f} ({rel:+.1e})"


def newest_first(rows: list[dict]) -> list[dict]:
    """Rows by their record's timestamp, newest first (rows without one last)."""
    return sorted(rows, key=lambda r: r.get("timestamp") or "", reverse=True)


def turbo_reference(rows: list[dict], shape: tuple, commit: str, covariance_type: str = "diag") -> dict | None:
    """The valid Turbo-GMM row of ``covariance_type`` an arm's row at ``shape`` (its
    :func:`figures.table1.shape_key`: name, N, K, d) is divided by: the one of the same commit (one run), else
    the newest."""
    ours = [r for r in newest_first(rows) if r["arm"] == "turbo_gmm" and shape_key(r) == shape
            and covariance(r) == covariance_type and r["status"] == "ok" and r["gate"] == "valid"]
    return next((r for r in ours if r.get("git_commit") == commit), ours[0] if ours else None)


def versus_text(r: dict, rows: list[dict]) -> str:
    """The host wall time over Turbo-GMM's (of the same covariance type), naming the Turbo-GMM run where it is
    another run's."""
    ref = turbo_reference(rows, shape_key(r), r.get("git_commit", ""), covariance(r))
    if r["arm"] == "turbo_gmm" or ref is None:
        return "—"
    base = number(ref, "e2e_wall_s_host")
    other = "" if ref.get("git_commit") == r.get("git_commit") else f" (vs {ref.get('git_commit') or '?'})"
    if r["status"] == "ok" and r["gate"] == "valid" and number(r, "e2e_wall_s_host") is not None:
        return speedup_text(number(r, "e2e_wall_s_host") / base) + other
    if r["status"] == "fail (TIMEOUT)":
        return f"> {float(r['timeout_s']) / base:.0f}x slower{other}"
    return "—"


def columns(rows: list[dict]) -> tuple[bool, bool]:
    """(the Covariances column, the first-fit columns): each only where some row needs it."""
    return (any(covariance(r) != "diag" for r in rows),
            any(r.get("e2e_first_fit_s", "") != "" for r in rows))


def header(rows: list[dict]) -> list[str]:
    by_type, first_fit = columns(rows)
    head = list(HEADER)
    if first_fit:
        head[5:5] = FIRST_FIT_HEADER
    if by_type:
        head.insert(1, COVARIANCE_HEADER)
    return head


def table_rows(rows: list[dict]) -> list[list[str]]:
    out, last, labels = [], None, shape_labels(rows)
    by_type, first_fit = columns(rows)
    ordered = sorted_rows(newest_first(rows))  # an arm's runs at a shape, newest first
    ordered.sort(key=lambda r: (int(r["N"]), int(r["K"]), int(r["d"]), r["shape"], covariance(r) != "diag",
                                covariance(r)))  # stable: a shape's diagonal rows first, each type in arm order
    for r in ordered:
        ok = r["status"] == "ok"
        versus = versus_text(r, rows)
        ll, ari, rel = number(r, "ll_per_point"), number(r, "ari"), number(r, "rel_ll_diff")
        ref = f" ({r['reference_arm']})" if r.get("reference_arm") and r["reference_arm"] != "sklearn" else ""
        line = [labels[shape_key(r)] if shape_key(r) != (last or (None,))[0] else "", r["label"], run_text(r),
                wall_text(r, "e2e_wall_s_host"),
                wall_text(r, "e2e_wall_s_device") if ok else "—", split_text(r),
                r["iterations"] or "—", ll_text(ll, rel, r.get("reference_arm") == r["arm"]),
                f"{ari:.4f}{ref}" if ari is not None else "—", versus, r["gate"] or r["status"]]
        if first_fit:
            line[5:5] = first_fit_texts(r)
        if by_type:
            line.insert(1, covariance(r) if (shape_key(r), covariance(r)) != last else "")
        out.append(line)
        last = (shape_key(r), covariance(r))
    return out


def markdown(table: list[list[str]], notes: list[str], head: list[str] = HEADER) -> str:
    return pipe_table(head, table, notes)


def render(csv_path: Path, out_dir: Path | None = None) -> list[Path]:
    rows = read_csv(csv_path)
    tols = sorted({r["tol"] for r in rows if r.get("tol")})
    caps = sorted({r["n_iter"] for r in rows})
    notes = [f"Each arm's own fit from its own default initialization to tol {', '.join(tols) or '?'} "
             f"(change of the mean log-likelihood per point) within {', '.join(caps)} iterations; wall times are "
             "the minimum over the timed fits (harness/PROTOCOL.md, the e2e protocol). \"not split\": wall time "
             "the arm gives no phase for. ARI against scikit-learn's labels unless another reference is named."]
    by_type, first_fit = columns(rows)
    if by_type:
        notes.append("Covariances: the type every arm fits (its own \"full\" or \"diag\"); ARI, LL and the ratio to "
                     "Turbo-GMM compare rows of one type only.")
    if first_fit:
        notes.append("First fit: the wall time of the cell process's first fit, before any warm-up (compilation, "
                     "autotuning and allocator growth included), from the host array; (empty) or (warm): whether the "
                     "compilation caches held anything when the cell started (e2e.cold_cache=true: empty caches of "
                     "its own); \"over the fastest\": the first fit minus the fastest timed host fit. \"—\": a row "
                     "made before the column.")
    out_dir = Path(out_dir or Path(csv_path).parent)
    md = out_dir / f"{Path(csv_path).stem}.md"
    md.write_text(markdown(table_rows(rows), notes, header(rows)))
    return [md]


def main(argv=None) -> None:
    csv_to_figure_cli(render, __doc__, argv)


if __name__ == "__main__":
    main()
