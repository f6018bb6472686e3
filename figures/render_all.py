"""Render every table, figure and the claims report from whatever CSVs a results folder holds.

    python -m figures.render_all [results]      # what `make figures` runs

For each results/<device>/: table1.csv -> table1.md/.tex, fig1_latency, fig_memory, turbo_summary.md, fp64.md;
smoke.csv -> smoke_table1.md/.tex, smoke_fig1_latency; dispatch.csv -> fig_dispatch;
ablation.csv -> fig2_ablation; conditioning.csv -> fig_conditioning; e2e.csv -> e2e.md, fig_e2e
(e2e_smoke.csv -> e2e_smoke.md, e2e_smoke_fig); full.csv -> full.md, fig_full (full_smoke.csv ->
full_smoke.md, full_smoke_fig); kmeans.csv -> kmeans.md, fig_kmeans (kmeans_smoke.csv -> kmeans_smoke.md,
kmeans_smoke_fig); ncu/*.raw.csv -> counters.md (what bounds each profiled kernel); and
claims.md wherever one of the paper's CSVs exists. A missing CSV is reported and skipped; so is an empty or
unreadable one (a header only, bytes that are not UTF-8 text), and a renderer that fails on its CSV: the
line names it, and the other tables, figures and device folders are rendered.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from figures import (claims, fig1_latency, fig2_ablation, fig_conditioning, fig_dispatch, fig_e2e, fig_full, fig_kmeans,
                     fig_memory, table1, table_counters, table_e2e, table_fp64, table_full, table_kmeans, turbo_summary)
from harness.results import read_csv

PAPER_KEEP_REJECTED = {("flash_gmm", "1M_4096_32")}  # §5.1's one disclosed exception, flagged where it is drawn



def kept_rejected(csv_path: Path) -> set:
    """The disclosed exception, only where that cell exists and the gate rejected it."""
    return {(r["arm"], r["shape"]) for r in read_csv(csv_path)
            if (r["arm"], r["shape"]) in PAPER_KEEP_REJECTED and r["gate"].startswith("rejected")}


RENDERERS = {
    "table1": [lambda p: table1.render([p], kept_rejected(p)), lambda p: fig1_latency.render(p, None, kept_rejected(p)),
               fig_memory.render, turbo_summary.render, lambda p: table_fp64.render(p.parent)],
    "smoke": [lambda p: table1.render([p], set()), fig1_latency.render],
    "dispatch": [fig_dispatch.render],
    "ablation": [fig2_ablation.render],
    "conditioning": [fig_conditioning.render],
    "e2e": [table_e2e.render, fig_e2e.render],
    "e2e_smoke": [table_e2e.render, fig_e2e.render],
    "full": [table_full.render, fig_full.render],
    "full_smoke": [table_full.render, fig_full.render],
    "kmeans": [table_kmeans.render, fig_kmeans.render],
    "kmeans_smoke": [table_kmeans.render, fig_kmeans.render],
}
CLAIM_SOURCES = ("table1", "dispatch", "ablation", "d128_control", "d128_published", "exactness", "conditioning")


def unusable(csv: Path) -> str | None:
    """None where ``csv`` can be read and holds rows, else why it is skipped: it cannot be read (not UTF-8 text,
    not CSV, a JSON column garbled) or it holds no row (a header at most). A CSV that reads but lacks what a
    renderer needs is that renderer's failure (:func:`_attempt`)."""
    try:
        rows = read_csv(csv)
    except Exception as e:  # UnicodeDecodeError, csv.Error, json.JSONDecodeError, OSError, ...
        return f"unreadable ({type(e).__name__}: {str(e)[:200]})"
    return None if rows else "no rows (a header at most)"


def _attempt(what: str, render, say) -> list[Path]:
    """``render()``'s paths, or none and a line saying what could not be rendered and why: one bad input never
    stops the other tables, figures and device folders."""
    try:
        out = render()
    except Exception as e:
        say(f"{what}: not rendered ({type(e).__name__}: {str(e)[:300]})")
        return []
    return list(out) if isinstance(out, (list, tuple)) else [out]


def render_folder(folder: Path, say=print) -> list[Path]:
    """Every table and figure of one device folder; a CSV that is empty or unreadable (:func:`unusable`) is
    skipped with a line, and so is a renderer that fails on its CSV, the rest rendered."""
    out, bad = [], set()
    for name, renderers in RENDERERS.items():
        csv = folder / f"{name}.csv"
        if not csv.exists():
            continue
        why = unusable(csv)
        if why is not None:
            say(f"{csv}: skipped: {why}")
            bad.add(name)
            continue
        for render in renderers:
            out += _attempt(f"{csv} ({getattr(render, '__module__', '?')})", lambda: render(csv), say)
    if (folder / "ncu").is_dir():
        out += _attempt(f"{folder / 'ncu'}", lambda: table_counters.render(folder / "ncu"), say)
    sources = [n for n in CLAIM_SOURCES if (folder / f"{n}.csv").exists()]
    unread = [n for n in sources if n in bad or unusable(folder / f"{n}.csv") is not None]
    if unread:
        say(f"{folder}: claims skipped: unusable {', '.join(f'{n}.csv' for n in unread)}")
    elif sources:
        out += _attempt(f"{folder} (claims)", lambda: claims.render(folder), say)
    missing = [n for n in CLAIM_SOURCES if not (folder / f"{n}.csv").exists()]
    if missing and any((folder / f"{n}.csv").exists() for n in CLAIM_SOURCES):
        say(f"{folder}: not measured yet: {', '.join(f'{n}.csv' for n in missing)}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="?", default=Path("results"))
    a = ap.parse_args(argv)
    folders = sorted(p for p in a.results.iterdir() if p.is_dir()) if a.results.exists() else []
    paths = [p for f in folders for p in render_folder(f, say=lambda m: print(m, file=sys.stderr))]
    for p in paths:
        print(p)
    if not paths:
        print(f"nothing to render under {a.results}/ (run make reproduce first)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
