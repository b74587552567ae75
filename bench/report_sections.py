"""The sections of `distmm report`, each reading the results table and adding its text, tables
and figures to the document: overview, reading, scaling, model, traced phases, communication,
timelines and layouts (end to end: report_end_to_end.py; all runs: report_runs.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layouts.endpoints import NATIVE

from . import figures
from .document import Doc
from .metadata import settings_values
from .report_stats import by_layouts, group_keys, has_layouts, median_text, verdict
from .spans import phase_summary, spans_table
from .units import format_bytes


@dataclass(frozen=True)
class Report:
    df: object  # the whole table (pandas DataFrame, bench.record.read_frame)
    ok: object  # its successful runs
    results: Path  # the table's file
    out: Path  # the report's directory
    colours: dict  # algorithm -> colour
    doc: Doc

    def figure(self, fig, name: str, alt: str) -> None:
        self.doc.img(figures.save(fig, self.out, name), alt)


def _fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.{digits - 1}e}"
        return f"{v:.{digits}g}"
    return str(v)


def _mib(b) -> str:
    return format_bytes(b, "MiB", ".3g", label=False)


def _wins(rows: list, column: int) -> list[tuple[str, int]]:
    """(algorithm, how many rows name it in ``column``), most first."""
    count: dict[str, int] = {}
    for r in rows:
        name = r[column].strip("*")
        count[name] = count.get(name, 0) + 1
    return sorted(count.items(), key=lambda kv: -kv[1])


def overview(r: Report) -> None:
    df, first = r.df, r.df.iloc[0]
    machine = ", ".join(
        " ".join(str(first[c]).split())
        for c in ("host", "mpi_library")
        if c in df and isinstance(first[c], str)
    )
    cores = (
        f", {int(first['cores'])} cores"
        if "cores" in df and first["cores"] == first["cores"]
        else ""
    )
    commit = (
        f", commit `{first['git_commit']}`"
        if "git_commit" in df and isinstance(first["git_commit"], str)
        else ""
    )
    counts = df["status"].value_counts().to_dict()
    r.doc.p(
        f"{len(df)} runs from `{r.results}` "
        f"({', '.join(f'{v} {k}' for k, v in counts.items())}) on {machine}{cores}{commit}. "
        f"Times are the median of each run's repetitions, barrier to barrier, with the median's "
        f"95% interval from order statistics (binomial method) where the table keeps every "
        f"repetition (with fewer than 6 the interval is min-max and covers less); GFLOP/s counts "
        f"2 M K N flops.{_settings_text(df)}"
    )


def _settings_text(df) -> str:
    """The timing settings the runs ran with (bench.metadata.settings), where the table has
    them: one list where all ran alike, else each variable with its values ("unset": some runs
    ran without it)."""
    if "settings" not in df:
        return ""
    cells = [c for c in df["settings"] if isinstance(c, str) and c.strip()]
    if not cells:
        return ""
    found = settings_values(cells)
    if not found:
        return " Settings: none."
    text = ", ".join(f"`{k}={'|'.join(sorted(v))}`" for k, v in sorted(found.items()))
    alike = len(set(cells)) == 1
    return f" Settings{'' if alike else ' (they differ between runs)'}: {text}."


def reading(r: Report, extra: list[str] = ()):
    """The generated reading (with ``extra`` lines) and the fastest algorithm per point, end to
    end where the table has layouts; returns the runs with a prediction (for the model section)
    and the least-data rows (for communication)."""
    ok = r.ok
    lines, fastest_rows, error_rows, data_rows, ties = [], [], [], [], []
    layouts = has_layouts(ok)
    groups = ok.groupby(group_keys(ok, ["shape", "dtype", "P"]))
    for key, g in by_layouts(groups) if layouts else groups:
        shape, dtype, P = key[:3]
        at = [key[3]] if layouts else []  # the layouts column
        g = g.sort_values("seconds")
        best = g.iloc[0]
        separate, runner = verdict(best, g.iloc[1]) if len(g) > 1 else (True, "only one algorithm")
        if not separate:
            ties.append(f"{shape} {dtype} P={int(P)}{''.join(f' {a}' for a in at)}: {runner}")
        fastest_rows.append(
            [shape, dtype, int(P), *at]
            + [
                f"**{best['algo']}**" if separate else f"{best['algo']} or {g.iloc[1]['algo']}",
                median_text(best, _fmt),
                *([_fmt(best["multiply_seconds"])] if layouts else []),
                _fmt(best["gflops"], 3),
                runner,
            ]
        )
    # the multiplication's bytes do not depend on the layouts: one run per algorithm and point
    for (shape, dtype, P), g in ok.groupby(["shape", "dtype", "P"]):
        g = g.sort_values("layouts_in", key=lambda s: s != NATIVE).drop_duplicates("algo")
        least = g.sort_values("bytes_sent").iloc[0]
        tied = sorted(g.loc[g["bytes_sent"] == least["bytes_sent"], "algo"])
        data_rows.append(
            [
                shape,
                dtype,
                int(P),
                least["algo"] if len(tied) == 1 else f"{', '.join(tied)} (tie)",
                _mib(least["bytes_sent"]),
                _mib(g["bytes_sent"].max()),
            ]
        )
    col = 4 if layouts else 3  # the fastest algorithm's column
    won = [row for row in fastest_rows if row[col].startswith("**")]
    if fastest_rows:
        lines.append(
            "Fastest (told apart from the next by a two-sided Mann-Whitney U test at 5%"
            + ("; end to end" if layouts else "")
            + "): "
            + (
                ", ".join(
                    f"**{a}** at {n} of {len(fastest_rows)} "
                    f"(shape, dtype, P{', layouts' if layouts else ''}) points"
                    for a, n in _wins(won, col)
                )
                or "no algorithm at any point"
            )
            + "."
        )
    if ties:
        lines.append(
            f"No winner at {len(ties)} of {len(fastest_rows)} points: "
            + "; ".join(ties[:8])
            + ("; ..." if len(ties) > 8 else "")
            + "."
        )
    pred = ok[ok["predicted_seconds"].notna() & (ok["predicted_seconds"] > 0)].copy()
    if len(pred):
        pred["err"] = (pred["seconds"] / pred["predicted_seconds"] - 1).abs()
        pred["ratio"] = pred["seconds"] / pred["predicted_seconds"]
        for algo, g in pred.groupby("algo"):
            error_rows.append(
                [
                    algo,
                    len(g),
                    f"{100 * g['err'].median():.0f}%",
                    f"{g['ratio'].min():.2f}",
                    f"{g['ratio'].max():.2f}",
                ]
            )
        by = pred.groupby("algo")["err"].median().sort_values()
        lines.append(
            f"Model error (median |predicted/measured - 1|): smallest for "
            f"**{by.index[0]}** ({100 * by.iloc[0]:.0f}%), largest for "
            f"**{by.index[-1]}** ({100 * by.iloc[-1]:.0f}%); "
            f"{100 * pred['err'].median():.0f}% over all {len(pred)} runs."
        )
    if data_rows:
        alone = [row for row in data_rows if not row[3].endswith("(tie)")]
        tied = len(data_rows) - len(alone)
        lines.append(
            "Least data moved: "
            + ", ".join(
                [f"**{a}** at {n} of {len(data_rows)} points" for a, n in _wins(alone, 3)]
                + ([f"a tie at {tied} of {len(data_rows)} points"] if tied else [])
            )
            + (" (P = 1 moves nothing)." if any(row[2] == 1 for row in data_rows) else ".")
        )
    lines += extra
    bad = r.df[r.df["status"] != "ok"]
    if len(bad):
        lines.append(
            f"{len(bad)} run(s) did not succeed: "
            + "; ".join(
                f"{b['algo']} P={int(b['P'])} {b['shape']}: {b['status']}"
                + (f" ({b['error']})" if isinstance(b.get("error"), str) else "")
                for _, b in bad.head(8).iterrows()
            )
            + ("; ..." if len(bad) > 8 else "")
            + "."
        )
    r.doc.h(2, "Reading")
    r.doc.ul(lines or ["No successful runs to read."])
    r.doc.h(3, "Fastest algorithm per point")
    time = "end to end [s] [95% CI]" if layouts else "time [s] [95% CI]"
    heads = ["shape", "dtype", "P"] + (["layouts"] if layouts else [])
    time = [time, "its kernel [s]"] if layouts else [time]
    r.doc.table(heads + ["fastest", *time, "GFLOP/s", "next"], fastest_rows)
    return pred, error_rows, data_rows


def scaling(r: Report) -> None:
    for kind in ("strong", "weak"):
        part = r.ok[r.ok["scaling"] == kind]
        if part.empty:
            continue
        r.doc.h(2, f"{kind.capitalize()} scaling")
        base = ["dtype"] if kind == "weak" else ["shape", "dtype"]
        keys = group_keys(part, base)
        groups = part.groupby(keys)
        for key, g in by_layouts(groups) if len(keys) > len(base) else groups:
            key = key if isinstance(key, tuple) else (key,)
            if g["P"].nunique() < 2:
                continue
            label = " ".join(str(k) for k in key[: len(base)])
            if len(keys) > len(base):  # the layouts, where the table has them
                label += f", layouts {key[-1]}"
            if kind == "weak":
                shapes = ", ".join(
                    f"P={int(p)}: {s}"
                    for p, s in g.drop_duplicates("P").sort_values("P")[["P", "shape"]].values
                )
                title = f"Weak scaling (constant work per rank), {label}\n{shapes}"
            else:
                title = f"Strong scaling, {label}"
            name = f"{kind}_{'_'.join(figures.slug(k) for k in key)}.png"
            r.figure(figures.scaling_figure(g, title, r.colours, kind == "weak"), name, title)
            rows = [
                [
                    x["algo"],
                    int(x["P"]),
                    x["shape"],
                    median_text(x, _fmt),
                    _fmt(x["gflops"], 3),
                    _fmt(x.get("compute_ratio"), 3),
                    _mib(x["bytes_sent"]),
                    _fmt(x["predicted_seconds"]),
                ]
                for _, x in g.sort_values(["algo", "P"]).iterrows()
            ]
            r.doc.table(
                [
                    "algorithm",
                    "P",
                    "shape",
                    "time [s] [95% CI]",
                    "GFLOP/s",
                    "compute ratio",
                    "sent [MiB]",
                    "predicted [s]",
                ],
                rows,
            )


def model(r: Report, pred, error_rows: list) -> None:
    if len(pred):
        r.doc.h(2, "Cost model: predicted vs measured")
        r.figure(
            figures.predicted_figure(pred, r.colours),
            "predicted_vs_measured.png",
            "predicted vs measured",
        )
        r.doc.table(
            ["algorithm", "runs", "median |error|", "min meas/pred", "max meas/pred"], error_rows
        )


def traced(r: Report) -> dict:
    """Per-phase bars of the traced runs; returns their span tables by (algo, P, shape)."""
    ok = r.ok
    runs = (
        ok[ok["trace_dir"].notna() & (ok["trace_dir"].astype(str) != "")]
        if "trace_dir" in ok
        else ok.iloc[0:0]
    )
    items, tables = [], {}
    for _, x in runs.sort_values(["algo", "P"]).iterrows():
        tdir = r.results.parent / str(x["trace_dir"])
        if not (tdir / "run.json").exists():
            continue
        try:
            run = json.loads((tdir / "run.json").read_text())
            table = spans_table(tdir)
        except (OSError, ValueError):
            continue
        if table.empty:
            continue
        tables[(x["algo"], int(x["P"]), x["shape"])] = table
        if "predicted_phases" in run:
            summary = phase_summary(table, run)
            meas = {k: v["measured"] for k, v in summary.items() if k != "total"}
            items.append(
                (f"{x['algo']}\nP={int(x['P'])}", run["predicted_phases"], meas, run["seconds"])
            )
    if items:
        r.doc.p(
            "Per phase, for each traced run: the model's time (left bar, hatched) against "
            "the measured critical path (right bar: per repetition the slowest rank's total "
            "in that phase, median over repetitions; waits count toward their operation). "
            "The black line is the timed total; phases overlap, so the bars need not add to "
            "it."
        )
        r.figure(figures.phases_figure(items[:18]), "phases.png", "per-phase predicted vs measured")
    return tables


def communication(r: Report, data_rows: list) -> None:
    comm = r.ok[(r.ok["P"] > 1) & r.ok["bytes_sent_per_rank_max"].notna()]
    comm = comm.sort_values("layouts_in", key=lambda s: s != NATIVE)  # one run per point
    comm = comm.drop_duplicates(["algo", "P", "shape", "dtype"])
    if len(comm):
        r.doc.h(2, "Communication against the lower bounds")
        r.doc.p(
            "Bytes sent by the busiest rank in one multiplication, with the 2D (n²/√P) and "
            "3D (n²/P^(2/3)) lower bounds in words times the word size, n the cube root of "
            "M K N."
        )
        for (shape, dtype), g in comm.groupby(["shape", "dtype"]):
            fig = figures.bytes_figure(g, shape, np.dtype(dtype).itemsize, r.colours)
            r.figure(fig, f"comm_{shape}_{dtype}.png", f"communication {shape}")
        r.doc.table(
            ["shape", "dtype", "P", "least data", "its total [MiB]", "most [MiB]"], data_rows
        )


def timelines(r: Report, tables: dict) -> None:
    if tables:
        r.doc.h(2, "Timelines")
        r.doc.p(
            "One traced run per algorithm (the largest P), first timed repetition: each "
            "rank's spans coloured by phase."
        )
        chosen = {}
        for (algo, P, shape), t in tables.items():
            if algo not in chosen or P > chosen[algo][0]:
                chosen[algo] = (P, shape, t)
        for algo, (P, shape, t) in sorted(chosen.items()):
            r.figure(
                figures.gantt_figure(t, f"{algo}: P = {P}, {shape}"),
                f"timeline_{algo}.png",
                f"timeline {algo}",
            )


def layouts(r: Report) -> None:
    df, ok = r.df, r.ok
    r.doc.h(2, "Layouts")
    r.doc.p(
        "How each algorithm places A, B and C on its ranks, drawn on a small shape at the "
        "largest P it ran at (the same pictures as `distmm layout --plot`)."
    )
    rows = []
    for algo in sorted(df["algo"].unique()):
        Ps = sorted(int(p) for p in ok[ok["algo"] == algo]["P"].unique()) or sorted(
            int(p) for p in df[df["algo"] == algo]["P"].unique()
        )
        P = max((p for p in Ps if p <= 16), default=None)
        fig = figures.layout_figure(algo, P, r.out) if P else None
        if fig is not None:
            r.figure(fig, f"layout_{algo}.png", f"layouts {algo}")
        runs = df[df["algo"] == algo]
        if "layouts" in runs and runs["layouts"].notna().any():
            lay = json.loads(runs["layouts"].dropna().iloc[-1])
            rows += [[algo, name, f"`{text}`"] for name, text in lay.items()]
    r.doc.table(["algorithm", "matrix", "layout (largest run)"], rows)
