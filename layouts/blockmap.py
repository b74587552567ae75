"""Block maps: what each device holds under a layout, computed locally, without communication.

Every device's holding is a Cartesian product of one index set per dimension, so everything here
works per dimension on vectors of length ``padded_shape[d]`` and combines them by broadcasting.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from topology import radix

from .strided import IndexCopy
from .tensorlayout import LayoutError, TensorLayout

Coords = Mapping[str, int]


def grain(layout: TensorLayout, d: int) -> int:
    """How many consecutive indices of dimension d, from a multiple of it, share every level's
    digit (Time's too): the product of the sizes of the dimension's innermost memory factors."""
    out = 1
    for f in reversed(layout.dims[d]):
        if not f.is_memory:
            break
        out *= f.size
    return out


def grains(layout: TensorLayout) -> tuple[int, ...]:
    """:func:`grain` of every dimension."""
    return tuple(grain(layout, d) for d in range(layout.ndim))


@lru_cache(maxsize=8)
def _digits(layout: TensorLayout, d: int, step: int = 1) -> np.ndarray:
    """(padded_d / step, n_factors) mixed-radix digits of indices 0, step, 2 step, ... of
    dimension d."""
    idx = np.arange(0, layout.padded_shape[d], step, dtype=np.int64)
    return np.stack(radix.digits(idx, [f.size for f in layout.dims[d]]), axis=1)


@lru_cache(maxsize=32)
def level_contributions(layout: TensorLayout, d: int, step: int = 1) -> dict[str, np.ndarray]:
    """For dimension d: {level: contribution of each index to that level's device index}.

    The Time axis appears under the key ``"Time"``. A device index is the sum over dimensions.
    With ``step`` (dividing :func:`grain`), of indices 0, step, 2 step, ... only: each stands
    for the ``step`` indices from it, which contribute alike (vectors ``step`` times shorter,
    however large the dimension: what counting the elements ranks exchange uses).
    """
    digits = _digits(layout, d, step)
    out: dict[str, np.ndarray] = {}
    for k, f in enumerate(layout.dims[d]):
        if not f.is_memory:
            part = digits[:, k] * f.stride
            out[f.level] = out[f.level] + part if f.level in out else part
    return out


@lru_cache(maxsize=32)
def address_contributions(layout: TensorLayout, d: int) -> np.ndarray:
    """For dimension d: each index's contribution to its local address (memory digits x strides)."""
    digits = _digits(layout, d)
    addr = np.zeros(digits.shape[0], dtype=np.int64)
    for k, f in enumerate(layout.dims[d]):
        if f.is_memory:
            addr += digits[:, k] * f.stride
    return addr


def time_chunk(layout: TensorLayout, coords: Coords, step: int = 0) -> int:
    """The Time chunk a device holds at ``step`` (the head of its window; 0 without Time)."""
    return time_chunks(layout, coords, step)[0]


def time_chunks(layout: TensorLayout, coords: Coords, step: int = 0) -> list[int]:
    """The Time chunks a device holds at ``step``, head first ([0] without a Time axis)."""
    n = layout.time_size
    if n == 1:
        return [0]
    if layout.rotation is None:
        return [step % n]
    return layout.rotation.chunks(coords, step, n)


def check_coords(layout: TensorLayout, coords: Coords) -> None:
    rotated = [lv for lv, _ in layout.rotation.offset] if layout.rotation is not None else []
    for lv in [*layout.levels, *rotated]:  # (a level only the rotation names: the mesh's size)
        if lv not in coords:
            raise LayoutError(str(layout), f"no coordinate given for level {lv}")
    for lv, size in layout.levels.items():
        if not 0 <= coords[lv] < size:
            raise LayoutError(
                str(layout), f"coordinate {coords[lv]} is outside level {lv} of size {size}"
            )


def held_indices(layout: TensorLayout, coords: Coords, step: int = 0) -> tuple[np.ndarray, ...]:
    """Per dimension, the (padded) global indices a device holds at ``step``, increasing.

    Padding indices (>= the logical size) are included: they exist in device memory.
    """
    return _held(layout, _key(layout, coords), step if layout.time_size > 1 else 0)


def _key(layout: TensorLayout, coords: Coords) -> tuple[tuple[str, int], ...]:
    check_coords(layout, coords)
    names = set(layout.levels)
    if layout.rotation is not None:
        names |= {lv for lv, _ in layout.rotation.offset}
    return tuple(sorted((lv, int(coords[lv])) for lv in names))


@lru_cache(maxsize=4096)
def _held(layout: TensorLayout, key: tuple[tuple[str, int], ...], step: int):
    coords = dict(key)
    target = {lv: coords[lv] for lv in layout.levels}
    chunks = time_chunks(layout, coords, step)
    target["Time"] = chunks[0]
    out = []
    for d in range(layout.ndim):
        contrib = level_contributions(layout, d)
        mask = np.ones(layout.padded_shape[d], dtype=bool)
        for lv, vec in contrib.items():
            if lv == "Time" and len(chunks) > 1:  # a window: one Time factor, in this dim
                mask &= np.isin(vec, chunks)
                continue
            # This dim's part of the level index must be the part of the target it can hold:
            # decode the target into this dim's factors by masking with the other dims' digits.
            mask &= vec == _dim_part(layout, d, lv, target[lv])
        idx = np.flatnonzero(mask)
        idx.flags.writeable = False
        out.append(idx)
    return tuple(out)


def _dim_part(layout: TensorLayout, d: int, level: str, value: int) -> int:
    """The part of ``value`` (a device index on ``level``) carried by dimension d's factors."""
    part = 0
    for dd, dim in enumerate(layout.dims):
        for f in dim:
            if f.level == level and dd == d:
                part += ((value // f.stride) % f.size) * f.stride
    return part


def local_addresses(layout: TensorLayout) -> np.ndarray:
    """Local address of every element of a device's block, as an array of ``block_shape``.

    The same for every device: the block's elements, in increasing global index order per
    dimension, go to these addresses of the device's local memory.
    """
    addr = np.zeros(layout.block_shape, dtype=np.int64)
    for d, idx in enumerate(_memory_only_indices(layout)):
        shape = [1] * layout.ndim
        shape[d] = idx.size
        part = address_contributions(layout, d)[idx]
        time = level_contributions(layout, d).get("Time")
        if time is not None and layout.window > 1:
            part = part + time[idx] * layout.chunk_span  # slot of the chunk in the window
        addr = addr + part.reshape(shape)
    return addr


def _memory_only_indices(layout: TensorLayout) -> tuple[np.ndarray, ...]:
    """Indices of device 0 at chunks 0..window-1: the memory digits in enumeration order."""
    out = []
    for d in range(layout.ndim):
        mask = np.ones(layout.padded_shape[d], dtype=bool)
        for lv, vec in level_contributions(layout, d).items():
            mask &= vec < layout.window if lv == "Time" else vec == 0
        out.append(np.flatnonzero(mask))
    return tuple(out)


def to_memory(layout: TensorLayout, block: np.ndarray) -> np.ndarray:
    """Scatter a block (held order) into a flat local-memory buffer of ``local_size``."""
    buf = np.zeros(layout.local_size, dtype=block.dtype)
    _addresses(layout).put(buf, block.reshape(-1))
    return buf


@lru_cache(maxsize=8)
def _addresses(layout: TensorLayout) -> IndexCopy:
    return IndexCopy.of(local_addresses(layout))


def from_memory(layout: TensorLayout, buf: np.ndarray) -> np.ndarray:
    """Gather a block (held order) from a flat local-memory buffer."""
    return buf[local_addresses(layout)]


def owner(layout: TensorLayout, index: tuple[int, ...]) -> dict[str, int]:
    """The device index on every named level (and the Time chunk) of global element ``index``.

    Levels the layout does not name (replicated, partial, rotation-only) are not included:
    every coordinate on them holds a copy (or, for rotations, the chunk decides).
    """
    if len(index) != layout.ndim:
        raise LayoutError(
            str(layout),
            f"index {index} has {len(index)} coordinates, layout has {layout.ndim} dimensions",
        )
    out: dict[str, int] = {}
    for d, i in enumerate(index):
        if not 0 <= i < layout.padded_shape[d]:
            raise LayoutError(
                str(layout),
                f"index {i} is outside dimension {d} (padded size {layout.padded_shape[d]})",
            )
        for lv, vec in level_contributions(layout, d).items():
            out[lv] = out.get(lv, 0) + int(vec[i])
    return out


def local_address(layout: TensorLayout, index: tuple[int, ...]) -> int:
    """Local address of global element ``index`` on the device that holds it."""
    return int(sum(address_contributions(layout, d)[i] for d, i in enumerate(index)))
