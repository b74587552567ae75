"""The report's end-to-end figures, for runs from the user's layouts: the kernel's time and the
end-to-end time against P side by side, and one stacked bar per configuration with its three
phases (redistribute A and B in, multiply, redistribute C out)."""

from __future__ import annotations

import numpy as np

from layouts.endpoints import NATIVE

from .figures import _log_y, _p_axis, _phase_colour, _plt
from .report_stats import layout_order

PHASES = (
    ("redistribute_in", "redistribute_in_seconds"),
    ("multiply", "multiply_seconds"),
    ("redistribute_out", "redistribute_out_seconds"),
)


def kernel_and_end_to_end_figure(df, title: str, colours: dict):
    """One panel per layouts: per algorithm, the end-to-end median against P (solid) and the
    multiplication's alone (dashed); the gap between them is the redistribution."""
    plt = _plt()
    names = layout_order(df["layouts_in"])
    fig, axes = plt.subplots(
        1, len(names), figsize=(4.6 * len(names) + 1, 4.4), sharey=True, squeeze=False
    )
    Ps = sorted(df["P"].unique())
    for ax, name in zip(axes[0], names, strict=True):
        part = df[df["layouts_in"] == name]
        for algo, g in part.groupby("algo"):
            g = g.sort_values("P")
            c = colours[algo]
            ax.plot(g["P"], g["seconds"], color=c, marker="o", label=f"{algo} end to end")
            ax.plot(g["P"], g["multiply_seconds"], color=c, linestyle="--", marker=".",
                    label=f"{algo} kernel")  # fmt: skip
        ax.set_yscale("log")
        _p_axis(ax, Ps)
        ax.set_title(f"layouts {name}" + (" (kernel = end to end)" if name == NATIVE else ""))
    _log_y(axes[0][0])
    axes[0][0].set_ylabel("time per multiplication [s] (median)")
    handles = [
        plt.Line2D([], [], color="k", marker="o", label="end to end (solid)"),
        plt.Line2D([], [], color="k", linestyle="--", marker=".", label="kernel alone (dashed)"),
    ] + [plt.Line2D([], [], color=colours[a], label=a) for a in sorted(df["algo"].unique())]
    axes[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def phase_bars_figure(df, title: str):
    """One stacked bar per configuration (algorithm, layouts): redistribute in, multiply,
    redistribute out, each its median (the medians need not add up to the end-to-end median,
    drawn as a black tick); a red cross where the model predicted the end-to-end time. One
    panel per P, each on its own scale (times fall with P)."""
    plt = _plt()
    Ps = sorted(df["P"].unique())
    widths = [df[df["P"] == P].shape[0] + 1 for P in Ps]
    fig, axes = plt.subplots(
        1, len(Ps), figsize=(max(7, 0.7 * sum(widths) + 3), 5), squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )  # fmt: skip
    order = layout_order(df["layouts_in"])
    for ax, P in zip(axes[0], Ps, strict=True):
        rows = df[df["P"] == P]
        rows = rows.assign(_o=[order.index(v) for v in rows["layouts_in"]])
        rows = rows.sort_values(["algo", "_o"])
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for phase, column in PHASES:
            v = rows[column].fillna(0).to_numpy(dtype=float) * 1e3
            ax.bar(x, v, 0.7, bottom=bottom, color=_phase_colour(phase), edgecolor="0.3",
                   linewidth=0.5, label=phase)  # fmt: skip
            bottom += v
        total = rows["seconds"].to_numpy(dtype=float) * 1e3
        ax.scatter(x, total, marker="_", s=300, color="k", zorder=3, label="end to end (median)")
        pred = rows["predicted_seconds"].to_numpy(dtype=float) * 1e3
        if np.isfinite(pred).any():
            ax.scatter(x, pred, marker="x", color="tab:red", zorder=4,
                       label="predicted end to end")  # fmt: skip
        top = np.nanmax(np.concatenate([bottom, total, pred]))
        ax.set_ylim(0, top * 1.08 if top > 0 else 1)
        ax.set_xticks(x)
        ax.set_xticklabels(
            [f"{a}\n{_short(lay)}" for a, lay in rows[["algo", "layouts_in"]].values], fontsize=7
        )
        ax.set_title(f"P = {int(P)}", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("time [ms] (median per phase)")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _short(text: str, most: int = 18) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"
