"""SBP placements (OneFlow style) over named mesh axes, as sugar for TensorLayout.

Text form: ``[x=S(0), y=S(1), z=P]``, one entry per mesh axis that is not ``B`` (axes left out are
broadcast). Where several axes split the same tensor dimension, their order in the list says which
is outer: ``[y=S(1), z=S(1)]`` splits dim 1 by y, then each part by z.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .tensorlayout import Factor, LayoutError, TensorLayout


@dataclass(frozen=True)
class Split:
    dim: int

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class Broadcast:
    def __str__(self) -> str:
        return "B"


@dataclass(frozen=True)
class Partial:
    def __str__(self) -> str:
        return "P"


Placement = Split | Broadcast | Partial


@dataclass(frozen=True)
class SBP:
    """An ordered (axis, placement) list; see the module docstring for its text form."""

    placements: tuple[tuple[str, Placement], ...]

    def __str__(self) -> str:
        return "[" + ", ".join(f"{a}={p}" for a, p in self.placements) + "]"

    def to_layout(self, shape: tuple[int, ...], mesh: Mapping[str, int]) -> TensorLayout:
        """The TensorLayout of a tensor of logical ``shape`` on a mesh {axis: size}.

        Each split dim gets its device factors (outer first) then one memory factor; sizes that
        do not divide are padded up, so the layout is a PadLayout when needed.
        """
        text = str(self)
        splits: dict[int, list[str]] = {}
        partial: list[str] = []
        named = set()
        for axis, p in self.placements:
            if axis not in mesh:
                raise LayoutError(text, f"mesh has no axis {axis!r} (it has {', '.join(mesh)})")
            if axis in named:
                raise LayoutError(text, f"axis {axis} is given two placements")
            named.add(axis)
            if isinstance(p, Split):
                if not 0 <= p.dim < len(shape):
                    raise LayoutError(
                        text, f"S({p.dim}) splits a dimension a {len(shape)}-D tensor lacks"
                    )
                splits.setdefault(p.dim, []).append(axis)
            elif isinstance(p, Partial):
                partial.append(axis)
        dims = []
        for d, n in enumerate(shape):
            axes = splits.get(d, [])
            parts = math.prod(mesh[a] for a in axes)
            per = -(-n // parts)
            dims.append(tuple(Factor(mesh[a], a) for a in axes) + (Factor(per),))
        return TensorLayout(tuple(dims), tuple(shape), partial=tuple(partial))


_ENTRY = re.compile(r"\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(S\s*\(\s*(\d+)\s*\)|B|P)\s*", re.ASCII)


def parse_sbp(text: str) -> SBP:
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise LayoutError(text, "an SBP placement is written [axis=S(d), axis=B, axis=P]")
    out = []
    inner = body[1:-1].strip()
    for part in inner.split(",") if inner else []:
        m = _ENTRY.fullmatch(part)
        if not m:
            raise LayoutError(
                text, f"cannot read placement {part.strip()!r} (use axis=S(d), B or P)"
            )
        p = (
            Split(int(m.group(3)))
            if m.group(3)
            else Broadcast()
            if m.group(2) == "B"
            else Partial()
        )
        out.append((m.group(1), p))
    return SBP(tuple(out))
