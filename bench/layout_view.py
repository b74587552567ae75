"""What a layout means, in words and numbers: the --levels sizes, the levels a layout names, the
per-element arrays (device index per level, local address, Time chunk), the JSON description
and the text report of `distmm layout`. Nothing here loads MPI or matplotlib."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from layouts import TIME, TensorLayout, held_indices, time_chunk
from layouts.blockmap import address_contributions, level_contributions
from layouts.spelling import format_offset

from .errors import UsageError
from .units import parse_int

MAX_ELEMENTS = 4_000_000  # --json / --plot refuse larger tensors
MAX_LISTED_DEVICES = 64  # above this many devices the text report lists only the first few
FIRST_DEVICES = 8
MAX_LISTED_DIM = 1 << 24  # the per-device listing works on vectors of a dimension's length
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


# -- input -----------------------------------------------------------------------------------
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
        try:
            n = parse_int(size)
        except ValueError:
            raise bad(f"size {size!r} of level {name} is not a positive integer") from None
        if name in out:
            raise bad(f"level {name} is given twice")
        out[name] = n
    return out


def all_levels(
    layout: TensorLayout, sizes: Mapping[str, int], notation: str | None = None
) -> dict[str, int | None]:
    """Every level the layout or --levels names, with its size (None where nobody gives one).

    Order: split levels, B@, P@, rotation-only levels, then the other --levels levels.
    Raises UsageError (quoting ``notation``) when --levels contradicts a split level's size.
    """
    text = str(layout) if notation is None else notation
    out: dict[str, int | None] = {}
    for lv, n in layout.levels.items():
        if lv in sizes and sizes[lv] != n:
            raise UsageError(
                f"layout {text!r} splits level {lv} into {n} but --levels gives {lv}={sizes[lv]}"
            )
        out[lv] = n
    rot = [lv for lv, _ in layout.rotation.offset] if layout.rotation else []
    for lv in [*layout.broadcast, *layout.partial, *rot, *sizes]:
        out.setdefault(lv, sizes.get(lv))
    return out


def check_small(layout: TensorLayout, notation: str, padded: bool) -> None:
    """Refuse per-element output for big tensors (--plot draws the padded shape too)."""
    n, p = math.prod(layout.logical_shape), math.prod(layout.padded_shape)
    if n > MAX_ELEMENTS or (padded and p > MAX_ELEMENTS):
        raise UsageError(
            f"layout {notation!r} has {n} logical elements ({p} padded); "
            f"--json and --plot handle at most {MAX_ELEMENTS}"
        )


# -- per-element arrays (vectorised) ---------------------------------------------------------
def _grid(
    layout: TensorLayout, vectors: list[np.ndarray | None], shape: tuple[int, ...]
) -> np.ndarray:
    """Sum per-dimension vectors (cut to ``shape``) into one array by broadcasting."""
    out = np.zeros(shape, dtype=np.int64)
    for d, vec in enumerate(vectors):
        if vec is not None:
            view = [1] * layout.ndim
            view[d] = shape[d]
            out = out + vec[: shape[d]].reshape(view)
    return out


def device_arrays(
    layout: TensorLayout, shape: tuple[int, ...] | None = None
) -> dict[str, np.ndarray]:
    """{level: each element's device index on that level} for the split levels (and Time)."""
    shape = layout.logical_shape if shape is None else shape
    names = list(layout.levels) + ([TIME] if has_time(layout) else [])
    return {
        lv: _grid(
            layout, [level_contributions(layout, d).get(lv) for d in range(layout.ndim)], shape
        )
        for lv in names
    }


def address_array(layout: TensorLayout, shape: tuple[int, ...] | None = None) -> np.ndarray:
    shape = layout.logical_shape if shape is None else shape
    return _grid(layout, [address_contributions(layout, d) for d in range(layout.ndim)], shape)


def combined_device(
    layout: TensorLayout, per_level: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    """One device number per element: row-major over the split levels in level order."""
    out = np.zeros(shape, dtype=np.int64)
    for lv, n in layout.levels.items():
        out = out * n + per_level[lv]
    return out


def has_time(layout: TensorLayout) -> bool:
    return any(f.is_time for dim in layout.dims for f in dim)


def describe(
    layout: TensorLayout, levels: Mapping[str, int | None], sizes: Mapping[str, int]
) -> dict[str, Any]:
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
    return text[text.index("R@[") : -1] if layout.rotation else ""


# -- text report -----------------------------------------------------------------------------
def text_report(
    layout: TensorLayout, levels: Mapping[str, int | None], sizes: Mapping[str, int]
) -> str:
    def size(n: int | None) -> str:
        return "?" if n is None else str(n)

    shape = " x ".join(map(str, layout.logical_shape))
    padded = " x ".join(map(str, layout.padded_shape))
    lines = [
        f"layout         {layout}",
        f"logical shape  {shape}",
        f"padded shape   {padded}" + ("" if layout.is_padded else " (no padding)"),
    ]
    split = ", ".join(f"{lv}={n}" for lv, n in layout.levels.items()) or "none"
    lines.append(f"split levels   {split}")
    repl = layout.replicated_levels(sizes)
    lines.append(
        "replicated     " + (", ".join(f"{lv}={size(levels.get(lv))}" for lv in repl) or "none")
    )
    if layout.partial:
        lines.append(
            "partial sum    " + ", ".join(f"{lv}={size(levels.get(lv))}" for lv in layout.partial)
        )
    if has_time(layout):
        time = f"{layout.time_size} chunks"
        if layout.rotation:
            r, n = layout.rotation, layout.time_size
            head = f"({format_offset(r.offset)} + {r.pace}*t) mod {n}"
            held = f"chunk {head}" if r.window == 1 else f"chunks h .. h+{r.window - 1} mod {n}"
            time += f", {_rotation_text(layout)}: at step t a device holds {held}"
            if r.window > 1:
                time += f", h = {head}"
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


def device_summary(layout: TensorLayout, levels: Mapping[str, int | None]) -> list[str]:
    """One line per device (step 0): the global index ranges it holds, padding apart."""
    names = list(layout.levels)
    rot_only = (
        [lv for lv, _ in layout.rotation.offset if lv not in layout.levels]
        if layout.rotation
        else []
    )
    known = [lv for lv in rot_only if levels.get(lv) is not None]
    grid = [(lv, levels[lv]) for lv in names + known]
    total = math.prod(n for _, n in grid)
    lines = [
        f"devices        {total}"
        + (
            f" ({' x '.join(f'{lv}={n}' for lv, n in grid)})"
            if grid
            else " (one block, the whole tensor)"
        )
    ]
    if missing := [lv for lv in rot_only if lv not in known]:
        lines.append(
            f"  (rotation level {', '.join(missing)} has no size; shown at coordinate 0"
            f" — give it with --levels)"
        )
    shown = total if total <= MAX_LISTED_DEVICES else FIRST_DEVICES
    for k in range(shown):
        coords = dict.fromkeys(rot_only, 0)
        rest = k
        for lv, n in reversed(grid):
            rest, coords[lv] = divmod(rest, n)
        label = ", ".join(f"{lv}={coords[lv]}" for lv, _ in grid) or "every device"
        held = held_indices(layout, coords)
        parts = [
            f"{_dim_name(layout.ndim, d)} {_held_text(idx, layout.logical_shape[d])}"
            for d, idx in enumerate(held)
        ]
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
