"""The picture of a layout: the (padded) matrix coloured by owning device, each cell's local
address written on small ones, padding hatched (`distmm layout --plot` and the report)."""

from __future__ import annotations

import math

import numpy as np

from layouts import TensorLayout

from .errors import UsageError
from .layout_view import address_array, combined_device, device_arrays

SMALL_PLOT = 32  # up to 32 x 32 the plot writes each cell's local address


def plot_layout(layout: TensorLayout, path: str, notation: str | None = None) -> None:
    """Draw the (padded) matrix coloured by owning device; padding hatched grey."""
    if layout.ndim > 2:
        text = str(layout) if notation is None else notation
        raise UsageError(f"--plot draws 1-D and 2-D layouts; {text!r} has {layout.ndim} dimensions")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Rectangle
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    padded = layout.padded_shape
    per = device_arrays(layout, padded)
    owner = combined_device(layout, per, padded)
    addr = address_array(layout, padded)
    logical = layout.logical_shape
    if layout.ndim == 1:
        owner, addr = owner[None, :], addr[None, :]
        padded, logical = (1, *padded), (1, *logical)
    rows, cols = padded
    ndev = math.prod(layout.levels.values())

    small = rows <= SMALL_PLOT and cols <= SMALL_PLOT
    cell = 0.42 if small else min(0.42, 9.0 / max(rows, cols))
    width, height = max(cols * cell, 3.0), max(rows * cell, 1.2)
    fig, ax = plt.subplots(figsize=(width + 1.8, height + 1.2))
    if ndev <= 20:
        base = plt.get_cmap("tab10" if ndev <= 10 else "tab20")
        cmap = ListedColormap([base(k) for k in range(ndev)])
        norm = BoundaryNorm(np.arange(ndev + 1) - 0.5, ndev)
    else:
        cmap, norm = plt.get_cmap("viridis"), None
    image = ax.imshow(owner, cmap=cmap, norm=norm, interpolation="nearest", aspect="equal")
    # A colorbar axis attached to the image keeps it as tall (2-D) or as wide (1-D) as the matrix.
    side = "right" if layout.ndim == 2 else "bottom"
    cax = make_axes_locatable(ax).append_axes(
        side, size=0.22 if layout.ndim == 2 else 0.18, pad=0.15 if layout.ndim == 2 else 0.6
    )
    bar = fig.colorbar(
        image,
        cax=cax,
        orientation="vertical" if side == "right" else "horizontal",
        ticks=range(ndev) if ndev <= 20 else None,
    )
    bar.set_label(
        f"device: {' x '.join(layout.levels)} (row-major)"
        if layout.levels
        else "device: no split level (a full copy on every device)"
    )
    if small:
        rgba = cmap(norm(owner) if norm is not None else owner / max(ndev - 1, 1))
        light = (rgba[..., :3] @ np.array([0.299, 0.587, 0.114])) > 0.55
        for i in range(rows):
            for j in range(cols):
                ax.text(
                    j,
                    i,
                    str(addr[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if light[i, j] else "white",
                )
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=7)
        ax.set_xticks(np.arange(cols + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=0.6)
        ax.tick_params(which="minor", length=0)
    if (rows, cols) != tuple(logical):
        style = dict(facecolor=(0.5, 0.5, 0.5, 0.55), edgecolor="0.25", hatch="//", linewidth=0)
        if logical[0] < rows:
            ax.add_patch(Rectangle((-0.5, logical[0] - 0.5), cols, rows - logical[0], **style))
        if logical[1] < cols:
            ax.add_patch(
                Rectangle((logical[1] - 0.5, -0.5), cols - logical[1], logical[0], **style)
            )
    ax.set_xlabel("index i" if layout.ndim == 1 else "column j")
    if layout.ndim == 2:
        ax.set_ylabel("row i")
    else:
        ax.set_yticks([])
    notes = (["numbers: local address"] if small else []) + (
        ["hatched grey: padding"] if (rows, cols) != tuple(logical) else []
    )
    title = str(layout) + (f"\n({'; '.join(notes)})" if notes else "")
    ax.set_title(title, fontsize=9)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot write plot {path!r}: {err}") from None
    finally:
        plt.close(fig)
