"""TensorLayout: the MN-Core layout notation as frozen values (printed by layouts/spelling.py).

Grammar (whitespace is free; :mod:`layouts.parser` reads it)::

    layout   := [shape "/"] "(" dim ("," dim)* (";" suffix)* ")"
    shape    := "(" INT ("," INT)* ")"                      # PadLayout: the logical shape
    dim      := "(" factor ("," factor)* ")" | factor       # a bare factor is a one-factor dim
    factor   := INT ["_" NAME] [":" INT]                    # n:s | n_LEVEL | n_LEVEL:s | n_Time
    suffix   := "B@[" names "]"                             # explicit broadcast (replication)
              | "P@[" names "]"                             # partial sum along these levels
              | "R@[" offset ["," "pace=" INT] ["," "window=" INT] "]"   # Time axis rotation
    offset   := "0" | term (("+" | "-") term)*,  term := [INT "*"] NAME

A dimension index decomposes in mixed radix over its factors, first factor most significant.
Memory factors give the local address (sum of digit * stride); device factors give the device
index on their level (sum of digit * stride over that level's factors); the ``Time`` factors give
the temporal chunk a device holds at a step. With a rotation ``R@[x + y, pace=k]`` a device at
mesh coordinates c holds, at step t, Time chunk ``(x_c + y_c + k t) mod n_Time`` (Cannon's skew).
With ``window=W`` it holds W consecutive chunks from that one (a T10 core's window of a rotating
tensor); its local memory then has one chunk-sized slot per held chunk, in increasing chunk order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from topology import radix

from .spelling import _tup, format_layout

TIME = "Time"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_MAX_ADDRESS = 1 << 62  # memory addresses stay below this: int64 arithmetic never overflows


class LayoutError(ValueError):
    """The one error a malformed or inconsistent layout raises; it quotes the input."""

    what = "invalid layout"

    def __init__(self, text: str, problem: str):
        self.text = text
        self.problem = problem
        super().__init__(f"{self.what} {text!r}: {problem}")

    def __reduce__(self):  # pickled whole (out of a plan's worker process, say)
        return type(self), (self.text, self.problem)


class TooManyPairs(LayoutError):
    """A move between valid layouts whose rank pairs are too many to count
    (layouts.endpoints.MAX_PAIRS)."""

    what = "moving"


@dataclass(frozen=True)
class Factor:
    """One factor of a dimension: memory axis (level None), device axis, or Time axis."""

    size: int
    level: str | None = None
    stride: int | None = None

    @property
    def is_memory(self) -> bool:
        return self.level is None

    @property
    def is_time(self) -> bool:
        return self.level == TIME

    @property
    def is_device(self) -> bool:
        return self.level is not None and self.level != TIME


@dataclass(frozen=True)
class Rotation:
    """Time-axis rotation: at step t a device holds ``window`` consecutive chunks starting at
    (sum(coef * coord[level]) + pace * t) mod n_Time (the head)."""

    offset: tuple[tuple[str, int], ...]
    pace: int = 1
    window: int = 1

    def chunk(self, coords: Mapping[str, int], step: int, n_time: int) -> int:
        """The head chunk."""
        return (sum(c * coords[lv] for lv, c in self.offset) + self.pace * step) % n_time

    def chunks(self, coords: Mapping[str, int], step: int, n_time: int) -> list[int]:
        """The window's chunks, head first."""
        head = self.chunk(coords, step, n_time)
        return [(head + w) % n_time for w in range(self.window)]


@dataclass(frozen=True)
class TensorLayout:
    """A tensor distributed over named device levels. Build with ``parse_layout`` or directly.

    ``logical_shape`` is the tensor's shape; the padded shape is the product of each dim's
    factors. Strides omitted in the input are completed (memory: row-major over the memory
    factors in order; device: 1 for a level with a single factor), so equal layouts compare equal.
    """

    dims: tuple[tuple[Factor, ...], ...]
    logical_shape: tuple[int, ...] | None = None
    broadcast: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    rotation: Rotation | None = None

    def __post_init__(self) -> None:
        try:
            self._normalise_and_check()
        except _Invalid as bad:
            raise LayoutError(_describe(self), str(bad)) from None

    # -- derived facts ---------------------------------------------------------------------
    @cached_property
    def padded_shape(self) -> tuple[int, ...]:
        return tuple(math.prod(f.size for f in dim) for dim in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @cached_property
    def levels(self) -> dict[str, int]:
        """Device levels named by factors, in order of first appearance, with their sizes."""
        out: dict[str, int] = {}
        for f in self._factors():
            if f.is_device:
                out[f.level] = out.get(f.level, 1) * f.size
        return out

    @cached_property
    def time_size(self) -> int:
        return math.prod(f.size for f in self._factors() if f.is_time)

    @property
    def window(self) -> int:
        """Time chunks a device holds at once (the rotation's window; 1 without one)."""
        return self.rotation.window if self.rotation is not None else 1

    @cached_property
    def block_shape(self) -> tuple[int, ...]:
        """Elements per dimension that one device holds at one step (a window's chunks too)."""
        return tuple(
            math.prod(f.size for f in dim if f.is_memory)
            * (self.window if any(f.is_time for f in dim) else 1)
            for dim in self.dims
        )

    @cached_property
    def chunk_span(self) -> int:
        """Addresses one Time chunk needs: the span of the memory strides."""
        return 1 + sum((f.size - 1) * f.stride for f in self._factors() if f.is_memory)

    @cached_property
    def local_size(self) -> int:
        """Addresses one device needs: a chunk's span for each chunk of the window."""
        return self.chunk_span * self.window

    @property
    def is_padded(self) -> bool:
        return self.logical_shape != self.padded_shape

    def replicated_levels(self, mesh_levels: Iterable[str] = ()) -> tuple[str, ...]:
        """Levels along which copies exist: explicit B@ plus mesh levels the layout never uses."""
        used = set(self.levels) | set(self.partial) | set(self.broadcast)
        if self.rotation:
            used |= {lv for lv, _ in self.rotation.offset}
        extra = tuple(lv for lv in mesh_levels if lv not in used)
        return self.broadcast + extra

    def with_shape(self, logical_shape: tuple[int, ...]) -> TensorLayout:
        return TensorLayout(
            self.dims, tuple(logical_shape), self.broadcast, self.partial, self.rotation
        )

    def __str__(self) -> str:
        return self._text

    _text = cached_property(lambda self: format_layout(self))  # plan keys moves by the text

    # -- validation ------------------------------------------------------------------------
    def _factors(self) -> Iterable[Factor]:
        return (f for dim in self.dims for f in dim)

    def _normalise_and_check(self) -> None:
        if not self.dims:
            raise _Invalid("a layout needs at least one dimension")
        for d, dim in enumerate(self.dims):
            if not dim:
                raise _Invalid(f"dimension {d} has no factors")
            for f in dim:
                if not isinstance(f.size, int) or f.size < 1:
                    raise _Invalid(
                        f"factor size {f.size!r} in dimension {d} must be a positive integer"
                    )
                if f.stride is not None and (not isinstance(f.stride, int) or f.stride < 0):
                    raise _Invalid(
                        f"stride {f.stride!r} in dimension {d} must be a non-negative integer"
                    )
                if f.level is not None and not _NAME.fullmatch(f.level):
                    raise _Invalid(f"level name {f.level!r} is not a plain name")
        padded = tuple(math.prod(f.size for f in dim) for dim in self.dims)
        shape = padded if self.logical_shape is None else tuple(self.logical_shape)
        if len(shape) != len(padded):
            raise _Invalid(
                f"logical shape {_tup(shape)} has {len(shape)} dimensions but the "
                f"layout has {len(padded)}"
            )
        for d, (n, p) in enumerate(zip(shape, padded, strict=True)):
            if not isinstance(n, int) or n < 1:
                raise _Invalid(f"logical size {n!r} of dimension {d} must be a positive integer")
            if n > p:
                raise _Invalid(
                    f"dimension {d}: factors multiply to {p}, less than the logical size {n}"
                )
        object.__setattr__(self, "logical_shape", shape)
        dims = self._complete_memory_strides()
        dims = self._complete_device_strides(dims)
        object.__setattr__(self, "dims", dims)
        self._check_memory_injective()
        self._check_suffixes()

    def _complete_memory_strides(self) -> tuple[tuple[Factor, ...], ...]:
        mem = [f for f in self._factors() if f.is_memory]
        given = [f.stride is not None for f in mem]
        if all(given):
            return self.dims
        if any(given):
            raise _Invalid("give a stride for every memory axis or for none (none: row-major)")
        it = iter(radix.strides([f.size for f in mem]))
        return tuple(
            tuple(Factor(f.size, None, next(it)) if f.is_memory else f for f in dim)
            for dim in self.dims
        )

    def _complete_device_strides(self, dims) -> tuple[tuple[Factor, ...], ...]:
        by_level: dict[str, list[Factor]] = {}
        for dim in dims:
            for f in dim:
                if not f.is_memory:
                    by_level.setdefault(f.level, []).append(f)
        for level, fs in by_level.items():
            if len(fs) > 1 and any(f.stride is None for f in fs):
                raise _Invalid(
                    f"level {level} appears in {len(fs)} factors; each needs a stride (n_{level}:s)"
                )
            strides = sorted(((f.stride if f.stride is not None else 1), f.size) for f in fs)
            expect = 1
            for s, n in strides:
                if s != expect:
                    raise _Invalid(
                        f"the strides of level {level} do not give a bijection onto "
                        f"0..{math.prod(f.size for f in fs) - 1} (stride {s} where "
                        f"{expect} is needed)"
                    )
                expect *= n
        return tuple(
            tuple(
                Factor(f.size, f.level, 1) if (not f.is_memory and f.stride is None) else f
                for f in dim
            )
            for dim in dims
        )

    def _check_memory_injective(self) -> None:
        mem = sorted((f.stride, f.size) for f in self._factors() if f.is_memory and f.size > 1)
        span = 0  # largest address reachable with the factors so far
        for i, (s, n) in enumerate(mem):
            if s > span:  # every address so far is below s: shifted copies cannot meet
                span += (n - 1) * s
            else:  # not a mixed radix: decide by listing the addresses so far
                span = self._listed_span(mem[: i + 1])
        if span >= _MAX_ADDRESS:
            raise _Invalid(
                f"memory strides reach address {span}, beyond the {_MAX_ADDRESS} a block can hold"
            )

    @staticmethod
    def _listed_span(mem: list[tuple[int, int]]) -> int:
        """The largest address of the (stride, size) factors ``mem``, listed (a few million at
        most) and checked to be distinct."""
        count = math.prod(n for _, n in mem)
        if count > 1 << 22:
            raise _Invalid(
                f"memory strides are not a mixed radix and give {count} addresses, too many "
                "to check that no two elements share one"
            )
        top = sum((n - 1) * s for s, n in mem)
        if top >= _MAX_ADDRESS:  # refused by the caller (int64 would overflow listing them)
            return top
        addr = np.zeros(1, dtype=np.int64)
        for s, n in mem:
            addr = (addr[:, None] + s * np.arange(n, dtype=np.int64)).ravel()
        if np.unique(addr).size != addr.size:
            raise _Invalid("memory strides overlap (two elements would share an address)")
        return int(addr.max())

    def _check_suffixes(self) -> None:
        named = set(self.levels)
        seen: set[str] = set()
        for kind, group in (("B", self.broadcast), ("P", self.partial)):
            for lv in group:
                if lv == TIME:
                    raise _Invalid(f"{kind}@ cannot name the Time axis")
                if lv in named:
                    raise _Invalid(
                        f"level {lv} is split by a factor and also named in {kind}@[...]"
                    )
                if lv in seen:
                    raise _Invalid(f"level {lv} is named twice in B@/P@")
                seen.add(lv)
        has_time = any(f.is_time for f in self._factors())
        if self.rotation is not None:
            if not has_time:
                raise _Invalid("R@[...] rotates the Time axis, but no factor is a Time axis")
            if self.rotation.pace < 1:
                raise _Invalid("the rotation pace must be a positive integer")
            if not 1 <= self.rotation.window <= self.time_size:
                raise _Invalid(
                    f"the rotation window must be between 1 and the Time axis size {self.time_size}"
                )
            if self.rotation.window > 1:
                time_dims = [d for d, dim in enumerate(self.dims) if any(f.is_time for f in dim)]
                dim = self.dims[time_dims[0]]
                first_time = next(k for k, f in enumerate(dim) if f.is_time)
                if (
                    len(time_dims) > 1
                    or sum(f.is_time for f in dim) > 1
                    or any(f.is_memory for f in dim[:first_time])
                ):
                    raise _Invalid(
                        "a rotation window needs a single Time factor, outside every "
                        "memory factor of its dimension"
                    )
            names = [lv for lv, _ in self.rotation.offset]
            if len(set(names)) != len(names):
                raise _Invalid("a level appears twice in the rotation offset")
            for lv in names:
                if lv == TIME or lv in seen:
                    raise _Invalid(f"the rotation offset cannot use level {lv}")


class _Invalid(Exception):
    pass


def _describe(layout: TensorLayout) -> str:
    try:
        return format_layout(layout)
    except Exception:
        return repr(layout.dims)
