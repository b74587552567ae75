"""The canonical spelling of a TensorLayout (layouts/tensorlayout.py): every memory stride shown,
device strides where needed, a PadLayout's logical shape first; ``layouts.parser`` reads it back
to an equal layout."""

from __future__ import annotations

import math
from collections.abc import Mapping


def _tup(t) -> str:
    return "(" + ",".join(str(x) for x in t) + ")"


def format_factor(f, level_count: Mapping[str, int]) -> str:
    """One Factor as the notation writes it."""
    if f.is_memory:
        return f"{f.size}:{f.stride}"
    if level_count.get(f.level, 1) > 1 or (f.stride not in (None, 1)):
        return f"{f.size}_{f.level}:{f.stride}"
    return f"{f.size}_{f.level}"


def format_layout(layout) -> str:
    """The canonical spelling: every memory stride shown, device strides where needed."""
    count: dict[str, int] = {}
    for dim in layout.dims:
        for f in dim:
            if not f.is_memory:
                count[f.level] = count.get(f.level, 0) + 1
    body = ", ".join(
        "(" + ", ".join(format_factor(f, count) for f in dim) + ")" for dim in layout.dims
    )
    if layout.broadcast:
        body += "; B@[" + ", ".join(layout.broadcast) + "]"
    if layout.partial:
        body += "; P@[" + ", ".join(layout.partial) + "]"
    if layout.rotation is not None:
        body += "; R@[" + format_offset(layout.rotation.offset)
        if layout.rotation.pace != 1:
            body += f", pace={layout.rotation.pace}"
        if layout.rotation.window != 1:
            body += f", window={layout.rotation.window}"
        body += "]"
    text = "(" + body + ")"
    padded = tuple(math.prod(f.size for f in dim) for dim in layout.dims)
    if layout.logical_shape is not None and tuple(layout.logical_shape) != padded:
        text = _tup(layout.logical_shape) + "/" + text
    return text


def format_offset(offset) -> str:
    """A rotation's offset as the notation writes it (``2*m + n``; ``0`` if empty)."""
    out = ""
    for i, (lv, c) in enumerate(offset):
        sign = "-" if c < 0 else "+"
        mag = abs(c)
        term = lv if mag == 1 else f"{mag}*{lv}"
        out += (("-" if sign == "-" else "") + term) if i == 0 else f" {sign} {term}"
    return out or "0"


__all__ = ["format_factor", "format_layout", "format_offset"]
