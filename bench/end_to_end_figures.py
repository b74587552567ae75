"""The report's end-to-end figures, for runs from the user's layouts: the kernel's time and the
end-to-end time against P side by side, and one stacked bar per configuration with its three
phases (redistribute A and B in, multiply, redistribute C out)."""

from __future__ import annotations

import numpy as np

from layouts.endpoints import NATIVE

from .figures import _log_y, _p_axis, _phase_colour, _plt

PHASES = (
    ("redistribute_in", "redistribute_in_seconds"),
    ("multiply", "multiply_seconds"),
    ("redistribute_out", "redistribute_out_seconds"),
)


def layout_order(values) -> list[str]:
    """The layouts of a table, native first, the others as they sort."""
    values = set(values)
    return ([NATIVE] if NATIVE in values else []) + sorted(values - {NATIVE})


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
    """One stacked bar per configuration (algorithm, P, layouts): redistribute in, multiply,
    redistribute out, each its median (the medians need not add up to the end-to-end median,
    drawn as a black tick); a cross where the model predicted the end-to-end time."""
    plt = _plt()
    rows = df.assign(_order=[layout_order(df["layouts_in"]).index(v) for v in df["layouts_in"]])
    rows = rows.sort_values(["algo", "P", "_order"])
    fig, ax = plt.subplots(figsize=(max(7, 0.55 * len(rows) + 3), 5))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for phase, column in PHASES:
        v = rows[column].fillna(0).to_numpy(dtype=float) * 1e3
        ax.bar(x, v, 0.7, bottom=bottom, color=_phase_colour(phase), edgecolor="0.3",
               linewidth=0.5, label=phase)  # fmt: skip
        bottom += v
    ax.scatter(x, rows["seconds"] * 1e3, marker="_", s=300, color="k", zorder=3,
               label="end to end (median)")  # fmt: skip
    pred = rows["predicted_seconds"].to_numpy(dtype=float)
    if np.isfinite(pred).any():
        ax.scatter(x, pred * 1e3, marker="x", color="tab:red", zorder=4,
                   label="predicted end to end")  # fmt: skip
    ax.set_xticks(x)
    ax.set_xticklabels(
        [f"{a}\nP={int(p)}\n{lay}" for a, p, lay in rows[["algo", "P", "layouts_in"]].values],
        fontsize=7,
    )
    ax.set_ylabel("time [ms] (median per phase)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
