"""A gather or scatter by a flat index array, run as the few strided copies it is made of.

Packing a block for an Alltoallv (``buf[:] = flat[index]``) and unpacking what arrives
(``flat[index] = buf``) move elements by an index array; NumPy's fancy indexing does that one
element at a time, several times slower than a copy (about 1 GB/s against 10 on our machines).
The indices a layout gives are regular: contiguous runs (a row of a block), runs of one length
at one stride (a sub-block), and sub-blocks of one shape at one stride (panels). An
:class:`IndexCopy` finds those pieces once, when a transfer is planned, and then copies each as
one strided view; an index with no such structure keeps fancy indexing.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import runs
from .joint import joint_stacks

# Pieces are worth their per-piece overhead (a view and a copy call, some microseconds) only when
# they are long; below this many elements a piece on average, fancy indexing is kept.
MIN_PIECE = 512
MIN_RUN = 16  # runs shorter than this on average are not grouped (nor worth grouping)
_MAX_RUNS = 1 << 16  # more runs than this: the pieces are short anyway (grouping is a loop)


@dataclass(frozen=True)
class Piece:
    """``shape`` elements of the indexed array from ``start`` at ``strides`` (in elements),
    positions ``offset`` .. ``offset + size`` of the packed buffer, in row-major order."""

    start: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True, eq=False)
class IndexCopy:
    """Flat positions in the indexed array, in packed order, as runs (layouts/runs.py:
    ``starts``, ``lengths``, maximal) and, where they have the structure, the strided pieces
    that cover them in order (None: use fancy indexing on :attr:`index`)."""

    starts: np.ndarray
    lengths: np.ndarray
    pieces: tuple[Piece, ...] | None
    bound: int  # the indexed array's least size (a view past its end would not be caught)
    size: int

    @classmethod
    def of(cls, index: np.ndarray, row: int | None = None) -> IndexCopy:
        """``row``: the indexed block's last dimension, if a block's, so that a run going on
        from one row's end into the next row's start is cut there (see :func:`_pieces`)."""
        index = np.asarray(index, np.int64).ravel()
        out = cls.of_runs(*runs.of_index(index), row)
        out.__dict__["index"] = index  # given: not spelled out again
        return out

    @classmethod
    def of_runs(cls, starts, lengths, row: int | None = None) -> IndexCopy:
        """The positions ``starts[i]`` .. + ``lengths[i]`` for each i in turn (``row``: as in
        :meth:`of`)."""
        starts, lengths = runs.merged(np.asarray(starts, np.int64), np.asarray(lengths, np.int64))
        if starts.size and starts.min() < 0:
            raise IndexError("negative flat index")
        size = int(lengths.sum())
        bound = int((starts + lengths).max()) if size else 0
        return cls(starts, lengths, _pieces(starts, lengths, size, row), bound, size)

    @functools.cached_property
    def index(self) -> np.ndarray:
        """Every position, in packed order (spelled out where first needed)."""
        return runs.spelled(self.starts, self.lengths)

    @functools.cached_property
    def _ends(self) -> np.ndarray:
        return np.cumsum(self.lengths)  # where each run ends in packed order

    def runs_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The runs (starts, lengths) of packed positions ``lo`` .. ``hi`` (a peer's part of a
        move's list: its offsets are summed once for all the parts)."""
        return runs.window(self.starts, self.lengths, lo, hi, self._ends)

    def part(self, lo: int, hi: int, row: int | None = None) -> IndexCopy:
        """Packed positions ``lo`` .. ``hi`` as an IndexCopy of their own (``row``: as in
        :meth:`of`)."""
        return IndexCopy.of_runs(*self.runs_in(lo, hi), row)

    def take(self, flat: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out[:] = flat[index]`` (both 1-D)."""
        copies = self._copies(flat, out)
        if copies is None:
            return np.take(flat, self.index, out=out)
        for shape, dt, start, strides, offset, packed in copies:
            dt = flat.dtype if dt is None else dt
            np.copyto(
                np.ndarray(shape, dt, out, offset, packed),
                np.ndarray(shape, dt, flat, start, strides),
            )
        return out

    def put(self, flat: np.ndarray, values: np.ndarray) -> None:
        """``flat[index] = values`` (both 1-D; ``flat`` writeable)."""
        copies = self._copies(flat, values)
        if copies is None:
            flat[self.index] = values
            return
        for shape, dt, start, strides, offset, packed in copies:
            dt = flat.dtype if dt is None else dt
            np.copyto(
                np.ndarray(shape, dt, flat, start, strides),
                np.ndarray(shape, dt, values, offset, packed),
            )

    def fill(self, flat: np.ndarray, value) -> None:
        """``flat[index] = value`` (``flat`` 1-D and writeable): a strided view per piece."""
        if self.pieces is None or not self._plain(flat, flat):
            flat[self.index] = value
            return
        size = flat.itemsize
        for p in self.pieces:
            strides = [x * size for x in p.strides]
            np.ndarray(p.shape, flat.dtype, flat, p.start * size, strides).fill(value)

    def _copies(self, flat: np.ndarray, packed: np.ndarray) -> list | None:
        """The strided copies between ``flat`` and the ``packed`` buffer (:meth:`_in_bytes`),
        or None: index element by element (no structure found, or arrays they do not fit)."""
        return self._in_bytes(flat.itemsize) if self._plain(flat, packed) else None

    def _in_bytes(self, itemsize: int) -> list | None:
        """The pieces as (shape, dtype, start, strides, offset, packed strides), in bytes and
        copied as :func:`_runs` says (packed strides None: contiguous), worked out once per
        item size: a copy per piece then costs a few microseconds, which is what sets
        MIN_PIECE. Without pieces, the stacks :func:`_joint` finds between the index and the
        packed order (runs in a repeating pattern of lengths), else None. Views are made with
        the ndarray constructor, a tenth of as_strided's cost per view (0.5 against 5 us),
        which also refuses a view past the end of the array."""
        memo = self.__dict__.setdefault("_bytes", {})
        if itemsize not in memo:
            if self.pieces is None:
                memo[itemsize] = _joint(self.index, np.arange(self.size), itemsize)
            else:
                memo[itemsize] = []
                for p in self.pieces:
                    shape, dt, strides = _runs(p.shape, itemsize, p.strides)
                    at = (p.start * itemsize, strides, p.offset * itemsize, None)
                    memo[itemsize].append((shape, dt, *at))
        return memo[itemsize]

    def _plain(self, flat: np.ndarray, other: np.ndarray) -> bool:
        """Whether ``flat`` (indexed) and ``other`` are contiguous arrays of one dtype, as
        strided views of them by element offsets assume."""
        if flat.ndim != 1 or flat.size < self.bound:
            raise IndexError(f"index up to {self.bound - 1} into an array of shape {flat.shape}")
        return flat.flags.c_contiguous and other.flags.c_contiguous and other.dtype == flat.dtype


def copy_between(
    src: IndexCopy,
    src_flat: np.ndarray,
    dst: IndexCopy,
    dst_flat: np.ndarray,
    buf: np.ndarray | None,
) -> None:
    """``dst_flat[dst.index] = src_flat[src.index]``: one strided copy per stretch where both
    sides' pieces, cut where either's pieces end, split into a common shape (a block-cyclic
    block's kept columns, (3072, 768), into a block's (36864, 64) runs: both as (3072, 12,
    64)), or where the runs the two sides share stack (:func:`_joint`), else through ``buf``
    (``src.size`` elements; None: made here, for pairs that :func:`pairs_directly`), which
    costs a second pass over them."""
    if not src.size:
        return
    if src._plain(src_flat, dst_flat) and dst._plain(dst_flat, src_flat):
        copies = _paired(src, dst, src_flat.itemsize)
        if copies is not None:
            for shape, dt, start, strides, to, to_strides in copies:
                dt = src_flat.dtype if dt is None else dt
                np.copyto(
                    np.ndarray(shape, dt, dst_flat, to, to_strides),
                    np.ndarray(shape, dt, src_flat, start, strides),
                )
            return
    if buf is None:
        buf = np.empty(src.size, src_flat.dtype)
    dst.put(dst_flat, src.take(src_flat, buf))


def pairs_directly(src: IndexCopy, dst: IndexCopy, itemsize: int) -> bool:
    """Whether :func:`copy_between` copies ``src`` into ``dst`` without a buffer (between
    contiguous flat arrays of ``itemsize``-byte elements)."""
    return _paired(src, dst, itemsize) is not None


def _paired(src: IndexCopy, dst: IndexCopy, itemsize: int) -> list | None:
    """(shape, dtype, start, strides, its start, its strides) in bytes (:func:`_runs`) for
    each stretch the two sides' pieces cut each other into, where each stretch is whole rows
    of the piece it lies in on both sides and the two split into a common shape; else None.
    Worked out once per pair (kept on ``src``, with ``dst`` so that its id stays its own)."""
    memo = src.__dict__.setdefault("_paired", {})
    key = (id(dst), itemsize)
    if key not in memo:
        copies = _pair(src.pieces, dst.pieces, src.size, itemsize)
        memo[key] = (dst, _joint(src.index, dst.index, itemsize) if copies is None else copies)
    return memo[key][1]


def _pair(a, b, size: int, itemsize: int) -> list | None:
    if a is None or b is None:
        return None
    cuts = sorted({p.offset for p in a} | {p.offset for p in b} | {size})
    out, i, j = [], 0, 0
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        while a[i].offset + math.prod(a[i].shape) <= lo:
            i += 1
        while b[j].offset + math.prod(b[j].shape) <= lo:
            j += 1
        x, y = _rows(a[i], lo, hi), _rows(b[j], lo, hi)
        common = None if x is None or y is None else _common_shape(x.shape, y.shape)
        if common is None:
            return None
        strides, to_strides = _split(x.shape, x.strides, common), _split(y.shape, y.strides, common)
        out.append(_stretch(common, x.start, strides, y.start, to_strides, itemsize))
    return out


def _stretch(shape, start, strides, to, to_strides, itemsize: int) -> tuple:
    """A stretch copying ``shape`` elements from ``start`` at ``strides`` to ``to`` at
    ``to_strides`` (in elements) as (shape, dtype, start, strides, its start, its strides)
    in bytes, copied as :func:`_runs` says."""
    shape, dt, strides, to_strides = _runs(shape, itemsize, strides, to_strides)
    return shape, dt, start * itemsize, strides, to * itemsize, to_strides


def _runs(shape: tuple[int, ...], itemsize: int, *strides) -> tuple:
    """``shape`` at each of ``strides`` (in elements; a packed side is contiguous) as
    (shape, dtype, *strides in bytes) to copy. Where the last dimension is contiguous on every
    side, its runs become single elements of a void dtype as long as they are, which NumPy
    copies in one inner loop per row instead of one loop per run (18 MiB in runs of 64
    float32: 4.1 against 4.9 ms; in runs of 16: 4.7 against 9.8). dtype None: the arrays' own."""
    if len(shape) > 1 and all(s[-1] == 1 for s in strides):
        dt = np.dtype(f"V{shape[-1] * itemsize}")
        return shape[:-1], dt, *([x * itemsize for x in s[:-1]] for s in strides)
    return shape, None, *([x * itemsize for x in s] for s in strides)


def _joint(a: np.ndarray, b: np.ndarray, itemsize: int) -> list | None:
    """Stretches as :func:`_pair` gives them copying ``a``'s positions to ``b``'s, from the
    runs the two share stacked per place in their repeating pattern
    (layouts.joint.joint_stacks), or None where they are too short."""
    stacks = joint_stacks(a, b, MIN_PIECE, MIN_RUN, _MAX_RUNS)
    return None if stacks is None else [_stretch(*s, itemsize) for s in stacks]


def _rows(piece: Piece, lo: int, hi: int) -> Piece | None:
    """Packed positions ``lo`` .. ``hi`` of ``piece`` as a piece, if they are whole rows of it
    (along its first dimension), else None."""
    inner = math.prod(piece.shape[1:])
    first, n = lo - piece.offset, hi - lo
    if first % inner or n % inner:
        return None
    start = piece.start + first // inner * (piece.strides[0] if piece.shape else 0)
    return Piece(start, (n // inner, *piece.shape[1:]), piece.strides, lo)


def _common_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The coarsest shape both ``a`` and ``b`` (of one size) become by splitting dimensions
    only, or None: the union of their suffix products, where each divides the next."""
    ends = sorted(set(_suffixes(a)) | set(_suffixes(b)))
    if any(hi % lo for lo, hi in zip(ends, ends[1:], strict=False)):
        return None
    return tuple(hi // lo for lo, hi in zip([1, *ends], ends, strict=False))[::-1]


def _suffixes(shape: tuple[int, ...]) -> list[int]:
    """The products of ``shape``'s last 1, 2, ... dimensions."""
    out, n = [], 1
    for size in reversed(shape):
        n *= size
        out.append(n)
    return out


def _split(shape: tuple[int, ...], strides, fine: tuple[int, ...]) -> list[int]:
    """``strides`` of ``shape`` for the same elements viewed in ``fine``, a splitting of it
    (no dimension of 1 but where the size is 1)."""
    out, k = [], len(fine)
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        while size > 1:  # the fine dimensions this one splits into, last first
            k -= 1
            out.append(stride)
            stride *= fine[k]
            size //= fine[k]
    return [*[0] * (len(fine) - len(out)), *out[::-1]]


def _pieces(starts, lengths, n: int, row: int | None = None) -> tuple[Piece, ...] | None:
    """The pieces covering the maximal runs (``starts``, ``lengths``: ``n`` positions) in order,
    or None where they would be too short. With ``row``, a run that crosses into a block's next
    row without being whole rows is cut at the row's start: block-cyclic sub-blocks at a row's
    end and the next row's start otherwise join into a run of another length every row, which
    no stride stacks (block-cyclic:64 into blocks of 1024 at P = 9 unpacked 1294 pieces per
    rank, 7x the time of the 15 at P = 16)."""
    if n == 0:
        return ()
    if n < MIN_PIECE:
        return None
    if row is not None and row > 1:
        starts, lengths = runs.cut_at_rows(starts, lengths, row)
    if n < MIN_RUN * starts.size:
        return None
    # runs stacked (level 2), then those pieces stacked once more (level 3)
    pieces = _stack_runs(starts, lengths)
    if pieces is None:
        return None
    pieces = _stack(pieces)
    out, offset = [], 0
    for start, shape, strides in pieces:
        out.append(Piece(start, shape, strides, offset))
        offset += int(np.prod(shape))
    if len(out) * MIN_PIECE > n:
        return None
    return tuple(out)


def _stack_runs(starts: np.ndarray, lengths: np.ndarray) -> list | None:
    """The runs (``starts``, ``lengths``) as :func:`_stack` stacks them, (start, (length,),
    (1,)) each, but found with NumPy: a loop step per stacked piece, not per run (a
    block-cyclic:64 block unpacked into a replicated one is 73 728 runs and one piece). None
    where more than _MAX_RUNS pieces would be left (the pieces are short anyway)."""
    n = starts.size
    step = np.diff(starts)
    same = lengths[1:] == lengths[:-1]  # pair k (runs k, k+1) can stack
    # a block of pairs that stack at one step ends where the step changes or a pair cannot
    ends = np.flatnonzero((step[1:] != step[:-1]) | ~same[1:] | ~same[:-1])
    if ends.size + np.count_nonzero(~same) >= _MAX_RUNS:
        return None
    last = np.append(ends, n - 2)  # the last pair of each block, in order
    block_end = last[np.searchsorted(last, np.arange(n - 1))] if n > 1 else last
    starts, lengths, step = starts.tolist(), lengths.tolist(), step.tolist()
    same, block_end = same.tolist(), block_end.tolist()
    out, i = [], 0
    while i < n:
        if i < n - 1 and same[i]:
            j = block_end[i] + 2  # runs i .. the block's last pair's second
            out.append((starts[i], (j - i, lengths[i]), (step[i], 1)))
        else:
            j = i + 1
            out.append((starts[i], (lengths[i],), (1,)))
        i = j
    return out


def _stack(pieces: list) -> list:
    """Consecutive pieces of one shape and strides whose starts step by one stride, stacked
    into one piece with a leading dimension (greedy, in order)."""
    out = []
    i = 0
    while i < len(pieces):
        start, shape, strides = pieces[i]
        j = i + 1
        step = pieces[j][0] - start if j < len(pieces) else 0
        while (
            j < len(pieces)
            and pieces[j][1] == shape
            and pieces[j][2] == strides
            and pieces[j][0] - pieces[j - 1][0] == step
        ):
            j += 1
        if j - i > 1:
            out.append((start, (j - i, *shape), (step, *strides)))
        else:
            out.append(pieces[i])
        i = j
    return out


__all__ = ["MIN_PIECE", "MIN_RUN", "IndexCopy", "Piece"]
