"""The user's layouts by name (layouts.named): coverage, ScaLAPACK block-cyclic ownership,
explicit layouts with their mesh, and one-line errors for bad specs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from layouts import LayoutError, local_address, parse_layout
from layouts.blockmap import held_indices
from layouts.named import grid, parse_mesh, split_mesh, user_layout
from topology import AbstractMesh, MeshError

NAMED = [
    "rows",
    "cols",
    "block",
    "block-cyclic:1",
    "block-cyclic:2",
    "block-cyclic:3",
    "block-cyclic:64",
]
SHAPES = [(13, 7), (7, 13), (16, 16), (3, 20), (1, 1)]


def _coverage(layout, mesh) -> np.ndarray:
    """How many ranks hold each logical element."""
    shape = layout.logical_shape
    count = np.zeros(shape, np.int64)
    for r in range(mesh.size):
        held = held_indices(layout, mesh.coords(r))
        held = tuple(ix[ix < n] for ix, n in zip(held, shape, strict=True))
        count[np.ix_(*held)] += 1
    return count


@pytest.mark.parametrize("P", range(1, 10))
@pytest.mark.parametrize("spec", NAMED)
def test_named_layouts_cover_the_matrix_once(spec, P):
    for shape in SHAPES:
        layout, mesh = user_layout(spec, shape, P)
        assert mesh.size == P and tuple(layout.logical_shape) == shape
        assert np.all(_coverage(layout, mesh) == 1), (spec, shape, P, str(layout))


@pytest.mark.parametrize(
    "P, pq",
    [
        (1, (1, 1)),
        (2, (1, 2)),
        (4, (2, 2)),
        (6, (2, 3)),
        (7, (1, 7)),
        (8, (2, 4)),
        (9, (3, 3)),
        (12, (3, 4)),
    ],
)
def test_grid_is_most_square_with_p_le_q(P, pq):
    assert grid(P) == pq
    layout, mesh = user_layout("block", (24, 24), P)
    assert mesh == AbstractMesh((("r", pq[0]), ("c", pq[1])))


def test_named_layout_texts():
    assert str(user_layout("rows", (12, 5), 4)[0]) == "((4_r, 3:5), (5:1))"
    assert str(user_layout("cols", (12, 5), 2)[0]) == "(12,5)/((12:3), (2_c, 3:1))"
    assert str(user_layout("block", (12, 8), 4)[0]) == "((2_r, 6:4), (2_c, 4:1))"
    layout, mesh = user_layout("block-cyclic:2", (12, 8), 4)
    assert str(layout) == "((3:8, 2_r, 2:4), (2:2, 2_c, 2:1))" and str(mesh) == "r=2,c=2"


# -- ScaLAPACK's block-cyclic ownership ------------------------------------------------------
def numroc(n: int, nb: int, iproc: int, nprocs: int, isrcproc: int = 0) -> int:
    """ScaLAPACK's NUMROC: rows (or columns) of an n-long dimension that process iproc owns."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks = n // nb
    num = (nblocks // nprocs) * nb
    extra = nblocks % nprocs
    if mydist < extra:
        num += nb
    elif mydist == extra:
        num += n % nb
    return num


def indxg2p(g: int, nb: int, nprocs: int) -> int:
    return (g // nb) % nprocs


def indxg2l(g: int, nb: int, nprocs: int) -> int:
    return (g // (nb * nprocs)) * nb + g % nb


@pytest.mark.parametrize(
    "M, N, NB, P",
    [
        (16, 16, 2, 4),
        (13, 7, 2, 4),
        (13, 7, 3, 6),
        (100, 37, 8, 6),
        (9, 9, 4, 9),
        (5, 11, 2, 8),
        (64, 64, 64, 4),
        (10, 3, 1, 3),
        (7, 7, 5, 2),
        (1, 40, 3, 5),
        (5, 11, 20, 4),  # blocks wider than the matrix: each dimension one block
        (40, 6, 16, 4),
    ],
)
def test_block_cyclic_matches_scalapack(M, N, NB, P):
    layout, mesh = user_layout(f"block-cyclic:{NB}", (M, N), P)
    p, q = grid(P)
    assert mesh.shape == (p, q)
    cols_local = layout.block_shape[1]
    for rank in range(P):
        i, j = rank // q, rank % q  # BLACS_GRIDINIT's default row-major order
        coords = mesh.coords(rank)
        assert (coords["r"], coords["c"]) == (i, j)
        rows, cols = held_indices(layout, coords)
        rows, cols = rows[rows < M], cols[cols < N]
        assert rows.size == numroc(M, NB, i, p) and cols.size == numroc(N, NB, j, q)
        assert rows.tolist() == [g for g in range(M) if indxg2p(g, NB, p) == i]
        assert cols.tolist() == [g for g in range(N) if indxg2p(g, NB, q) == j]
        # local storage: ScaLAPACK's local indices, row-major (leading dimension = local cols)
        for g in rows[:: max(1, rows.size // 5)]:
            for h in cols[:: max(1, cols.size // 5)]:
                want = indxg2l(int(g), NB, p) * cols_local + indxg2l(int(h), NB, q)
                assert local_address(layout, (int(g), int(h))) == want


# -- explicit layouts with their mesh --------------------------------------------------------
@pytest.mark.parametrize(
    "spec, shape, P, text, mesh",
    [
        ("((4_r, 8), (2_c, 16))@r=4,c=2", (32, 32), 8, "((4_r, 8:16), (2_c, 16:1))", "r=4,c=2"),
        (
            "(30,32)/((4_r, 8), (2_c, 16)) @ r=4, c=2",
            (30, 32),
            8,
            "(30,32)/((4_r, 8:16), (2_c, 16:1))",
            "r=4,c=2",
        ),
        ("((2_a:2, 15), (2_a:1, 16))@a=4", (30, 32), 4, "((2_a:2, 15:16), (2_a:1, 16:1))", "a=4"),
        ("((4_x, 8), (32); B@[y])@x=4,y=2", (32, 32), 8, "((4_x, 8:32), (32:1); B@[y])", "x=4,y=2"),
        ("[r=S(0), c=S(1)]@r=2,c=3", (30, 32), 6, "(30,32)/((2_r, 15:11), (3_c, 11:1))", "r=2,c=3"),
        ("[x=S(1), y=S(1)]@y=3,x=2", (30, 36), 6, "((30:6), (2_x, 3_y, 6:1))", "y=3,x=2"),
        ("[x=S(0)]@x=2,y=3", (30, 32), 6, "((2_x, 15:32), (32:1))", "x=2,y=3"),
        (
            "((2_x, 3), (2_Time, 4); R@[x + y])@x=2,y=2",
            (6, 8),
            4,
            "((2_x, 3:4), (2_Time, 4:1); R@[x + y])",
            "x=2,y=2",
        ),
    ],
)
def test_explicit_layouts(spec, shape, P, text, mesh):
    layout, am = user_layout(spec, shape, P)
    assert str(layout) == text and str(am) == mesh
    assert user_layout(f"{layout}@{am}", shape, P) == (layout, am)  # prints as it parses
    if layout.time_size == 1:
        copies = math.prod(am.sizes[lv] for lv in layout.replicated_levels(am.names))
        assert np.all(_coverage(layout, am) == copies)


def test_explicit_mesh_order_is_rank_order():
    layout, am = user_layout("((2_x, 3), (3_y, 2))@y=3,x=2", (6, 6), 6)
    assert am.coords(1) == {"y": 0, "x": 1}  # rank 1 is x=1: x is the faster axis
    rows, _ = held_indices(layout, am.coords(1))
    assert rows.tolist() == [3, 4, 5]


def test_split_mesh_only_outside_brackets():
    assert split_mesh("((4_x, 3), (8); B@[y])") == ("((4_x, 3), (8); B@[y])", None)
    assert split_mesh("((4_x, 3), (8); B@[y])@x=4,y=2") == ("((4_x, 3), (8); B@[y])", "x=4,y=2")
    assert split_mesh("((4_x, 3), (8); B @ [y]) @ x=4") == ("((4_x, 3), (8); B @ [y])", "x=4")
    assert split_mesh("((4_x, 3, (8))@x=4") == (
        "((4_x, 3, (8))",
        "x=4",
    )  # unbalanced: the parser says
    assert parse_mesh(" r = 2 , c = 3 ", 6) == AbstractMesh((("r", 2), ("c", 3)))


# -- bad specs: one line naming the problem --------------------------------------------------
@pytest.mark.parametrize(
    "spec, shape, P, error, words",
    [
        ("diagonal", (8, 8), 4, LayoutError, "unknown layout name"),
        ("", (8, 8), 4, LayoutError, "empty layout spec"),
        ("block-cyclic:0", (8, 8), 4, LayoutError, "NB=0 must be at least 1"),
        ("block-cyclic:-3", (8, 8), 4, LayoutError, "NB=-3 must be at least 1"),
        ("block-cyclic", (8, 8), 4, LayoutError, "write block-cyclic:NB"),
        ("block-cyclic:x", (8, 8), 4, LayoutError, "write block-cyclic:NB"),
        ("rows", (0, 8), 4, LayoutError, "needs positive sizes"),
        ("rows", (8, 8, 8), 4, LayoutError, "is not two sizes"),
        ("rows", (8, 8), 0, MeshError, "positive rank count"),
        ("((4_r, 2), (8))", (8, 8), 4, LayoutError, "state the mesh"),
        # the hint is a mesh of the layout's own axes and the job's ranks
        ("((4_x, 2), (8))", (8, 8), 4, LayoutError, "e.g. ((4_x, 2), (8))@x=4 ("),
        ("((2_r, 4), (8); B@[c])", (8, 8), 4, LayoutError, "B@[c])@r=2,c=2 ("),
        ("[r=S(0), c=S(1)]", (8, 8), 6, LayoutError, "c=S(1)]@r=2,c=3 ("),
        # a malformed layout is named as such, with or without a mesh (not sent to add one)
        ("((4_r, 2), (2_c", (8, 8), 4, LayoutError, "expected ')'"),
        ("((4_r, 2), (2_c@r=2,c=3", (8, 8), 4, LayoutError, "expected ')'"),
        ("((4_r, 2), (8))@r=3", (8, 8), 4, MeshError, "multiply to 3 ranks, the job has 4"),
        ("((4_r, 2), (8))@r=2,c=2", (8, 8), 4, LayoutError, "level r has size 4 in the layout"),
        ("((4_r, 2), (8))@r4", (8, 8), 4, MeshError, "cannot read 'r4'"),
        ("((4_r, 2), (8))@r=4,r=1", (8, 8), 4, MeshError, "names repeat"),
        ("((4_r, 2), (8))@r=0,c=4", (8, 8), 4, MeshError, "sizes must be >= 1"),
        ("((4_r, 2), (8))@r=4@r=4", (8, 8), 4, LayoutError, "more than one '@'"),
        ("((4_z, 2), (8))@r=4", (8, 8), 4, LayoutError, "level z is not an axis of mesh r=4"),
        ("((4_r, 2), (4))@r=4", (8, 8), 4, LayoutError, "shape is 8x4, the matrix is 8x8"),
        ("((4_r, 2), (8))@r=4", (7, 8), 4, LayoutError, "pad it: (7,8)/((4_r, 2), (8))@r=4)"),
        ("(7,7)/((4_r, 2), (8))@r=4", (7, 8), 4, LayoutError, "shape is 7x7"),
        ("((4_r, 2), (8), (1))@r=4", (8, 8), 4, LayoutError, "needs 2 dimensions"),
        ("((4_r, 2), (2_Time, 4))@r=4", (8, 8), 4, LayoutError, "does not hold the whole"),
        ("((4_r, 2, (8))@r=4", (8, 8), 4, LayoutError, "expected"),
        ("[r=S(2)]@r=4", (8, 8), 4, LayoutError, "S(2) splits a dimension"),
        ("[q=S(0)]@r=4", (8, 8), 4, LayoutError, "mesh has no axis 'q'"),
        ("[r=S(0)]", (8, 8), 4, LayoutError, "state the mesh"),
    ],
)
def test_bad_specs_raise_one_line(spec, shape, P, error, words):
    with pytest.raises(error) as err:
        user_layout(spec, shape, P)
    msg = str(err.value)
    assert words in msg and "\n" not in msg, msg


def test_layout_error_quotes_the_layout():
    with pytest.raises(LayoutError) as err:
        user_layout("((4_r, 2), (4))@r=4", (8, 8), 4)
    assert "'((4_r, 2), (4))'" in str(err.value)
    assert parse_layout("((4_r, 2), (8))").levels == {"r": 4}


def test_a_block_cyclic_block_wider_than_the_matrix_pads_no_further():
    """NB beyond the matrix deals it all to process (0, 0), as NB = its size does, without
    padding to NB x p (NB = 10^8 on 8 x 8 made a plan take 17 GB)."""
    huge, own = (user_layout(f"block-cyclic:{nb}", (8, 6), 4)[0] for nb in (10**8, 8))
    assert str(huge) == str(own) == "(8,6)/((2_r, 8:6), (2_c, 6:1))"
    assert huge.padded_shape == (16, 12)
