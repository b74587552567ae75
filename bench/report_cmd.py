"""`distmm report RESULTS.csv -o DIR`: plots, tables and a short reading of a sweep's results.

Writes into DIR: PNG plots (matplotlib, headless), ``report.md`` embedding them with tables of the
numbers, and ``report.html``, the same page self-contained (the PNGs inlined as data URIs).

Plots: strong scaling (time, GFLOP/s, parallel efficiency against P, one figure per shape), weak
scaling (the same for a weak sweep), predicted against measured time (log-log, y = x), per-phase
predicted and measured time side by side for traced runs, bytes sent per rank against the lower
bounds n^2/sqrt(P) and n^2/P^(2/3) (n the cube root of M K N), a per-rank timeline (Gantt) of one
traced run per algorithm, and each algorithm's A, B and C layouts drawn on a small shape.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
import os
from pathlib import Path

from .cli import UsageError

PHASE_COLOURS = {}  # phase -> colour, shared by every plot of one report
LAYOUT_SHAPES = [(8, 8, 8), (12, 12, 12), (16, 16, 16), (24, 24, 24)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", metavar="RESULTS.csv", help="a table written by distmm sweep")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="directory for the report")


# -- helpers ----------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _algo_colours(algos) -> dict:
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {a: cmap(i % 10) for i, a in enumerate(sorted(algos))}


def _phase_colour(phase: str):
    if phase not in PHASE_COLOURS:
        cmap = _plt().get_cmap("Set2" if len(PHASE_COLOURS) < 8 else "tab20")
        PHASE_COLOURS[phase] = cmap(len(PHASE_COLOURS) % (8 if len(PHASE_COLOURS) < 8 else 20))
    return PHASE_COLOURS[phase]


def _shape(row) -> str:
    return f"{int(row['M'])}x{int(row['K'])}x{int(row['N'])}"


def _save(fig, out: Path, name: str) -> str:
    fig.savefig(out / name, dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return name


def _fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.{digits - 1}e}"
        return f"{v:.{digits}g}"
    return str(v)


def _mib(b) -> str:
    return "-" if b is None or (isinstance(b, float) and math.isnan(b)) else f"{b / 2**20:.3g}"


def _log_y(ax, axes="y") -> None:
    """Log axes labelled 1, 2, 5, 10, ... in plain numbers (readable over a short range)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis in ([ax.yaxis] if axes == "y" else [ax.xaxis, ax.yaxis]):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
        lo, hi = axis.get_view_interval()
        if lo > 0 and hi / lo < 6:  # less than a decade: explicit ticks at 1, 1.5, 2, 3, 5, 7
            e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            ticks = [m * 10.0**e for e in range(e0, e1 + 1) for m in (1, 1.5, 2, 3, 5, 7)
                     if lo <= m * 10.0**e <= hi]
            axis.set_ticks(ticks)


def _p_axis(ax, Ps) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(Ps))
    ax.set_xticklabels([str(p) for p in sorted(Ps)])
    ax.minorticks_off()
    ax.set_xlabel("ranks P")
    ax.grid(True, alpha=0.3)


# -- plots ------------------------------------------------------------------------------------
def scaling_figure(df, title: str, colours: dict, weak: bool):
    """Three panels: time, GFLOP/s, efficiency against P, one line per algorithm."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    Ps = sorted(df["P"].unique())
    for algo, g in df.groupby("algo"):
        g = g.sort_values("P")
        c = colours[algo]
        axes[0].errorbar(g["P"], g["seconds"], yerr=[g["seconds"] - g["seconds_min"],
                         g["seconds_max"] - g["seconds"]], marker="o", color=c, label=algo,
                         capsize=3)
        axes[1].plot(g["P"], g["gflops"], marker="o", color=c, label=algo)
        base = g.iloc[0]
        if weak:  # work rate per rank against the smallest P
            rate = g["gflops"] / g["P"]
            eff = rate / (base["gflops"] / base["P"])
        else:
            eff = base["seconds"] * base["P"] / (g["seconds"] * g["P"])
        axes[2].plot(g["P"], eff, marker="o", color=c, label=f"{algo} (vs P={int(base['P'])})")
    axes[0].set_yscale("log")
    _log_y(axes[0])
    axes[0].set_ylabel("time per multiplication [s] (median, min-max bars)")
    axes[0].set_title("time")
    axes[1].set_ylabel("GFLOP/s (all ranks)")
    axes[1].set_title("throughput")
    axes[2].set_ylabel("weak efficiency (GFLOP/s per rank, relative)" if weak
                       else "parallel efficiency T(P0) P0 / (T(P) P)")
    axes[2].axhline(1.0, color="0.5", linestyle=":", linewidth=1)
    axes[2].set_title("efficiency (1 = perfect)")
    axes[2].set_ylim(bottom=0)
    for ax in axes:
        _p_axis(ax, Ps)
    axes[1].legend(fontsize=8, loc="best")
    axes[2].legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def predicted_figure(df, colours):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    for algo, g in df.groupby("algo"):
        ax.scatter(g["predicted_seconds"] * 1e3, g["seconds"] * 1e3, color=colours[algo], label=algo, s=40,
                   edgecolor="k", linewidth=0.5, zorder=3)
    vals = [v * 1e3 for v in list(df["predicted_seconds"]) + list(df["seconds"])]
    lo, hi = min(vals) / 1.6, max(vals) * 1.6
    ax.plot([lo, hi], [lo, hi], color="k", linewidth=1, label="y = x (model exact)")
    ax.fill_between([lo, hi], [lo / 2, hi / 2], [lo * 2, hi * 2], color="0.85", alpha=0.6,
                    label="within 2x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    _log_y(ax, "xy")
    ax.set_xlabel("predicted time [ms] (cost model)")
    ax.set_ylabel("measured time [ms] (median)")
    ax.set_title("Predicted vs measured time per run")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def phases_figure(items):
    """items: [(label, {phase: predicted}, {phase: measured}, measured_total)]."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(7, 1.25 * len(items) + 2), 5))
    width = 0.38
    seen = set()
    for i, (label, pred, meas, total) in enumerate(items):
        for offset, parts, hatch in ((-width / 2, pred, "//"), (width / 2, meas, None)):
            bottom = 0.0
            for phase in sorted(parts):
                v = parts[phase] * 1e3
                if v <= 0:
                    continue
                ax.bar(i + offset, v, width, bottom=bottom, color=_phase_colour(phase),
                       hatch=hatch, edgecolor="0.3", linewidth=0.5,
                       label=phase if phase not in seen else None)
                seen.add(phase)
                bottom += v
        ax.plot([i + width / 2 - width / 2, i + width], [total * 1e3] * 2, color="k",
                linewidth=2, label="measured total (timed median)" if i == 0 else None)
    ax.set_xticks(range(len(items)))
    ax.set_xticklabels([it[0] for it in items], fontsize=8)
    ax.set_ylabel("time [ms] (critical path per phase)")
    ax.set_title("Per phase: predicted (left, hatched) vs measured (right), traced runs")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def bytes_figure(df, shape: str, itemsize: int, colours):
    plt = _plt()
    M, K, N = (int(v) for v in shape.split("x"))
    n = (M * K * N) ** (1 / 3)
    fig, ax = plt.subplots(figsize=(7, 5))
    Ps = sorted(df["P"].unique())
    markers = "osD^vP*Xh<>"
    algos = sorted(df["algo"].unique())
    for i, (algo, g) in enumerate(df.groupby("algo")):
        g = g.sort_values("P")
        # a small sideways nudge per algorithm, so equal values do not hide each other
        nudge = 1.0 + 0.01 * (algos.index(algo) - (len(algos) - 1) / 2)
        ax.plot(g["P"] * nudge, g["bytes_sent_per_rank_max"] / 2**20, marker=markers[i % 11],
                color=colours[algo], label=algo, alpha=0.85)
    grid = [p for p in Ps]
    ax.plot(grid, [n * n / math.sqrt(p) * itemsize / 2**20 for p in grid], "k--",
            label="2D bound n²/√P words")
    ax.plot(grid, [n * n / p ** (2 / 3) * itemsize / 2**20 for p in grid], "k:",
            label="3D bound n²/P^(2/3) words")
    ax.set_yscale("log")
    _log_y(ax)
    _p_axis(ax, Ps)
    ax.set_ylabel("bytes sent by the busiest rank [MiB]")
    ax.set_title(f"Communication per rank, {shape} ({itemsize}-byte words, n = {n:.0f})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def gantt_figure(table, title: str):
    plt = _plt()
    rep = table["rep"].dropna().min()
    t = table[table["rep"] == rep]
    t0 = t["start"].min()
    ranks = sorted(t["rank"].unique())
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(ranks) + 1.8))
    seen = set()
    for phase, g in t.groupby("phase"):
        for lane, h, off in (("rank", 0.6, -0.3), ("comm", 0.22, 0.32)):
            s = g[g["lane"] == lane]
            for rank, r in s.groupby("rank"):
                bars = [((a - t0) * 1e3, d * 1e3) for a, d in zip(r["start"], r["duration"])]
                ax.broken_barh(bars, (rank + off, h), facecolors=_phase_colour(phase),
                               edgecolor="0.2", linewidth=0.3, alpha=1.0 if lane == "rank" else 0.55,
                               label=phase if phase not in seen else None)
                seen.add(phase)
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"rank {r}" for r in ranks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first span of the repetition [ms]")
    ax.set_title(title + "\n(tall bars: what the rank does; thin bars below: messages in flight)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="phase")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def layout_figure(algo: str, P: int, tmp: Path):
    """A, B and C of `algo` on P ranks for a small shape, drawn by `distmm layout --plot`."""
    from algorithms import get

    from .layout_cmd import plot_layout

    module = get(algo)
    plan = None
    for shape in LAYOUT_SHAPES:
        try:
            plan = module.plan(shape, P)
            break
        except Exception:  # noqa: BLE001 - try the next small shape
            continue
    if plan is None:
        return None
    plt = _plt()
    images = []
    for name in ("A", "B", "C"):
        path = tmp / f".{algo}-{name}.png"
        try:
            plot_layout(getattr(plan, name), str(path))
        except Exception:  # noqa: BLE001 - a layout the plot cannot draw
            return None
        images.append((name, plt.imread(path)))
        path.unlink()
    widths = [img.shape[1] for _, img in images]
    fig, axes = plt.subplots(1, 3, figsize=(sum(widths) / 100, max(i.shape[0] for _, i in images)
                                            / 100 + 0.8), gridspec_kw={"width_ratios": widths})
    M, K, N = plan.shape
    dims = {"A": f"A [{M} x {K}]", "B": f"B [{K} x {N}]", "C": f"C [{M} x {N}]"}
    for ax, (name, img) in zip(axes, images):
        ax.imshow(img)
        ax.set_axis_off()
        ax.set_title(dims[name], fontsize=11)
    grid = "x".join(map(str, plan.grid))
    fig.suptitle(f"{algo}: data layouts on P = {P} (grid {grid}), shape {M}x{K}x{N}; "
                 f"colour = owning rank", fontsize=12)
    fig.tight_layout()
    return fig


# -- document ---------------------------------------------------------------------------------
class Doc:
    def __init__(self):
        self.blocks = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def ul(self, items):
        if items:
            self.blocks.append(("ul", items))

    def img(self, name, alt):
        self.blocks.append(("img", name, alt))

    def table(self, headers, rows):
        if rows:
            self.blocks.append(("table", headers, rows))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "ul":
                out.append("\n".join(f"- {i}" for i in b[1]))
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1]})")
            else:
                _, headers, rows = b
                lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |"
                          for r in rows]
                out.append("\n".join(lines))
        return "\n\n".join(out) + "\n"

    def html(self, out: Path, title: str) -> str:
        e = html.escape
        parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
                 "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;"
                 "padding:0 1em;color:#222}img{max-width:100%;border:1px solid #ddd}"
                 "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
                 "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
                 "th{background:#f0f0f0}code{background:#f4f4f4}</style></head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                parts.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                parts.append(f"<p>{_inline(b[1])}</p>")
            elif b[0] == "ul":
                parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
            elif b[0] == "img":
                data = base64.b64encode((out / b[1]).read_bytes()).decode()
                parts.append(f"<p><img alt='{e(b[2])}' src='data:image/png;base64,{data}'></p>")
            else:
                _, headers, rows = b
                parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers)
                             + "</tr>" + "".join("<tr>" + "".join(f"<td>{_inline(str(c))}</td>"
                                                                  for c in r) + "</tr>"
                                                 for r in rows) + "</table>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _inline(text: str) -> str:
    """Markdown `code` and **bold** to HTML (all this report uses)."""
    import re

    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", t)


# -- main -------------------------------------------------------------------------------------
def load(path: Path):
    import pandas as pd

    if not path.exists():
        raise UsageError(f"{path} does not exist (write one with distmm sweep)")
    try:
        df = pd.read_csv(path, dtype={"key": str, "git_commit": str})
    except Exception as err:  # noqa: BLE001 - pandas raises many kinds
        raise UsageError(f"{path} is not a readable results table ({err})") from None
    missing = {"key", "status", "algo", "P", "M", "K", "N", "dtype", "seconds"} - set(df.columns)
    if missing:
        raise UsageError(f"{path} lacks columns {', '.join(sorted(missing))}: not a sweep table")
    for col in ("predicted_seconds", "bytes_sent_per_rank_max", "gflops", "seconds_min",
                "seconds_max", "bytes_sent"):
        if col not in df:
            df[col] = float("nan")
    df["shape"] = [_shape(r) for _, r in df.iterrows()]
    if "scaling" not in df:
        df["scaling"] = "strong"
    return df


def main(args) -> int:
    import numpy as np

    results = Path(args.results)
    df = load(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    PHASE_COLOURS.clear()
    ok = df[df["status"] == "ok"].copy()
    colours = _algo_colours(df["algo"].unique())
    doc = Doc()
    name = str(df["sweep"].dropna().iloc[0]) if "sweep" in df and df["sweep"].notna().any() \
        else results.stem
    title = f"distmm sweep report: {name}"
    doc.h(1, title)
    first = df.iloc[0]
    machine = ", ".join(" ".join(str(first[c]).split()) for c in ("host", "mpi_library") if c in df and
                        isinstance(first[c], str))
    cores = f", {int(first['cores'])} cores" if "cores" in df and first["cores"] == first["cores"] \
        else ""
    commit = f", commit `{first['git_commit']}`" if "git_commit" in df and \
        isinstance(first["git_commit"], str) else ""
    counts = df["status"].value_counts().to_dict()
    doc.p(f"{len(df)} runs from `{results}` ({', '.join(f'{v} {k}' for k, v in counts.items())})"
          f" on {machine}{cores}{commit}. Times are the median of each run's repetitions, "
          f"barrier to barrier; GFLOP/s counts 2 M K N flops.")

    # The reading, then the plots that support it.
    reading, fastest_rows, error_rows, data_rows = [], [], [], []
    for (shape, dtype, P), g in ok.groupby(["shape", "dtype", "P"]):
        g = g.sort_values("seconds")
        best = g.iloc[0]
        runner = f"{g.iloc[1]['algo']} {g.iloc[1]['seconds'] / best['seconds']:.2f}x slower" \
            if len(g) > 1 else "only one algorithm"
        fastest_rows.append([shape, dtype, int(P), f"**{best['algo']}**",
                             _fmt(best["seconds"]), _fmt(best["gflops"], 3), runner])
        least = g.sort_values("bytes_sent").iloc[0]
        data_rows.append([shape, dtype, int(P), least["algo"], _mib(least["bytes_sent"]),
                          _mib(g["bytes_sent"].max())])
    if fastest_rows:
        wins = {}
        for r in fastest_rows:
            wins[r[3].strip("*")] = wins.get(r[3].strip("*"), 0) + 1
        order = sorted(wins.items(), key=lambda kv: -kv[1])
        reading.append("Fastest: " + ", ".join(f"**{a}** at {n} of {len(fastest_rows)} "
                                                f"(shape, dtype, P) points" for a, n in order)
                       + ".")
    pred = ok[ok["predicted_seconds"].notna() & (ok["predicted_seconds"] > 0)].copy()
    if len(pred):
        pred["err"] = (pred["seconds"] / pred["predicted_seconds"] - 1).abs()
        pred["ratio"] = pred["seconds"] / pred["predicted_seconds"]
        for algo, g in pred.groupby("algo"):
            error_rows.append([algo, len(g), f"{100 * g['err'].median():.0f}%",
                               f"{g['ratio'].min():.2f}", f"{g['ratio'].max():.2f}"])
        by = pred.groupby("algo")["err"].median().sort_values()
        reading.append(f"Model error (median |predicted/measured - 1|): smallest for "
                       f"**{by.index[0]}** ({100 * by.iloc[0]:.0f}%), largest for "
                       f"**{by.index[-1]}** ({100 * by.iloc[-1]:.0f}%); "
                       f"{100 * pred['err'].median():.0f}% over all {len(pred)} runs.")
    if data_rows:
        least = {}
        for r in data_rows:
            least[r[3]] = least.get(r[3], 0) + 1
        order = sorted(least.items(), key=lambda kv: -kv[1])
        reading.append("Least data moved: " + ", ".join(f"**{a}** at {n} of {len(data_rows)} "
                                                         f"points" for a, n in order)
                       + " (P = 1 moves nothing).")
    bad = df[df["status"] != "ok"]
    if len(bad):
        reading.append(f"{len(bad)} run(s) did not succeed: " + "; ".join(
            f"{r['algo']} P={int(r['P'])} {r['shape']}: {r['status']}"
            + (f" ({r['error']})" if isinstance(r.get("error"), str) else "")
            for _, r in bad.head(8).iterrows()) + ("; ..." if len(bad) > 8 else "") + ".")
    doc.h(2, "Reading")
    doc.ul(reading or ["No successful runs to read."])
    doc.h(3, "Fastest algorithm per point")
    doc.table(["shape", "dtype", "P", "fastest", "time [s]", "GFLOP/s", "next"], fastest_rows)

    # (a), (b) scaling
    for scaling in ("strong", "weak"):
        part = ok[ok["scaling"] == scaling]
        if part.empty:
            continue
        doc.h(2, f"{scaling.capitalize()} scaling")
        groups = part.groupby(["dtype"] if scaling == "weak" else ["shape", "dtype"])
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            if g["P"].nunique() < 2:
                continue
            label = " ".join(str(k) for k in key)
            if scaling == "weak":
                shapes = ", ".join(f"P={int(p)}: {s}" for p, s in
                                   g.drop_duplicates("P").sort_values("P")[["P", "shape"]].values)
                ttl = f"Weak scaling (constant work per rank), {label}\n{shapes}"
            else:
                ttl = f"Strong scaling, {label}"
            fname = f"{scaling}_{'_'.join(str(k) for k in key)}.png"
            doc.img(_save(scaling_figure(g, ttl, colours, scaling == "weak"), out, fname), ttl)
            rows = [[r["algo"], int(r["P"]), r["shape"], _fmt(r["seconds"]), _fmt(r["gflops"], 3),
                     _fmt(r.get("compute_ratio"), 3), _mib(r["bytes_sent"]),
                     _fmt(r["predicted_seconds"])]
                    for _, r in g.sort_values(["algo", "P"]).iterrows()]
            doc.table(["algorithm", "P", "shape", "time [s]", "GFLOP/s", "compute ratio",
                       "sent [MiB]", "predicted [s]"], rows)

    # (c) model
    if len(pred):
        doc.h(2, "Cost model: predicted vs measured")
        doc.img(_save(predicted_figure(pred, colours), out, "predicted_vs_measured.png"),
                "predicted vs measured")
        doc.table(["algorithm", "runs", "median |error|", "min meas/pred", "max meas/pred"],
                  error_rows)
    items = []
    traced = ok[ok["trace_dir"].notna() & (ok["trace_dir"].astype(str) != "")] \
        if "trace_dir" in ok else ok.iloc[0:0]
    tables = {}
    from .analyze_cmd import phase_summary, spans_table

    for _, r in traced.sort_values(["algo", "P"]).iterrows():
        tdir = results.parent / str(r["trace_dir"])
        if not (tdir / "run.json").exists():
            continue
        try:
            run = json.loads((tdir / "run.json").read_text())
            table = spans_table(tdir)
        except (OSError, ValueError):
            continue
        if table.empty:
            continue
        tables[(r["algo"], int(r["P"]), r["shape"])] = table
        if "predicted_phases" in run:
            summary = phase_summary(table, run)
            meas = {k: v["measured"] for k, v in summary.items() if k != "total"}
            items.append((f"{r['algo']}\nP={int(r['P'])}", run["predicted_phases"], meas,
                          run["seconds"]))
    if items:
        items = items[:18]
        doc.p("Per phase, for each traced run: the model's time (left bar, hatched) against the "
              "measured critical path (right bar: per repetition the slowest rank's total in "
              "that phase, median over repetitions; waits count toward their operation). The "
              "black line is the timed total; phases overlap, so the bars need not add to it.")
        doc.img(_save(phases_figure(items), out, "phases.png"), "per-phase predicted vs measured")

    # (d) communication
    comm = ok[(ok["P"] > 1) & ok["bytes_sent_per_rank_max"].notna()]
    if len(comm):
        doc.h(2, "Communication against the lower bounds")
        doc.p("Bytes sent by the busiest rank in one multiplication, with the 2D (n²/√P) and 3D "
              "(n²/P^(2/3)) lower bounds in words times the word size, n the cube root of M K N.")
        for (shape, dtype), g in comm.groupby(["shape", "dtype"]):
            fname = f"comm_{shape}_{dtype}.png"
            doc.img(_save(bytes_figure(g, shape, np.dtype(dtype).itemsize, colours), out, fname),
                    f"communication {shape}")
        doc.table(["shape", "dtype", "P", "least data", "its total [MiB]", "most [MiB]"],
                  data_rows)

    # (e) timelines
    if tables:
        doc.h(2, "Timelines")
        doc.p("One traced run per algorithm (the largest P), first timed repetition: each rank's "
              "spans coloured by phase.")
        chosen = {}
        for (algo, P, shape), t in tables.items():
            if algo not in chosen or P > chosen[algo][0]:
                chosen[algo] = (P, shape, t)
        for algo, (P, shape, t) in sorted(chosen.items()):
            doc.img(_save(gantt_figure(t, f"{algo}: P = {P}, {shape}"), out,
                          f"timeline_{algo}.png"), f"timeline {algo}")

    # (f) layouts
    doc.h(2, "Layouts")
    doc.p("How each algorithm places A, B and C on its ranks, drawn on a small shape at the "
          "largest P it ran at (the same pictures as `distmm layout --plot`).")
    layout_rows = []
    for algo in sorted(df["algo"].unique()):
        Ps = sorted(int(p) for p in ok[ok["algo"] == algo]["P"].unique()) or \
            sorted(int(p) for p in df[df["algo"] == algo]["P"].unique())
        P = max((p for p in Ps if p <= 16), default=None)
        fig = layout_figure(algo, P, out) if P else None
        if fig is not None:
            doc.img(_save(fig, out, f"layout_{algo}.png"), f"layouts {algo}")
        rows = df[df["algo"] == algo]
        if "layouts" in rows and rows["layouts"].notna().any():
            lay = json.loads(rows["layouts"].dropna().iloc[-1])
            layout_rows += [[algo, name, f"`{text}`"] for name, text in lay.items()]
    doc.table(["algorithm", "matrix", "layout (largest run)"], layout_rows)

    doc.h(2, "All runs")
    doc.table(["algorithm", "P", "shape", "dtype", "status", "time [s]", "GFLOP/s",
               "predicted [s]", "sent [MiB]", "peak mem [MiB]", "verified"],
              [[r["algo"], int(r["P"]), r["shape"], r["dtype"], r["status"], _fmt(r["seconds"]),
                _fmt(r["gflops"], 3), _fmt(r["predicted_seconds"]), _mib(r["bytes_sent"]),
                _mib(r.get("peak_memory_bytes")), r.get("verified", "")]
               for _, r in df.sort_values(["algo", "shape", "P"]).iterrows()])

    md, page = out / "report.md", out / "report.html"
    for path, text in ((md, doc.markdown()), (page, doc.html(out, title))):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    print(page)
    return 0
