"""layouts.runs: a move's positions as runs list exactly the positions, and an IndexCopy made
from runs (a transfer's, a peer's part of one) is the one made from the positions themselves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_strided import views

from layouts import runs
from layouts.strided import IndexCopy


@settings(max_examples=200, deadline=None)
@given(views(), st.data())
def test_runs_list_the_positions_and_any_window_of_them(case, data):
    index, _ = case
    starts, lengths = runs.of_index(index)
    assert (lengths > 0).all()
    assert np.array_equal(runs.spelled(starts, lengths), index)
    assert runs.merged(starts, lengths)[0].size == starts.size  # maximal already
    lo = data.draw(st.integers(0, index.size))
    hi = data.draw(st.integers(lo, index.size))
    assert np.array_equal(
        runs.spelled(*runs.merged(*runs.window(starts, lengths, lo, hi))), index[lo:hi]
    )
    offsets = np.array([lo, hi]) if hi < index.size else np.array([lo])
    counts = np.ones_like(offsets) if lo < index.size else np.zeros_like(offsets)
    want = np.where(counts > 0, index[np.minimum(offsets, index.size - 1)], 0)
    assert np.array_equal(runs.at(starts, lengths, offsets, counts), want)
    one = (np.diff(index[lo:hi]) == 1).all()
    assert runs.one_run_each(lengths, [lo], [hi - lo]) == bool(one)


@settings(max_examples=200, deadline=None)
@given(views(), st.integers(2, 9))
def test_runs_not_whole_rows_are_cut_at_every_row_start_inside_them(case, row):
    index, _ = case
    starts, lengths = runs.cut_at_rows(*runs.of_index(index), row)
    assert np.array_equal(runs.spelled(starts, lengths), index)
    for s, n in zip(starts.tolist(), lengths.tolist(), strict=True):
        whole = s % row == 0 and n % row == 0
        assert whole or all((s + k) % row for k in range(1, n)), (s, n)


@settings(max_examples=100, deadline=None)
@given(views(), st.sampled_from([None, 2, 3, 7]), st.data())
def test_an_index_copy_of_runs_or_of_a_part_is_that_of_its_positions(case, row, data):
    index, _ = case
    whole = IndexCopy.of(index, row)
    lo = data.draw(st.integers(0, index.size))
    hi = data.draw(st.integers(lo, index.size))
    for got, want in [
        (IndexCopy.of_runs(*runs.of_index(index), row), whole),
        (whole.part(lo, hi, row), IndexCopy.of(index[lo:hi], row)),
    ]:
        assert got.pieces == want.pieces
        assert (got.size, got.bound) == (want.size, want.bound)
        assert np.array_equal(got.index, want.index)


def test_positions_spelled_out_only_when_asked():
    """A block's 2048 rows of 64 from every other column block: 2048 runs, no positions."""
    copy = IndexCopy.of_runs(np.arange(2048) * 128, np.full(2048, 64), 128)
    assert copy.size == 2048 * 64 and len(copy.pieces) == 1
    assert "index" not in copy.__dict__
    assert np.array_equal(copy.index, (np.arange(2048)[:, None] * 128 + np.arange(64)).ravel())
