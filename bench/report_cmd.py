"""`distmm report RESULTS.csv -o DIR`: plots, tables and a short reading of a sweep's results.

Writes into DIR: PNG plots (matplotlib, headless), ``report.md`` embedding them with tables of the
numbers, and ``report.html``, the same page self-contained (the PNGs inlined as data URIs).

Plots: strong scaling (time, GFLOP/s, parallel efficiency against P, one figure per shape), weak
scaling (the same for a weak sweep), predicted against measured time (log-log, y = x), per-phase
predicted and measured time side by side for traced runs, bytes sent per rank against the lower
bounds n^2/sqrt(P) and n^2/P^(2/3) (n the cube root of M K N), a per-rank timeline (Gantt) of one
traced run per algorithm, and each algorithm's A, B and C layouts drawn on a small shape.

Where runs start from layouts other than native (a sweep's ``layouts`` axis), times and readings
are end to end, runs from different layouts are not compared with each other, and a section sets
the kernel and the end-to-end time side by side: their ratio, a figure against P and a stacked
bar per configuration with its three phases (redistribute in, multiply, redistribute out).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import figures, report_end_to_end, report_runs, report_sections
from .document import Doc
from .files import write_atomic
from .record import read_frame
from .report_sections import Report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", metavar="RESULTS.csv", help="a table written by distmm sweep")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="directory for the report")


def main(args) -> int:
    results = Path(args.results)
    df = read_frame(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    figures.PHASE_COLOURS.clear()
    report = Report(
        df=df,
        ok=df[df["status"] == "ok"].copy(),
        results=results,
        out=out,
        colours=figures.algo_colours(df["algo"].unique()),
        doc=Doc(),
    )
    name = (
        str(df["sweep"].dropna().iloc[0])
        if "sweep" in df and df["sweep"].notna().any()
        else results.stem
    )
    title = f"distmm sweep report: {name}"
    report.doc.h(1, title)
    report_sections.overview(report)
    # The reading, then the plots that support it.
    extra = report_end_to_end.reading_lines(report.ok)
    pred, error_rows, data_rows = report_sections.reading(report, extra)
    report_sections.scaling(report)
    report_end_to_end.section(report)
    report_sections.model(report, pred, error_rows)
    tables = report_sections.traced(report)
    report_sections.communication(report, data_rows)
    report_sections.timelines(report, tables)
    report_sections.layouts(report)
    report_runs.all_runs(report)
    write_atomic(out / "report.md", report.doc.markdown())
    page = write_atomic(out / "report.html", report.doc.html(out, title))
    print(page)
    return 0
