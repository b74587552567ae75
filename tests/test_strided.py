"""layouts.strided: a gather or scatter by an index array, run as strided pieces, moves exactly
what fancy indexing moves, and finds the pieces the layouts' indices are made of."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layouts import strided
from layouts.strided import IndexCopy


def given_pieces(index: np.ndarray, pieces=None) -> IndexCopy:
    """An IndexCopy of ``index`` with ``pieces`` in place of those it finds (None: none)."""
    return dataclasses.replace(IndexCopy.of(index), pieces=pieces)


def every_piece():
    """Pieces however short (the defaults keep fancy indexing for small ones)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(strided, "MIN_PIECE", 1)
    patch.setattr(strided, "MIN_RUN", 1)
    return patch


@st.composite
def views(draw):
    """(positions, n): the flat positions of 1-3 disjoint strided, transposed views of an
    array of n elements, concatenated (no position twice)."""
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=3, max_size=3)))
    base = np.arange(int(np.prod(shape))).reshape(shape)
    cuts = sorted(set(draw(st.lists(st.integers(1, shape[0]), max_size=2))) | {shape[0]})
    parts, lo = [], 0
    for hi in cuts:
        part = base[lo:hi]
        for axis in range(3):
            step = draw(st.sampled_from([1, 1, 2, -1]))
            part = part[(slice(None),) * axis + (slice(None, None, step),)]
        parts.append(part.transpose(draw(st.permutations([0, 1, 2]))).ravel())
        lo = hi
    return np.concatenate(parts), base.size


@settings(max_examples=200, deadline=None)
@given(views(), st.sampled_from([None, 1, 2, 3, 5, 7]))
def test_take_and_put_are_fancy_indexing(case, row):
    index, n = case
    patch = every_piece()
    try:
        copy = IndexCopy.of(index, row)
    finally:
        patch.undo()
    flat = np.random.default_rng(n).random(n)
    out = np.empty(index.size)
    assert np.array_equal(copy.take(flat, out), flat[index])
    values = np.random.default_rng(1).random(index.size)
    got, want = np.zeros(n), np.zeros(n)
    copy.put(got, values)
    want[index] = values
    assert np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(views())
def test_take_and_put_by_joint_stacks_are_fancy_indexing(case):
    """Without pieces, take and put copy by the stacks :func:`strided._joint` finds (runs in
    up to layouts.joint.MAX_PERIOD interleaved classes), however short here, exactly as fancy
    indexing."""
    index, n = case
    copy = given_pieces(index)
    flat = np.random.default_rng(n).random(n)
    values = np.random.default_rng(1).random(index.size)
    got, want = np.zeros(n), np.zeros(n)
    want[index] = values
    patch = every_piece()
    try:
        assert copy._in_bytes(8) is not None
        assert np.array_equal(copy.take(flat, np.empty(index.size)), flat[index])
        copy.put(got, values)
    finally:
        patch.undo()
    assert np.array_equal(got, want)


def test_layout_indices_become_few_pieces():
    m, k, w = 256, 512, 64  # SUMMA's panels: (k / w, m, w) in memory, held as (m, k)
    panels = (np.arange(k) // w)[None, :] * m * w + np.arange(m)[:, None] * w + np.arange(k) % w
    assert [p.shape for p in IndexCopy.of(panels.ravel()).pieces] == [(m, k // w, w)]
    blocks = np.arange(512 * 512).reshape(512, 512)  # a block's two column halves in turn
    halves = np.concatenate([blocks[:, :256].ravel(), blocks[:, 256:].ravel()])
    assert [p.shape for p in IndexCopy.of(halves).pieces] == [(2, 512, 256)]
    assert [p.shape for p in IndexCopy.of(np.arange(4096)).pieces] == [(4096,)]
    assert IndexCopy.of(np.random.default_rng(0).permutation(4096)).pieces is None


def test_runs_are_cut_where_a_row_ends_unless_whole_rows():
    """Sub-blocks at a row's end and the next row's start (block-cyclic blocks 0, 3, 6 of 7 per
    row) are one piece per row pattern when runs are cut at the row; without the row's length
    each row's last and the next row's first join, and nothing stacks. Whole rows stay one."""
    w, width = 4, 7 * 4
    index = np.concatenate([r * width + c * w + np.arange(w) for r in range(16) for c in (0, 3, 6)])
    patch = every_piece()
    try:
        assert [(p.shape, p.strides) for p in IndexCopy.of(index, width).pieces] == [
            ((16, 3, 4), (width, 12, 1))
        ]
        assert len(IndexCopy.of(index).pieces) > 16
        rows = IndexCopy.of(np.arange(3 * width, 9 * width), width)
        assert [(p.shape, p.strides) for p in rows.pieces] == [((6 * width,), (1,))]
    finally:
        patch.undo()


def test_an_array_too_small_is_refused():
    copy = IndexCopy.of(np.arange(10, 4096))
    with pytest.raises(IndexError):
        copy.take(np.zeros(100), np.empty(4086))


def test_a_strided_array_is_indexed_element_by_element():
    copy = IndexCopy.of(np.arange(1024))
    flat = np.arange(4096.0)[::2]  # 1-D, not contiguous: the pieces' strides do not hold
    assert np.array_equal(copy.take(flat, np.empty(1024)), flat[:1024])


@settings(max_examples=60, deadline=None)
@given(views(), views())
def test_copy_between_equals_fancy_indexing(src, dst):
    (s, ns), (d, nd) = src, dst
    n = min(s.size, d.size)
    s, d = s[:n], d[:n]
    patch = every_piece()
    try:
        copy_from, copy_to = IndexCopy.of(s), IndexCopy.of(d)
    finally:
        patch.undo()
    a = np.arange(ns, dtype=np.float32) + 1
    want = np.zeros(nd, np.float32)
    want[d] = a[s]
    got = np.zeros(nd, np.float32)
    strided.copy_between(copy_from, a, copy_to, got, np.empty(n, np.float32))
    assert np.array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(views(), views())
def test_copy_between_by_joint_stacks_equals_fancy_indexing(src, dst):
    """Where neither side has pieces, the runs the two share are stacked (strided._joint):
    exactly what fancy indexing moves."""
    (s, ns), (d, nd) = src, dst
    n = min(s.size, d.size)
    s, d = s[:n], d[:n]
    copy_from, copy_to = given_pieces(s), given_pieces(d)
    a = np.arange(ns, dtype=np.float32) + 1
    want, got = np.zeros(nd, np.float32), np.zeros(nd, np.float32)
    want[d] = a[s]
    patch = every_piece()
    try:
        assert strided.pairs_directly(copy_from, copy_to, 4)
        strided.copy_between(copy_from, a, copy_to, got, None)
    finally:
        patch.undo()
    assert np.array_equal(got, want)


def test_copy_between_one_piece_each_copies_directly():
    block = np.arange(64, dtype=np.float32).reshape(8, 8)
    patch = every_piece()
    try:
        copy_from = IndexCopy.of(np.arange(64).reshape(8, 8)[2:6, 1:5])  # a 4 x 4 sub-block
        copy_to = IndexCopy.of(np.arange(32).reshape(4, 8)[:, 2:6])
    finally:
        patch.undo()
    out = np.zeros((4, 8), np.float32)
    strided.copy_between(copy_from, block.ravel(), copy_to, out.ravel(), np.empty(0, np.float32))
    assert np.array_equal(out[:, 2:6], block[2:6, 1:5])  # an empty buffer: never used


def test_runs_are_copied_as_void_elements_only_where_contiguous():
    """A piece's contiguous rows are copied as single elements of a void dtype as long as a
    row; a piece whose last dimension steps over elements keeps the array's dtype."""
    patch = every_piece()
    try:
        sub = IndexCopy.of(np.arange(64).reshape(8, 8)[2:6, 1:5])  # a 4 x 4 sub-block
    finally:
        patch.undo()
    [(shape, dtype, *_)] = sub._in_bytes(4)
    assert shape == (4,) and dtype == np.dtype("V16")
    index = np.arange(64).reshape(8, 8)[:4, 1::2]  # every other column of 4 rows
    columns = given_pieces(index.ravel(), (strided.Piece(1, (4, 4), (8, 2), 0),))
    [(shape, dtype, *_)] = columns._in_bytes(4)
    assert shape == (4, 4) and dtype is None
    flat = np.arange(64, dtype=np.float32)
    assert np.array_equal(columns.take(flat, np.empty(16, np.float32)), flat[index.ravel()])
    out = np.zeros(64, np.float32)
    columns.put(out, np.arange(16, dtype=np.float32) + 1)
    want = np.zeros(64, np.float32)
    want[index.ravel()] = np.arange(16) + 1
    assert np.array_equal(out, want)


def test_runs_of_two_lengths_in_turn_are_two_stacks():
    """Each row of a (100, 384) block sends 84 contiguous elements that land in a row of a
    block 342 wide as 20 and, 128 further on, 64 (a tile column of block-cyclic:64 into a
    block whose columns do not start on a tile): the destination's runs alternate in length,
    so it has no pieces of one shape, yet the copy is two strided copies, no buffer, and so
    are packing and unpacking by the destination's index."""
    rows = np.arange(100)[:, None]
    a = (rows * 384 + np.arange(236, 320)).ravel()
    b = (rows * 342 + np.r_[0:20, 148:212]).ravel()
    copy_from, copy_to = IndexCopy.of(a, 384), IndexCopy.of(b, 342)
    assert copy_to.pieces is None
    assert strided.pairs_directly(copy_from, copy_to, 4)
    assert len(strided._paired(copy_from, copy_to, 4)) == 2
    src = np.arange(100 * 384, dtype=np.float32)
    got, want = np.zeros(100 * 342, np.float32), np.zeros(100 * 342, np.float32)
    want[b] = src[a]
    strided.copy_between(copy_from, src, copy_to, got, None)
    assert np.array_equal(got, want)
    # packing and unpacking by that index alone (an Alltoallv's buffer): two copies as well
    assert len(copy_to._in_bytes(4)) == 2
    assert np.array_equal(copy_to.take(got, np.empty(b.size, np.float32)), got[b])
    unpacked = np.zeros(100 * 342, np.float32)
    copy_to.put(unpacked, src[a])
    assert np.array_equal(unpacked, want)


@pytest.mark.parametrize("lengths", [(24, 64, 64, 64, 64, 64), (4, 24, 64, 64, 64, 64, 64, 64, 64)])
def test_a_row_of_several_runs_is_one_stack_per_run(lengths):
    """Rows that cross 6 or 9 tiles (SUMMA's A at 5000x3000x4000 over 6 ranks, T10's from
    block-cyclic:64): the pattern repeats every row, so each run of a row is one stack."""
    rows, gaps = (
        np.arange(50)[:, None],
        np.cumsum((0,) + lengths[:-1]) + 128 * np.arange(len(lengths)),
    )
    row = np.concatenate([g + np.arange(n) for g, n in zip(gaps, lengths, strict=True)])
    b = (rows * (row[-1] + 7) + row).ravel()
    copy_to = given_pieces(b)
    assert len(copy_to._in_bytes(4)) == len(lengths)
    values = np.arange(b.size, dtype=np.float32)
    got, want = np.zeros(b.max() + 1, np.float32), np.zeros(b.max() + 1, np.float32)
    want[b] = values
    copy_to.put(got, values)
    assert np.array_equal(got, want)


def test_many_runs_at_one_step_are_one_piece():
    """73 728 runs of 64 at a step of 128 (a block-cyclic:64 block's columns in a replicated
    block, P = 2) are one (73728, 64) piece: found with NumPy, not by a loop per run, and no
    longer left to fancy indexing for having more than _MAX_RUNS runs."""
    runs = 73728
    index = (np.arange(runs) * 128 + 64)[:, None] + np.arange(64)
    copy = IndexCopy.of(index.ravel(), 3072)
    assert [(p.shape, p.strides) for p in copy.pieces] == [((runs, 64), (128, 1))]
    flat = np.arange(runs * 128 + 128, dtype=np.float32)
    assert np.array_equal(copy.take(flat, np.empty(copy.size, np.float32)), flat[index.ravel()])


def test_copy_between_splits_two_pieces_into_a_common_shape():
    """One piece each whose shapes split into a common one is one copy, no buffer: the left
    half of every row of a 16 x 16 block, (16, 8), into runs of 4 every 8, (32, 4), as
    (16, 2, 4); a contiguous piece into the runs and back likewise."""
    patch = every_piece()
    try:
        halves = IndexCopy.of(np.arange(256).reshape(16, 16)[:, :8])
        runs = IndexCopy.of(np.arange(256).reshape(32, 8)[:, :4])
        dense = IndexCopy.of(np.arange(10, 138))
    finally:
        patch.undo()
    none = np.empty(0, np.float32)  # a buffer used would fail: it is empty
    src = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    strided.copy_between(halves, src, runs, out, none)
    assert np.array_equal(out.reshape(32, 8)[:, :4], src.reshape(16, 16)[:, :8].reshape(32, 4))
    out = np.zeros(256, np.float32)
    strided.copy_between(dense, src, runs, out, none)
    assert np.array_equal(out.reshape(32, 8)[:, :4].ravel(), src[10:138])
    back = np.zeros(256, np.float32)
    strided.copy_between(runs, out, dense, back, none)
    assert np.array_equal(back[10:138], src[10:138])


def test_copy_between_cuts_pieces_at_each_others_ends():
    """One piece into two (the kept columns of a block into two panels of runs) is two direct
    copies, cut where the panels meet, with no buffer; a cut through a row is not taken."""
    patch = every_piece()
    try:
        cols = IndexCopy.of(np.arange(128).reshape(16, 8)[:, :4])  # (16, 4) at stride 8
        grid = np.arange(256).reshape(16, 16)
        panels = IndexCopy.of(np.concatenate([grid[:8, :4].ravel(), grid[8:12, 4:12].ravel()]))
        odd = IndexCopy.of(np.concatenate([grid[:3, :2].ravel(), grid[8:, 8:12].ravel()[:58]]))
    finally:
        patch.undo()
    assert len(panels.pieces) == 2
    src = np.arange(128, dtype=np.float32)
    out = np.zeros(256, np.float32)
    strided.copy_between(cols, src, panels, out, np.empty(0, np.float32))
    want = np.zeros(256, np.float32)
    want[panels.index] = src[cols.index]
    assert np.array_equal(out, want)
    assert odd.pieces is not None
    assert strided._paired(cols, odd, 4) is None  # the 6 elements end inside a row of cols
