"""layouts.builder: the values the parser gives, and one convention for levels of size 1."""

from layouts import parse_layout
from layouts.builder import build, dev, mem, rotate, time


def test_builds_what_the_notation_says():
    a = build(
        (13, 7), [[dev("x", 2), mem(7)], [time(2), mem(4)]], rotation=rotate({"x": 1, "y": 1})
    )
    assert a == parse_layout("(13,7)/((2_x, 7), (2_Time, 4); R@[x + y])")
    b = build((6, 8), [[dev("x", 2), mem(3, 4)], [dev("y", 2), mem(1, 12), mem(4, 1)]])
    assert b == parse_layout("((2_x, 3:4), (2_y, 1:12, 4:1))")
    w = build(
        (4, 12),
        [[dev("m", 2), mem(2)], [time(6), mem(2)]],
        rotation=rotate([("m", 3), ("n", 2)], pace=2, window=2),
        sizes={"n": 3},
    )
    assert w == parse_layout("((2_m, 2), (6_Time, 2); R@[3*m + 2*n, pace=2, window=2])")


def test_levels_of_size_one_are_left_out():
    sizes = {"x": 2, "y": 1, "z": 1}
    lay = build(
        (8, 6),
        [[dev("x", 2), dev("z", 1), mem(4)], [dev("y", 1), mem(6)]],
        broadcast=["z"],
        partial=["y"],
        sizes=sizes,
    )
    assert lay == parse_layout("((2_x, 4), (6))")
    # a rotation term on a size-1 level goes; a Time axis of size 1 takes the rotation with it
    lay = build(
        (4, 4),
        [[dev("x", 2), mem(2)], [time(2), mem(2)]],
        rotation=rotate({"x": 1, "y": 1}),
        sizes=sizes,
    )
    assert str(lay) == "((2_x, 2:2), (2_Time, 2:1); R@[x])"
    lay = build((4, 4), [[mem(4)], [time(1), mem(4)]], rotation=rotate({"x": 1}), sizes=sizes)
    assert lay == parse_layout("((4), (4))") and lay.rotation is None


def test_an_empty_dimension_is_one_memory_factor():
    assert build((1, 4), [[dev("x", 1)], [mem(4)]]) == parse_layout("((1), (4))")
    lay = build((1, 8), [[time(1)], [mem(2, 4), mem(4, 1)]])
    assert lay.dims[0][0].is_memory and lay.dims[0][0].size == 1
    assert lay.block_shape == (1, 8)
