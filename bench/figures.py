"""The report's figures (matplotlib, headless): scaling, predicted against measured time,
per-phase bars, bytes against the lower bounds, per-rank timelines and layout pictures. Colours
are shared by every figure of one report: one per algorithm, one per phase."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from algorithms import get

from .layout_plot import plot_layout
from .report_stats import core_counts

LAYOUT_SHAPES = [(8, 8, 8), (12, 12, 12), (16, 16, 16), (24, 24, 24)]
PHASE_COLOURS = {}  # phase -> colour, shared by every plot of one report


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def algo_colours(algos) -> dict:
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return {a: cmap(i % 10) for i, a in enumerate(sorted(algos))}


def _phase_colour(phase: str):
    if phase not in PHASE_COLOURS:
        cmap = _plt().get_cmap("Set2" if len(PHASE_COLOURS) < 8 else "tab20")
        PHASE_COLOURS[phase] = cmap(len(PHASE_COLOURS) % (8 if len(PHASE_COLOURS) < 8 else 20))
    return PHASE_COLOURS[phase]


def slug(text) -> str:
    """``text`` as part of a file name: runs of anything but letters, digits, '.' and '-' become
    one '-' (a layout such as ``A=cols,B=cols,C=block`` or ``((4_r, 8), ...)@r=4``)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", str(text)).strip("-")[:60]


def save(fig, out: Path, name: str) -> str:
    fig.savefig(out / name, dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return name


def _log_y(ax, axes="y") -> None:
    """Log axes labelled 1, 2, 5, 10, ... in plain numbers (readable over a short range)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis in [ax.yaxis] if axes == "y" else [ax.xaxis, ax.yaxis]:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
        lo, hi = axis.get_view_interval()
        if lo > 0 and hi / lo < 6:  # less than a decade: explicit ticks at 1, 1.5, 2, 3, 5, 7
            e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            ticks = [
                m * 10.0**e
                for e in range(e0, e1 + 1)
                for m in (1, 1.5, 2, 3, 5, 7)
                if lo <= m * 10.0**e <= hi
            ]
            axis.set_ticks(ticks)


def _p_axis(ax, Ps) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(Ps))
    ax.set_xticklabels([str(p) for p in sorted(Ps)])
    ax.minorticks_off()
    ax.set_xlabel("ranks P")
    ax.grid(True, alpha=0.3)


def scaling_figure(df, title: str, colours: dict, weak: bool):
    """Three panels: time, GFLOP/s, efficiency against P, one line per algorithm. Efficiencies
    count the cores the ranks had, c(P) = min(P, cores x nodes); points with more ranks than
    cores (oversubscribed) are hollow."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    Ps = sorted(df["P"].unique())
    any_over = False
    for algo, g in df.groupby("algo"):
        g = g.sort_values("P")
        c = colours[algo]
        used = np.array(core_counts(g), dtype=float)
        over = g["P"].to_numpy() > used
        any_over |= bool(over.any())
        axes[0].errorbar(
            g["P"],
            g["seconds"],
            yerr=[g["seconds"] - g["seconds_min"], g["seconds_max"] - g["seconds"]],
            color=c,
            label=algo,
            capsize=3,
        )
        axes[1].plot(g["P"], g["gflops"], color=c, label=algo)
        base, base_used = g.iloc[0], used[0]
        if weak:  # work rate per core used, against the smallest P
            eff = (g["gflops"] / used) / (base["gflops"] / base_used)
        else:
            eff = base["seconds"] * base_used / (g["seconds"] * used)
        axes[2].plot(g["P"], eff, color=c, label=f"{algo} (vs P={int(base['P'])})")
        for ax, y in ((axes[0], g["seconds"]), (axes[1], g["gflops"]), (axes[2], eff)):
            y = np.asarray(y, dtype=float)
            ax.scatter(g["P"][~over], y[~over], marker="o", color=c, zorder=3)
            ax.scatter(g["P"][over], y[over], facecolors="white", edgecolors=c, zorder=3)
    if any_over:
        axes[2].scatter([], [], marker="o", facecolors="white", edgecolors="k",
                        label="hollow: oversubscribed (P > cores)")  # fmt: skip
    axes[0].set_yscale("log")
    _log_y(axes[0])
    axes[0].set_ylabel("time per multiplication [s] (median, min-max bars)")
    axes[0].set_title("time")
    axes[1].set_ylabel("GFLOP/s (all ranks)")
    axes[1].set_title("throughput")
    axes[2].set_ylabel(
        "weak efficiency (GFLOP/s per core used, relative)"
        if weak
        else "parallel efficiency T(P0) c(P0) / (T(P) c(P))"
    )
    axes[2].axhline(1.0, color="0.5", linestyle=":", linewidth=1)
    axes[2].set_title("efficiency (1 = perfect; c(P) = min(P, cores x nodes))")
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
        ax.scatter(
            g["predicted_seconds"] * 1e3,
            g["seconds"] * 1e3,
            color=colours[algo],
            label=algo,
            s=40,
            edgecolor="k",
            linewidth=0.5,
            zorder=3,
        )
    vals = [v * 1e3 for v in list(df["predicted_seconds"]) + list(df["seconds"])]
    lo, hi = min(vals) / 1.6, max(vals) * 1.6
    ax.plot([lo, hi], [lo, hi], color="k", linewidth=1, label="y = x (model exact)")
    ax.fill_between(
        [lo, hi], [lo / 2, hi / 2], [lo * 2, hi * 2], color="0.85", alpha=0.6, label="within 2x"
    )
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
    for i, (_label, pred, meas, total) in enumerate(items):
        for offset, parts, hatch in ((-width / 2, pred, "//"), (width / 2, meas, None)):
            bottom = 0.0
            for phase in sorted(parts):
                v = parts[phase] * 1e3
                if v <= 0:
                    continue
                ax.bar(
                    i + offset,
                    v,
                    width,
                    bottom=bottom,
                    color=_phase_colour(phase),
                    hatch=hatch,
                    edgecolor="0.3",
                    linewidth=0.5,
                    label=phase if phase not in seen else None,
                )
                seen.add(phase)
                bottom += v
        ax.plot(
            [i + width / 2 - width / 2, i + width],
            [total * 1e3] * 2,
            color="k",
            linewidth=2,
            label="measured total (timed median)" if i == 0 else None,
        )
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
        ax.plot(
            g["P"] * nudge,
            g["bytes_sent_per_rank_max"] / 2**20,
            marker=markers[i % 11],
            color=colours[algo],
            label=algo,
            alpha=0.85,
        )
    grid = [p for p in Ps]
    ax.plot(
        grid,
        [n * n / math.sqrt(p) * itemsize / 2**20 for p in grid],
        "k--",
        label="2D bound n²/√P words",
    )
    ax.plot(
        grid,
        [n * n / p ** (2 / 3) * itemsize / 2**20 for p in grid],
        "k:",
        label="3D bound n²/P^(2/3) words",
    )
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
                bars = [
                    ((a - t0) * 1e3, d * 1e3)
                    for a, d in zip(r["start"], r["duration"], strict=True)
                ]
                ax.broken_barh(
                    bars,
                    (rank + off, h),
                    facecolors=_phase_colour(phase),
                    edgecolor="0.2",
                    linewidth=0.3,
                    alpha=1.0 if lane == "rank" else 0.55,
                    label=phase if phase not in seen else None,
                )
                seen.add(phase)
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"rank {r}" for r in ranks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first span of the repetition [ms]")
    ax.set_title(
        title + "\n(tall bars: what the rank does; thin bars below: messages in flight)",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="phase")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def layout_figure(algo: str, P: int, tmp: Path):
    """A, B and C of `algo` on P ranks for a small shape, drawn by `distmm layout --plot`."""
    module = get(algo)
    plan = None
    for shape in LAYOUT_SHAPES:
        try:
            plan = module.plan(shape, P)
            break
        except Exception:
            continue
    if plan is None:
        return None
    plt = _plt()
    images = []
    for name in ("A", "B", "C"):
        path = tmp / f".{algo}-{name}.png"
        try:
            plot_layout(getattr(plan, name), str(path))
        except Exception:
            return None
        images.append((name, plt.imread(path)))
        path.unlink()
    widths = [img.shape[1] for _, img in images]
    fig, axes = plt.subplots(
        1,
        3,
        figsize=(sum(widths) / 100, max(i.shape[0] for _, i in images) / 100 + 0.8),
        gridspec_kw={"width_ratios": widths},
    )
    M, K, N = plan.shape
    dims = {"A": f"A [{M} x {K}]", "B": f"B [{K} x {N}]", "C": f"C [{M} x {N}]"}
    for ax, (name, img) in zip(axes, images, strict=True):
        ax.imshow(img)
        ax.set_axis_off()
        ax.set_title(dims[name], fontsize=11)
    grid = "x".join(map(str, plan.grid))
    fig.suptitle(
        f"{algo}: data layouts on P = {P} (grid {grid}), shape {M}x{K}x{N}; colour = owning rank",
        fontsize=12,
    )
    fig.tight_layout()
    return fig
