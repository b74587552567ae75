"""The report's end-to-end section, for tables with runs from the user's layouts (a sweep's
``layouts`` axis): the kernel and the end-to-end time side by side, their ratio, the phases and
the bytes redistributed, in a table, a figure against P and stacked phase bars. A table of
native runs only has none of it (its kernel is its end to end)."""

from __future__ import annotations

import numpy as np

from layouts.endpoints import NATIVE

from . import end_to_end_figures as figures
from .figures import slug
from .report_sections import _fmt, _mib
from .report_stats import by_layouts, has_layouts, layout_order


def _ratio(row) -> float:
    kernel = float(row["multiply_seconds"])
    return float(row["seconds"]) / kernel if kernel > 0 else float("nan")


def reading_lines(ok) -> list[str]:
    """What the end-to-end runs say: per layouts, how much longer than the kernel the whole
    multiplication takes, and at how many points the fastest algorithm changes once the
    redistribution counts."""
    if not has_layouts(ok):
        return []
    lines = []
    for name in layout_order(ok["layouts_in"]):
        if name == NATIVE:
            continue
        g = ok[ok["layouts_in"] == name]
        ratios = [r for r in (_ratio(x) for _, x in g.iterrows()) if r == r]
        if not ratios:
            continue
        moved = (g["redistribute_in_seconds"] + g["redistribute_out_seconds"]) / g["seconds"]
        lines.append(
            f"From **{name}** layouts, end to end / kernel: median {float(np.median(ratios)):.2f}x "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}) over {len(ratios)} runs; "
            f"redistribution is a median {100 * moved.median():.0f}% of the end-to-end time."
        )
    changed, points = [], 0
    for (shape, dtype, P, name), g in by_layouts(ok.groupby(["shape", "dtype", "P", "layouts_in"])):
        if name == NATIVE or g["algo"].nunique() < 2:
            continue
        points += 1
        total = g.sort_values("seconds").iloc[0]["algo"]
        kernel = g.sort_values("multiply_seconds").iloc[0]["algo"]
        if total != kernel:
            changed.append(f"{shape} {dtype} P={int(P)} {name}: {kernel} -> {total}")
    if points:
        lines.append(
            f"Fastest kernel and fastest end to end differ at {len(changed)} of {points} points "
            "with layouts other than native"
            + (
                ": " + "; ".join(changed[:6]) + ("; ..." if len(changed) > 6 else "") + "."
                if changed
                else "."
            )  # fmt: skip
        )
    return lines


HEADERS = [
    "algorithm",
    "P",
    "layouts",
    "kernel [s]",
    "end to end [s]",
    "end to end / kernel",
    "in [s]",
    "out [s]",
    "redistributed per rank, max [MiB]",
    "relabelling saved [MiB]",
    "predicted end to end [s]",
    "predicted kernel [s]",
]


def table_row(x) -> list[str]:
    return [
        x["algo"],
        str(int(x["P"])),
        x["layouts_in"],
        _fmt(x["multiply_seconds"]),
        _fmt(x["seconds"]),
        f"{_ratio(x):.2f}",
        _fmt(x["redistribute_in_seconds"]),
        _fmt(x["redistribute_out_seconds"]),
        _mib(x["redistribute_bytes_per_rank_max"]),
        _mib(x["relabel_bytes_saved"]),
        _fmt(x["predicted_seconds"]),
        _fmt(x["predicted_multiply_seconds"]),
    ]


def section(r) -> None:
    """The section (``r`` a report_sections.Report): per (shape, dtype) the figure of kernel and
    end-to-end time against P, the stacked phase bars and the table."""
    ok = r.ok
    if not has_layouts(ok):
        return
    r.doc.h(2, "Kernel and end to end")
    r.doc.p(
        "A run from layouts other than native redistributes A and B from them into the "
        "algorithm's own layouts, multiplies, and redistributes C back out; each phase is timed "
        "(median over repetitions). *Kernel* is the multiplication alone, what a run from native "
        "layouts times; *end to end* is the whole, what a user whose matrices live in those "
        "layouts pays. Where a shape ran at several P, a figure sets the two side by side "
        "against P (solid: end to end, dashed: kernel; one panel per layouts); the bars stack "
        "each configuration's three "
        "phases (black tick: the end-to-end median, red cross: the model's prediction of it). "
        "Relabelling lays the algorithm's mesh on the ranks in the order that moves the fewest "
        "bytes; the table gives what it saved."
    )
    for (shape, dtype), g in ok.groupby(["shape", "dtype"]):
        name = f"{shape}_{dtype}"
        if g["P"].nunique() > 1:
            title = f"Kernel and end to end, {shape} {dtype}"
            fig = figures.kernel_and_end_to_end_figure(g, title, r.colours)
            r.figure(fig, f"end_to_end_{name}.png", title)
        for part, rows in _chunks(g, 40):
            title = f"Phases per configuration, {shape} {dtype}" + part
            fig = figures.phase_bars_figure(rows, title)
            r.figure(fig, f"phases_{name}{'_' + slug(part) if part else ''}.png", title)
        order = g.assign(_o=[layout_order(g["layouts_in"]).index(v)
                             for v in g["layouts_in"]])  # fmt: skip
        r.doc.table(
            HEADERS,
            [table_row(x) for _, x in order.sort_values(["algo", "P", "_o"]).iterrows()],
        )


def _chunks(g, most: int):
    """The configurations of ``g``: in one figure up to ``most`` bars, else a figure per P."""
    if len(g) <= most:
        yield "", g
        return
    for P, part in g.groupby("P"):
        yield f", P={int(P)}", part
