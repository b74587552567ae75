"""TensorLayout notation (notes/tensorlayout.md): worked examples, canonical spellings, errors,
and properties of random layouts. Serial; no MPI."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from layouts.blockmap import (
    address_contributions,
    from_memory,
    held_indices,
    level_contributions,
    local_address,
    local_addresses,
    owner,
    to_memory,
)
from layouts.data import generate_block, global_matrix
from layouts.parser import parse_layout
from layouts.sbp import SBP, Broadcast, Partial, Split, parse_sbp
from layouts.tensorlayout import LayoutError, TensorLayout, format_layout


def all_indices(shape):
    return itertools.product(*(range(n) for n in shape))


def devices(layout: TensorLayout, extra: dict[str, int] | None = None):
    """Every coordinate combination of the layout's split levels (and ``extra`` levels)."""
    sizes = {**layout.levels, **(extra or {})}
    for combo in itertools.product(*(range(n) for n in sizes.values())):
        yield dict(zip(sizes, combo, strict=True))


def check_placement(text, shape, expect_owner, expect_addr):
    """Element by element: owner() and local_address() match the notes' description, and the
    device named by the description really holds the element (held_indices)."""
    layout = parse_layout(text)
    assert layout.padded_shape == shape
    for i, j in all_indices(shape):
        want = expect_owner(i, j)
        assert owner(layout, (i, j)) == want, (i, j)
        assert local_address(layout, (i, j)) == expect_addr(i, j), (i, j)
        rows, cols = held_indices(layout, want)
        assert i in rows and j in cols
    return layout


# -- notes section 2: worked examples ----------------------------------------------------------
def test_rows_split_outer():
    layout = check_placement(
        "((4_PE, 3:8), (8:1))", (12, 8), lambda i, j: {"PE": i // 3}, lambda i, j: (i % 3) * 8 + j
    )
    for p in range(4):
        rows, cols = held_indices(layout, {"PE": p})
        assert rows.tolist() == [3 * p, 3 * p + 1, 3 * p + 2]
        assert cols.tolist() == list(range(8))
    assert layout.local_size == 24 and layout.block_shape == (3, 8)


def test_columns_split():
    layout = check_placement(
        "((12:2), (4_PE, 2:1))", (12, 8), lambda i, j: {"PE": j // 2}, lambda i, j: i * 2 + j % 2
    )
    assert held_indices(layout, {"PE": 1})[1].tolist() == [2, 3]


def test_rows_split_inner():
    layout = check_placement(
        "((3:8, 4_PE), (8:1))", (12, 8), lambda i, j: {"PE": i % 4}, lambda i, j: (i // 4) * 8 + j
    )
    assert held_indices(layout, {"PE": 1})[0].tolist() == [1, 5, 9]


def test_blocks_pe_row_major():
    check_placement(
        "((2_PE:2, 6:4), (2_PE:1, 4:1))",
        (12, 8),
        lambda i, j: {"PE": 2 * (i // 6) + j // 4},
        lambda i, j: (i % 6) * 4 + j % 4,
    )


def test_blocks_pe_column_major():
    check_placement(
        "((2_PE:1, 6:4), (2_PE:2, 4:1))",
        (12, 8),
        lambda i, j: {"PE": (i // 6) + 2 * (j // 4)},
        lambda i, j: (i % 6) * 4 + j % 4,
    )


def test_whole_board_1024x512():
    layout = parse_layout("((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))")
    assert layout.padded_shape == (1024, 512)
    assert layout.levels == {"L2B": 16, "L1B": 8, "MAB": 16, "PE": 4}
    assert layout.block_shape == (8, 8) and layout.local_size == 64
    samples = [(0, 0), (7, 3), (8, 4), (63, 31), (64, 32), (100, 200), (1023, 511), (517, 130)]
    for i, j in samples:
        assert owner(layout, (i, j)) == {
            "L2B": i // 64,
            "L1B": (i // 8) % 8,
            "MAB": j // 32,
            "PE": j % 4,
        }
        assert local_address(layout, (i, j)) == (i % 8) * 8 + (j // 4) % 8
    # Every element, vectorised: rows in groups of 8 to the L1Bs, 64 to the L2Bs; 4 consecutive
    # columns to the 4 PEs, groups of 32 columns to the MABs.
    i, j = np.arange(1024), np.arange(512)
    rows, cols = level_contributions(layout, 0), level_contributions(layout, 1)
    assert (rows["L2B"] == i // 64).all() and (rows["L1B"] == (i // 8) % 8).all()
    assert (cols["MAB"] == j // 32).all() and (cols["PE"] == j % 4).all()
    held = held_indices(layout, {"L2B": 3, "L1B": 5, "MAB": 7, "PE": 2})
    assert held[0].tolist() == list(range(3 * 64 + 5 * 8, 3 * 64 + 6 * 8))
    assert held[1].tolist() == list(range(7 * 32 + 2, 8 * 32, 4))
    assert held[0].size * held[1].size == 64


# -- notes section 3: PadLayout ----------------------------------------------------------------
def test_pad_rows():
    text = "(10,7)/((3:7, 4_PE), (7:1))"
    layout = check_placement(
        text, (12, 7), lambda i, j: {"PE": i % 4}, lambda i, j: (i // 4) * 7 + j
    )
    assert layout.logical_shape == (10, 7) and layout.is_padded
    assert format_layout(layout) == text
    assert held_indices(layout, {"PE": 2})[0].tolist() == [2, 6, 10]  # row 10 is padding
    block = generate_block(layout, {"PE": 2}, seed=5)
    assert (block[2] == 0).all()
    np.testing.assert_array_equal(block[:2], global_matrix((10, 7), 5)[[2, 6]])


def test_pad_columns():
    layout = check_placement(
        "(10,7)/((10:2), (2:1, 4_PE))",
        (10, 8),
        lambda i, j: {"PE": j % 4},
        lambda i, j: i * 2 + j // 4,
    )
    assert held_indices(layout, {"PE": 3})[1].tolist() == [3, 7]  # column 7 is padding
    block = generate_block(layout, {"PE": 3}, seed=1)
    assert (block[:, 1] == 0).all() and (block[:, 0] != 0).all()


# -- notes section 4: broadcast ----------------------------------------------------------------
@pytest.mark.parametrize("text", ["((12:8), (8:1))", "((12:8), (8:1); B@[PE])"])
def test_broadcast_full_copy_everywhere(text):
    layout = parse_layout(text)
    assert layout.levels == {}
    assert layout.replicated_levels(["PE"]) == ("PE",)
    for p in range(4):
        rows, cols = held_indices(layout, {"PE": p})
        assert rows.tolist() == list(range(12)) and cols.tolist() == list(range(8))
    assert all(local_address(layout, (i, j)) == i * 8 + j for i, j in all_indices((12, 8)))


def test_broadcast_several_levels():
    layout = parse_layout("((12:8), (8:1); B@[MAB, PE])")
    assert layout.broadcast == ("MAB", "PE")
    assert layout.replicated_levels(["MAB", "PE", "L1B"]) == ("MAB", "PE", "L1B")


def test_partial_sum_levels_are_not_replicated():
    layout = parse_layout("((12:8), (8:1); P@[z])")
    assert layout.partial == ("z",)
    assert layout.replicated_levels(["z", "x"]) == ("x",)


# -- notes section 7: rotation (Cannon's skew) -------------------------------------------------
def test_cannon_skew_rotation():
    p = 3
    a = parse_layout("((3_x, 4), (3_Time, 4); R@[x + y])")  # A[i, (i+j) % p] on device (i, j)
    b = parse_layout("((3_Time, 4), (3_y, 4); R@[x + y])")  # B[(i+j) % p, j]
    for x, y, t in itertools.product(range(p), range(p), range(p)):
        k = (x + y + t) % p
        rows, cols = held_indices(a, {"x": x, "y": y}, step=t)
        assert rows.tolist() == list(range(4 * x, 4 * x + 4))
        assert cols.tolist() == list(range(4 * k, 4 * k + 4))
        rows, cols = held_indices(b, {"x": x, "y": y}, step=t)
        assert rows.tolist() == list(range(4 * k, 4 * k + 4))
        assert cols.tolist() == list(range(4 * y, 4 * y + 4))
    paced = parse_layout("((4_Time, 2), (2_c, 2); R@[-r + 2*c, pace=2])")
    assert paced.rotation.offset == (("r", -1), ("c", 2)) and paced.rotation.pace == 2
    assert held_indices(paced, {"r": 1, "c": 1}, step=1)[0].tolist() == [6, 7]  # (-1+2+2)%4=3


# -- canonical spellings -----------------------------------------------------------------------
CANONICAL = [
    ("((4_PE, 3:8), (8:1))", "((4_PE, 3:8), (8:1))"),
    ("((4_PE, 3), (8))", "((4_PE, 3:8), (8:1))"),  # omitted strides: row-major
    ("((4_PE,3:8),(8:1))", "((4_PE, 3:8), (8:1))"),
    ("  ( ( 4_PE , 3 : 8 ) ,\n\t( 8 : 1 ) )  ", "((4_PE, 3:8), (8:1))"),
    ("((4_PE:1, 3), (8))", "((4_PE, 3:8), (8:1))"),  # stride 1 of a one-factor level
    ("(12:8, 8:1)", "((12:8), (8:1))"),  # bare-factor dims
    ("(12, 8)", "((12:8), (8:1))"),
    ("(12, (4_PE, 2))", "((12:2), (4_PE, 2:1))"),
    ("((3, 4_PE), (8))", "((3:8, 4_PE), (8:1))"),
    ("((2_PE:2, 6), (2_PE:1, 4))", "((2_PE:2, 6:4), (2_PE:1, 4:1))"),
    ("((16_L2B, 8_L1B, 8), (16_MAB, 8, 4_PE))", "((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))"),
    ("((3:1), (4:3))", "((3:1), (4:3))"),  # column-major stays column-major
    ("((5:2))", "((5:2))"),  # a gap between elements is allowed
    ("(10, 7)/((3, 4_PE), (7))", "(10,7)/((3:7, 4_PE), (7:1))"),
    ("(10,7) / ((10:2), (2:1, 4_PE))", "(10,7)/((10:2), (2:1, 4_PE))"),
    ("(12,8)/((12:8), (8:1))", "((12:8), (8:1))"),  # no padding: no prefix
    ("((12:8), (8:1); B@[ PE ])", "((12:8), (8:1); B@[PE])"),
    ("((12:8),(8:1);B@[MAB,PE])", "((12:8), (8:1); B@[MAB, PE])"),
    ("((12:8), (8:1); P@[z])", "((12:8), (8:1); P@[z])"),
    ("((12:8), (8:1); P@[z]; B@[PE])", "((12:8), (8:1); B@[PE]; P@[z])"),
    ("((2_r, 3_Time, 2), (3_c, 2); R@[r+c])", "((2_r, 3_Time, 2:2), (3_c, 2:1); R@[r + c])"),
    (
        "((3_Time, 4), (3_c, 2); R@[-r + 2*c, pace=2])",
        "((3_Time, 4:2), (3_c, 2:1); R@[-r + 2*c, pace=2])",
    ),
    (
        "((2_m, 3), (6_Time, 2); R@[3*m + 2*n, window=3, pace=2])",
        "((2_m, 3:2), (6_Time, 2:1); R@[3*m + 2*n, pace=2, window=3])",
    ),
    ("((3_Time, 4), (2); R@[r - 1*c, pace=1])", "((3_Time, 4:2), (2:1); R@[r - c])"),
    ("((2_Time:1, 2, 2_Time:2), (2))", "((2_Time:1, 2:2, 2_Time:2), (2:1))"),
]


@pytest.mark.parametrize("text, canonical", CANONICAL)
def test_canonical_form(text, canonical):
    layout = parse_layout(text)
    assert format_layout(layout) == canonical
    assert parse_layout(canonical) == layout
    assert format_layout(parse_layout(canonical)) == canonical


# -- invalid strings ---------------------------------------------------------------------------
INVALID = [
    ("", "empty"),
    ("   ", "empty"),
    ("((4_PE, 3:8), (8:1)", "expected ')'"),  # unbalanced
    ("((4_PE, 3:8), (8:1)))", "after the layout"),
    ("((4_PE, 3:8) (8:1))", "expected ')'"),
    ("((4_PE, 3:8), (8:1)) extra", "after the layout"),
    ("()", "expected a number"),
    ("((4_PE, 3:8), ())", "expected a number"),
    ("((0:1), (8:1))", "factor size 0"),  # zero size
    ("((4_PE, 0), (8))", "factor size 0"),
    ("(13,8)/((4_PE, 3:8), (8:1))", "less than the logical size 13"),  # logical > padded
    ("(10,0)/((12:8), (8:1))", "logical size 0"),
    ("(10,7,3)/((3:7, 4_PE), (7:1))", "has 3 dimensions but the layout has 2"),
    ("((2_PE, 6), (2_PE, 4))", "each needs a stride"),  # repeated level without strides
    ("((4_Time, 3), (2_Time, 4))", "each needs a stride"),
    ("((2_PE:2, 6), (2_PE:2, 4))", "do not give a bijection"),  # non-bijective device index
    ("((2_PE:1, 6), (2_PE:3, 4))", "do not give a bijection"),
    ("((4_PE:2, 3), (8))", "do not give a bijection"),
    ("((12:1), (8:1))", "memory strides overlap"),  # stride collision
    ("((12:8), (8:0))", "memory strides overlap"),
    ("(3:1, 4:4, 2:1)", "memory strides overlap"),
    ("((12:8), (8))", "give a stride for every memory axis or for none"),
    ("((4_PE, 3:8), (8:1); B@[PE])", "split by a factor and also named in B@"),
    ("((4_PE, 3:8), (8:1); P@[PE])", "split by a factor and also named in P@"),
    ("((12:8), (8:1); B@[PE, PE])", "named twice"),
    ("((12:8), (8:1); B@[PE]; P@[PE])", "named twice"),
    ("((12:8), (8:1); B@[PE]; B@[MAB])", "given twice"),
    ("((12:8), (8:1); B@[Time])", "cannot name the Time axis"),
    ("((12:8), (8:1); B@[])", "expected a name"),
    ("((12:8), (8:1); Q@[PE])", "expected B@[...], P@[...] or R@[...]"),  # unknown suffix
    ("((12:8), (8:1); R@[x + y])", "no factor is a Time axis"),  # rotation without Time
    ("((2_Time, 3), (4); R@[x, pace=0])", "pace must be a positive integer"),
    ("((2_Time, 3), (4); R@[x + x])", "appears twice in the rotation"),
    ("((2_Time, 3), (4); R@[Time])", "cannot use level Time"),
    ("((2_Time, 3), (4); R@[x]; R@[y])", "given twice"),
    ("((2_Time, 3), (4); R@[x, speed=2])", "expected pace= or window="),
    ("((2_Time, 3), (4); B@[x]; R@[x])", "cannot use level x"),
    ("((4_, 3:8), (8:1))", "expected a name"),
    ("((4_PE, 3:), (8:1))", "expected a number"),
    ("((4 PE, 3:8), (8:1))", "expected ')'"),
    ("((4_PE, 3$8), (8:1))", "unexpected character '$'"),
    ("((4_PE, -3:8), (8:1))", "expected a number"),
    ("(10,7)/", "expected '('"),
    ("(1" + "0" * 5000 + ")", "too many digits"),
    # addresses beyond int64 arithmetic (they printed wrapped), digits only ASCII
    ("((4_PE, 3:999999999999999999999999999999), (8:1))", "beyond the 4611686018427387904"),
    ("((2:9223372036854775807), (3:1))", "memory strides reach address 9223372036854775809"),
    ("((\uff14_PE, 3:8), (8:1))", "unexpected character"),
    # not a mixed radix, and too many addresses to list: said so, not called an overlap
    ("((4096:1, 2048:1), (1048576:1))", "too many to check"),
]


def test_strides_off_a_mixed_radix_are_listed_only_as_far_as_they_break_it():
    # 0, 2, 4, 3, 5, 7 then 8-address steps: distinct, though 6 million elements in all
    assert parse_layout("((3:2, 2:3), (1048576:8))").padded_shape == (6, 1048576)
    with pytest.raises(LayoutError, match="memory strides overlap"):
        parse_layout("((3:2, 2:3), (4:1, 1048576:8))")


def test_a_rotation_without_offset_is_spelled_so_it_reads_back():
    layout = parse_layout("((3_x, 2:2), (3_Time, 2:1); R@[0, pace=2])")
    assert layout.rotation.offset == () and parse_layout(str(layout)) == layout
    assert str(layout) == "((3_x, 2:2), (3_Time, 2:1); R@[0, pace=2])"
    same = parse_layout("((3_x, 2:2), (3_Time, 2:1); R@[0*x + y])")  # a zero term offsets nothing
    assert same == parse_layout("((3_x, 2:2), (3_Time, 2:1); R@[y])")


@pytest.mark.parametrize("text, phrase", INVALID)
def test_invalid_layout(text, phrase):
    with pytest.raises(LayoutError) as info:
        parse_layout(text)
    message = str(info.value)
    assert repr(text) in message  # the input, quoted
    assert phrase in message
    assert info.value.text == text


def test_direct_construction_checks_too():
    from layouts.tensorlayout import Factor

    with pytest.raises(LayoutError, match="each needs a stride"):
        TensorLayout(((Factor(2, "PE"), Factor(3)), (Factor(2, "PE"),)))
    with pytest.raises(LayoutError, match="memory strides overlap"):
        TensorLayout(((Factor(2, None, 1),), (Factor(2, None, 1),)))


# -- random valid layouts ----------------------------------------------------------------------
LEVELS = ["PE", "MAB", "x", "y"]
SPARE = ["L1B", "L2B", "z"]  # never split here: free for B@ / P@


@st.composite
def layouts(draw, time: bool = False):
    """A random valid layout as notation text (exercising the parser) with sensible limits;
    with ``time`` one factor somewhere is a Time axis (no rotation)."""
    ndim = draw(st.integers(1, 3))
    dims = [
        [
            (draw(st.integers(1, 4)), draw(st.sampled_from([None, None, *LEVELS])))
            for _ in range(draw(st.integers(1, 3)))
        ]
        for _ in range(ndim)
    ]
    if time:
        d = draw(st.integers(0, ndim - 1))
        dims[d].insert(draw(st.integers(0, len(dims[d]))), (draw(st.integers(2, 3)), "Time"))
    flat = [f for dim in dims for f in dim]
    padded = [math.prod(n for n, _ in dim) for dim in dims]
    assume(math.prod(padded) <= 256)
    assume(math.prod(n for n, lv in flat if lv) <= 32)
    # Device strides: mixed radix over a random order of the level's factors when it repeats.
    strides: dict[int, int | None] = {}
    for level in LEVELS:
        where = [k for k, (_, lv) in enumerate(flat) if lv == level]
        if len(where) == 1:
            strides[where[0]] = draw(st.sampled_from([None, 1]))
        elif where:
            acc = 1
            for k in draw(st.permutations(where)):
                strides[k], acc = acc, acc * flat[k][0]
    # Memory strides: none (row-major) or a random order with optional gaps.
    mem = [k for k, (_, lv) in enumerate(flat) if lv is None]
    if mem and draw(st.booleans()):
        acc = 1
        for k in draw(st.permutations(mem)):
            strides[k] = acc
            acc *= flat[k][0] + draw(st.sampled_from([0, 0, 1]))
    texts, k = [], 0
    for dim in dims:
        parts = []
        for n, lv in dim:
            s = strides.get(k)
            parts.append(f"{n}" + (f"_{lv}" if lv else "") + ("" if s is None else f":{s}"))
            k += 1
        texts.append("(" + draw(st.sampled_from([", ", ",", " , "])).join(parts) + ")")
    body = ", ".join(texts)
    spare = draw(st.lists(st.sampled_from(SPARE), unique=True, max_size=3))
    cut = draw(st.integers(0, len(spare)))
    if spare[:cut]:
        body += "; B@[" + ", ".join(spare[:cut]) + "]"
    if spare[cut:]:
        body += "; P@[" + ", ".join(spare[cut:]) + "]"
    text = "(" + body + ")"
    if draw(st.booleans()):
        logical = [draw(st.integers(1, p)) for p in padded]
        text = "(" + ",".join(map(str, logical)) + ")/" + text
    return text


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@SETTINGS
@given(layouts())
def test_round_trip(text):
    layout = parse_layout(text)
    canonical = format_layout(layout)
    assert parse_layout(canonical) == layout
    assert format_layout(parse_layout(canonical)) == canonical
    assert hash(parse_layout(canonical)) == hash(layout)


@SETTINGS
@given(layouts())
def test_every_element_exactly_once_per_replica(text):
    layout = parse_layout(text)
    replicas = {lv: 2 for lv in layout.broadcast}  # give each B@ level a size of 2
    copies = np.zeros(layout.padded_shape, dtype=np.int64)
    local = local_addresses(layout)
    assert local.shape == layout.block_shape
    assert np.unique(local).size == local.size  # no two elements share an address
    assert local.min() >= 0 and local.max() < layout.local_size
    for coords in devices(layout, replicas):
        held = held_indices(layout, coords)
        assert tuple(idx.size for idx in held) == layout.block_shape
        copies[np.ix_(*held)] += 1
    assert (copies == math.prod(replicas.values())).all()


@SETTINGS
@given(layouts(time=True))
def test_time_axis_each_element_once_over_all_steps(text):
    layout = parse_layout(text)
    assert layout.time_size > 1
    copies = np.zeros(layout.padded_shape, dtype=np.int64)
    for step in range(layout.time_size):
        for coords in devices(layout):
            held = held_indices(layout, coords, step)
            copies[np.ix_(*held)] += 1
            index = tuple(int(idx[-1]) for idx in held)
            assert owner(layout, index) == {**coords, "Time": step}
    assert (copies == 1).all()
    assert parse_layout(format_layout(layout)) == layout


@SETTINGS
@given(layouts())
def test_owner_and_address_agree_with_held_indices(text):
    layout = parse_layout(text)
    local = local_addresses(layout)
    for coords in devices(layout):
        held = held_indices(layout, coords)
        for pos in all_indices(layout.block_shape):
            index = tuple(int(held[d][p]) for d, p in enumerate(pos))
            assert owner(layout, index) == coords
            assert local_address(layout, index) == local[pos]
        # The same, vectorised, from the per-dimension address contributions.
        addr = sum(np.ix_(*(address_contributions(layout, d)[idx] for d, idx in enumerate(held))))
        np.testing.assert_array_equal(addr, local)


@SETTINGS
@given(layouts(), st.integers(0, 2**32))
def test_generate_block_matches_global_matrix(text, seed):
    layout = parse_layout(text)
    padded = np.zeros(layout.padded_shape)
    padded[tuple(slice(0, n) for n in layout.logical_shape)] = global_matrix(
        layout.logical_shape, seed
    )
    for coords in devices(layout):
        block = generate_block(layout, coords, seed)
        np.testing.assert_array_equal(block, padded[np.ix_(*held_indices(layout, coords))])
        np.testing.assert_array_equal(from_memory(layout, to_memory(layout, block)), block)


LAYOUT_CHARS = st.sampled_from(
    list("()[],:_;@/+-*= 0123456789")
    + ["PE", "Time", "B@[", "R@[", "P@[", "pace=", "window=", "x", "\t"]
)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(LAYOUT_CHARS, max_size=30).map("".join)))
def test_garbage_gives_layout_or_layout_error(text):
    try:
        layout = parse_layout(text)
    except LayoutError as err:
        assert repr(text) in str(err)
        return
    assert isinstance(layout, TensorLayout)
    assert parse_layout(format_layout(layout)) == layout


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(layouts(), st.data())
def test_mutated_layouts_never_crash(text, data):
    """Damage a valid layout (delete, insert or replace one character)."""
    pos = data.draw(st.integers(0, len(text)))
    char = data.draw(st.sampled_from(list("()[],:_;@/+-*=0123456789 PExT")))
    how = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    mutated = {
        "delete": text[:pos] + text[pos + 1 :],
        "insert": text[:pos] + char + text[pos:],
        "replace": text[:pos] + char + text[pos + 1 :],
    }[how]
    try:
        layout = parse_layout(mutated)
    except LayoutError:
        return
    assert parse_layout(format_layout(layout)) == layout


# -- SBP -----------------------------------------------------------------------------------------
def test_parse_sbp_valid():
    sbp = parse_sbp("[x=S(0), y=S(1), z=P]")
    assert sbp.placements == (("x", Split(0)), ("y", Split(1)), ("z", Partial()))
    assert str(sbp) == "[x=S(0), y=S(1), z=P]"
    assert parse_sbp(" [ a = S ( 1 ) ,b=B ] ").placements == (("a", Split(1)), ("b", Broadcast()))
    assert parse_sbp("[]") == SBP(())


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("x=S(0)", "is written"),
        ("[x=S(0)", "is written"),
        ("[x=S]", "cannot read placement 'x=S'"),
        ("[x=Q]", "cannot read placement"),
        ("[x=S(a)]", "cannot read placement"),
        ("[=S(0)]", "cannot read placement"),
        ("[x=S(0),]", "cannot read placement ''"),
    ],
)
def test_parse_sbp_invalid(text, phrase):
    with pytest.raises(LayoutError) as info:
        parse_sbp(text)
    assert repr(text) in str(info.value) and phrase in str(info.value)


def test_sbp_3d_summa_two_axes_split_one_dim():
    layout = parse_sbp("[x=S(0), y=S(1), z=S(1)]").to_layout((8, 8), {"x": 2, "y": 2, "z": 2})
    assert format_layout(layout) == "((2_x, 4:2), (2_y, 2_z, 2:1))"
    for i, j in all_indices((8, 8)):  # dim 1: y outer, z inner
        assert owner(layout, (i, j)) == {"x": i // 4, "y": j // 4, "z": (j // 2) % 2}


def test_sbp_pads_non_divisible_shapes():
    layout = parse_sbp("[x=S(0), y=S(1)]").to_layout((10, 7), {"x": 3, "y": 2})
    assert layout.logical_shape == (10, 7) and layout.padded_shape == (12, 8)
    assert format_layout(layout) == "(10,7)/((3_x, 4:4), (2_y, 4:1))"


def test_sbp_broadcast_and_partial():
    layout = parse_sbp("[x=S(0), z=P]").to_layout((4, 4), {"x": 2, "y": 3, "z": 2})
    assert layout.partial == ("z",)
    assert layout.replicated_levels(["x", "y", "z"]) == ("y",)


@pytest.mark.parametrize(
    "text, mesh, phrase",
    [
        ("[w=S(0)]", {"x": 2}, "mesh has no axis 'w'"),
        ("[x=S(0), x=S(1)]", {"x": 2}, "two placements"),
        ("[x=S(2)]", {"x": 2}, "S(2) splits a dimension"),
    ],
)
def test_sbp_to_layout_errors(text, mesh, phrase):
    with pytest.raises(LayoutError) as info:
        parse_sbp(text).to_layout((4, 4), mesh)
    assert repr(text) in str(info.value) and phrase in str(info.value)
