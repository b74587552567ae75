"""`distmm layout`: show what a layout notation means, as text, JSON or a picture.

    distmm layout NOTATION [--levels NAME=SIZE,...] [--sbp SHAPE] [--json] [--plot FILE.png]

The text report gives the canonical form, the shapes, the device levels, the replicated levels,
the Time axis and rotation, the local size and what every device holds (step 0). ``--json``
prints one object with per-element arrays (device index per level, local address, Time chunk);
``--plot`` draws the matrix coloured by owning device. ``--sbp 10,7`` reads NOTATION as an SBP
placement (``[x=S(0), y=S(1)]``) over the mesh that ``--levels`` gives. Nothing here loads MPI.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.cli import UsageError
from layouts import TIME, TensorLayout, held_indices, parse_layout, parse_sbp, time_chunk
from layouts.blockmap import address_contributions, level_contributions

MAX_ELEMENTS = 4_000_000  # --json / --plot refuse larger tensors
MAX_LISTED_DEVICES = 64  # above this many devices the text report lists only the first few
FIRST_DEVICES = 8
MAX_LISTED_DIM = 1 << 24  # the per-device listing works on vectors of a dimension's length
SMALL_PLOT = 32  # up to 32 x 32 the plot writes each cell's local address
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SIZE = re.compile(r"[0-9]+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notation", metavar="NOTATION",
                        help="a TensorLayout such as '((4_PE, 3:8), (8:1))' "
                             "(or an SBP placement with --sbp)")
    parser.add_argument("--levels", metavar="NAME=SIZE,...", default="",
                        help="device level sizes, e.g. PE=4,MAB=2; a level the layout does not "
                             "split is replicated")
    parser.add_argument("--sbp", metavar="SHAPE", default=None,
                        help="read NOTATION as an SBP placement of a tensor of this shape "
                             "(e.g. 10,7) on the mesh given by --levels")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with per-element placement arrays")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="draw the matrix coloured by owning device into FILE.png")


def main(args: argparse.Namespace) -> int:
    sizes = parse_levels(args.levels, args.notation)
    if args.sbp is not None:
        shape = parse_shape(args.sbp)
        layout = parse_sbp(args.notation).to_layout(shape, sizes)
    else:
        layout = parse_layout(args.notation)
    levels = all_levels(layout, sizes, args.notation)
    if args.json or args.plot:
        _check_small(layout, args.notation, padded=bool(args.plot))
    if args.plot:
        plot_layout(layout, args.plot, args.notation)
    if args.json:
        print(json.dumps(describe(layout, levels, sizes)), flush=True)
    else:
        print(text_report(layout, levels, sizes), flush=True)
        if args.plot:
            print(f"plot           {args.plot}", flush=True)
    return 0


# -- input --------------------------------------------------------------------------------------
def parse_levels(text: str, notation: str = "") -> dict[str, int]:
    """``"PE=4, MAB=2"`` -> {"PE": 4, "MAB": 2}; raises UsageError quoting the input."""

    def bad(problem: str) -> UsageError:
        where = f" (layout {notation!r})" if notation else ""
        return UsageError(f"invalid --levels {text!r}{where}: {problem}")

    out: dict[str, int] = {}
    if not text.strip():
        return out
    for item in text.split(","):
        name, eq, size = (s.strip() for s in item.partition("="))
        if not eq:
            raise bad(f"{item.strip()!r} is not NAME=SIZE")
        if not _NAME.fullmatch(name):
            raise bad(f"level name {name!r} is not a plain name")
        if name == TIME:
            raise bad("Time is a temporal axis, not a device level")
        if not _SIZE.fullmatch(size) or int(size) < 1:
            raise bad(f"size {size!r} of level {name} is not a positive integer")
        if name in out:
            raise bad(f"level {name} is given twice")
        out[name] = int(size)
    return out


def parse_shape(text: str) -> tuple[int, ...]:
    """``"10,7"`` (or ``"(10, 7)"``, ``"10x7"``) -> (10, 7)."""
    parts = [p.strip() for p in re.split(r"[,x]", text.strip().strip("()"))]
    if not parts or not all(_SIZE.fullmatch(p) and int(p) > 0 for p in parts):
        raise UsageError(f"invalid --sbp shape {text!r}: write positive sizes like 10,7")
    return tuple(int(p) for p in parts)


def all_levels(layout: TensorLayout, sizes: Mapping[str, int],
               notation: str | None = None) -> dict[str, int | None]:
    """Every level the layout or --levels names, with its size (None where nobody gives one).

    Order: split levels, B@, P@, rotation-only levels, then the other --levels levels.
    Raises UsageError (quoting ``notation``) when --levels contradicts a split level's size.
    """
    text = str(layout) if notation is None else notation
    out: dict[str, int | None] = {}
    for lv, n in layout.levels.items():
        if lv in sizes and sizes[lv] != n:
            raise UsageError(f"layout {text!r} splits level {lv} into {n} but --levels gives "
                             f"{lv}={sizes[lv]}")
        out[lv] = n
    rot = [lv for lv, _ in layout.rotation.offset] if layout.rotation else []
    for lv in [*layout.broadcast, *layout.partial, *rot, *sizes]:
        out.setdefault(lv, sizes.get(lv))
    return out


def _check_small(layout: TensorLayout, notation: str, padded: bool) -> None:
    """Refuse per-element output for big tensors (--plot draws the padded shape too)."""
    n, p = math.prod(layout.logical_shape), math.prod(layout.padded_shape)
    if n > MAX_ELEMENTS or (padded and p > MAX_ELEMENTS):
        raise UsageError(f"layout {notation!r} has {n} logical elements ({p} padded); "
                         f"--json and --plot handle at most {MAX_ELEMENTS}")


# -- per-element arrays (vectorised) ---------------------------------------------------------
def _grid(layout: TensorLayout, vectors: list[np.ndarray | None],
          shape: tuple[int, ...]) -> np.ndarray:
    """Sum per-dimension vectors (cut to ``shape``) into one array by broadcasting."""
    out = np.zeros(shape, dtype=np.int64)
    for d, vec in enumerate(vectors):
        if vec is not None:
            view = [1] * layout.ndim
            view[d] = shape[d]
            out = out + vec[: shape[d]].reshape(view)
    return out


def device_arrays(layout: TensorLayout, shape: tuple[int, ...] | None = None
                  ) -> dict[str, np.ndarray]:
    """{level: each element's device index on that level} for the split levels (and Time)."""
    shape = layout.logical_shape if shape is None else shape
    names = list(layout.levels) + ([TIME] if has_time(layout) else [])
    return {lv: _grid(layout, [level_contributions(layout, d).get(lv) for d in range(layout.ndim)],
                      shape) for lv in names}


def address_array(layout: TensorLayout, shape: tuple[int, ...] | None = None) -> np.ndarray:
    shape = layout.logical_shape if shape is None else shape
    return _grid(layout, [address_contributions(layout, d) for d in range(layout.ndim)], shape)


def combined_device(layout: TensorLayout, per_level: Mapping[str, np.ndarray],
                    shape: tuple[int, ...]) -> np.ndarray:
    """One device number per element: row-major over the split levels in level order."""
    out = np.zeros(shape, dtype=np.int64)
    for lv, n in layout.levels.items():
        out = out * n + per_level[lv]
    return out


def has_time(layout: TensorLayout) -> bool:
    return any(f.is_time for dim in layout.dims for f in dim)


def describe(layout: TensorLayout, levels: Mapping[str, int | None],
             sizes: Mapping[str, int]) -> dict[str, Any]:
    """The --json object (placement at step 0). ``levels`` maps a level whose size neither the
    layout nor --levels gives (a B@, P@ or rotation-only level) to None; ``rotation`` is empty
    for a Time axis that does not rotate (at step t every device holds chunk t)."""
    per = device_arrays(layout)
    out: dict[str, Any] = {
        "canonical": str(layout),
        "logical_shape": list(layout.logical_shape),
        "padded_shape": list(layout.padded_shape),
        "block_shape": list(layout.block_shape),
        "levels": dict(levels),
        "replicated": list(layout.replicated_levels(sizes)),
        "partial": list(layout.partial),
        "local_size": int(layout.local_size),
        "device": {lv: per[lv].tolist() for lv in layout.levels},
        "address": address_array(layout).tolist(),
    }
    if has_time(layout):
        out["time_size"] = int(layout.time_size)
        out["time"] = per[TIME].tolist()
        out["rotation"] = _rotation_text(layout)
    return out


def _rotation_text(layout: TensorLayout) -> str:
    text = str(layout)
    return text[text.index("R@["):-1] if layout.rotation else ""


# -- text report -----------------------------------------------------------------------------
def text_report(layout: TensorLayout, levels: Mapping[str, int | None],
                sizes: Mapping[str, int]) -> str:
    def size(n: int | None) -> str:
        return "?" if n is None else str(n)

    shape = " x ".join(map(str, layout.logical_shape))
    padded = " x ".join(map(str, layout.padded_shape))
    lines = [f"layout         {layout}",
             f"logical shape  {shape}",
             f"padded shape   {padded}" + ("" if layout.is_padded else " (no padding)")]
    split = ", ".join(f"{lv}={n}" for lv, n in layout.levels.items()) or "none"
    lines.append(f"split levels   {split}")
    repl = layout.replicated_levels(sizes)
    lines.append("replicated     " + (", ".join(f"{lv}={size(levels.get(lv))}" for lv in repl)
                                     or "none"))
    if layout.partial:
        lines.append("partial sum    " + ", ".join(f"{lv}={size(levels.get(lv))}"
                                                   for lv in layout.partial))
    if has_time(layout):
        time = f"{layout.time_size} chunks"
        if layout.rotation:
            time += (f", {_rotation_text(layout)}: at step t a device holds chunk "
                     f"({_offset_formula(layout)} + {layout.rotation.pace}*t) mod "
                     f"{layout.time_size}")
        else:
            time += ", no rotation: at step t every device holds chunk t"
        lines.append(f"time axis      {time}")
    else:
        lines.append("time axis      none")
    block = " x ".join(map(str, layout.block_shape))
    lines.append(f"local size     {layout.local_size} addresses per device (block {block})")
    if max(layout.padded_shape) <= MAX_LISTED_DIM:
        lines += device_summary(layout, levels)
    else:
        lines.append(f"devices        (not listed: a dimension is longer than {MAX_LISTED_DIM})")
    if unknown := [lv for lv in repl if levels.get(lv) is None]:
        lines.append(f"note: the size of {', '.join(unknown)} is not given (--levels NAME=SIZE)")
    return "\n".join(lines)


def _offset_formula(layout: TensorLayout) -> str:
    text = _rotation_text(layout)[3:-1]
    return text.split(", pace=")[0]


def device_summary(layout: TensorLayout, levels: Mapping[str, int | None]) -> list[str]:
    """One line per device (step 0): the global index ranges it holds, padding apart."""
    names = list(layout.levels)
    rot_only = [lv for lv, _ in layout.rotation.offset if lv not in layout.levels] \
        if layout.rotation else []
    known = [lv for lv in rot_only if levels.get(lv) is not None]
    grid = [(lv, levels[lv]) for lv in names + known]
    total = math.prod(n for _, n in grid)
    lines = [f"devices        {total}" + (f" ({' x '.join(f'{lv}={n}' for lv, n in grid)})"
                                         if grid else " (one block, the whole tensor)")]
    if missing := [lv for lv in rot_only if lv not in known]:
        lines.append(f"  (rotation level {', '.join(missing)} has no size; shown at coordinate 0"
                     f" — give it with --levels)")
    shown = total if total <= MAX_LISTED_DEVICES else FIRST_DEVICES
    for k in range(shown):
        coords = dict.fromkeys(rot_only, 0)
        rest = k
        for lv, n in reversed(grid):
            rest, coords[lv] = divmod(rest, n)
        label = ", ".join(f"{lv}={coords[lv]}" for lv, _ in grid) or "every device"
        held = held_indices(layout, coords)
        parts = [f"{_dim_name(layout.ndim, d)} {_held_text(idx, layout.logical_shape[d])}"
                 for d, idx in enumerate(held)]
        if has_time(layout):
            parts.append(f"Time chunk {time_chunk(layout, coords)}")
        lines.append(f"  {label}: " + "; ".join(parts))
    if shown < total:
        lines.append(f"  ... and {total - shown} more devices")
    return lines


def _dim_name(ndim: int, d: int) -> str:
    if ndim == 1:
        return "indices"
    if ndim == 2:
        return ("rows", "cols")[d]
    return f"dim {d}"


def _held_text(idx: np.ndarray, logical: int) -> str:
    real, pad = idx[idx < logical], idx[idx >= logical]
    text = ranges(real) if real.size else "none"
    return text + (f" (+ padding {ranges(pad)})" if pad.size else "")


def ranges(idx: np.ndarray, limit: int = 8) -> str:
    """Increasing indices as runs: [0,1,2,6,7,8] -> '0-2, 6-8'; long regular lists abridged."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size == 0:
        return "none"
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = idx[np.r_[0, breaks]]
    ends = idx[np.r_[breaks - 1, idx.size - 1]]
    pairs = zip(starts.tolist(), ends.tolist(), strict=True)
    runs = [str(a) if a == b else f"{a}-{b}" for a, b in pairs]
    if len(runs) <= limit:
        return ", ".join(runs)
    lengths, gaps = ends - starts + 1, np.diff(starts)
    head = ", ".join(runs[:3]) + ", ..., " + runs[-1]
    if (lengths == lengths[0]).all() and (gaps == gaps[0]).all():
        return f"{head} ({len(runs)} runs of {lengths[0]}, every {gaps[0]})"
    return f"{head} ({len(runs)} runs, {idx.size} indices)"


# -- plot -----------------------------------------------------------------------------------
def plot_layout(layout: TensorLayout, path: str, notation: str | None = None) -> None:
    """Draw the (padded) matrix coloured by owning device; padding hatched grey."""
    if layout.ndim > 2:
        text = str(layout) if notation is None else notation
        raise UsageError(f"--plot draws 1-D and 2-D layouts; {text!r} has "
                         f"{layout.ndim} dimensions")
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
    cax = make_axes_locatable(ax).append_axes(side, size=0.22 if layout.ndim == 2 else 0.18,
                                              pad=0.15 if layout.ndim == 2 else 0.6)
    bar = fig.colorbar(image, cax=cax, orientation="vertical" if side == "right" else "horizontal",
                       ticks=range(ndev) if ndev <= 20 else None)
    bar.set_label(f"device: {' x '.join(layout.levels)} (row-major)" if layout.levels
                  else "device: no split level (a full copy on every device)")
    if small:
        rgba = cmap(norm(owner) if norm is not None else owner / max(ndev - 1, 1))
        light = (rgba[..., :3] @ np.array([0.299, 0.587, 0.114])) > 0.55
        for i in range(rows):
            for j in range(cols):
                ax.text(j, i, str(addr[i, j]), ha="center", va="center", fontsize=7,
                        color="black" if light[i, j] else "white")
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
            ax.add_patch(Rectangle((logical[1] - 0.5, -0.5), cols - logical[1], logical[0],
                                   **style))
    ax.set_xlabel("index i" if layout.ndim == 1 else "column j")
    if layout.ndim == 2:
        ax.set_ylabel("row i")
    else:
        ax.set_yticks([])
    notes = (["numbers: local address"] if small else []) + \
        (["hatched grey: padding"] if (rows, cols) != tuple(logical) else [])
    title = str(layout) + (f"\n({'; '.join(notes)})" if notes else "")
    ax.set_title(title, fontsize=9)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot write plot {path!r}: {err}") from None
    finally:
        plt.close(fig)
