"""Redistribution and gather between layouts on a mesh built from the world size.

Run under mpiexec with ``--only-mpi`` (any size 1..9); the tests without the mpi mark check
``check_on_mesh`` serially. Inside a test that calls collectives in a loop, failures are collected
and combined with an allreduce at the end, so one failing rank never leaves the others waiting.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpi4py import MPI

from layouts import LayoutError, TensorLayout, generate_block, global_matrix, parse_layout
from layouts.redistribute import check_on_mesh, gather, redistribute
from topology import AbstractMesh, Mesh

SEED = 11


def grid(size: int) -> tuple[int, int]:
    """size = p * q, p >= q, q as large as possible (1 x 1, 2 x 1, 2 x 2, 3 x 2, 3 x 3...)."""
    q = max(d for d in range(1, math.isqrt(size) + 1) if size % d == 0)
    return size // q, q


def layouts_for(shape: tuple[int, int], p: int, q: int) -> tuple[dict, dict]:
    """(sources, destination-only layouts) of one logical shape on a p x q mesh (axes x, y)."""
    m, n = shape

    def c(size, parts):
        return -(-size // parts)

    def lay(text: str) -> TensorLayout:
        return parse_layout(text).with_shape(shape)

    src = {
        "row": lay(f"(({p}_x, {q}_y, {c(m, p * q)}), ({n}))"),
        "col": lay(f"(({m}), ({q}_y, {p}_x, {c(n, p * q)}))"),
        "cyclic": lay(f"(({c(m, p)}, {p}_x), ({c(n, q)}, {q}_y))"),
        "block_xy": lay(f"(({p}_x, {c(m, p)}), ({q}_y, {c(n, q)}))"),
        "block_yx": lay(f"(({q}_y, {c(m, q)}), ({p}_x, {c(n, p)}))"),
        "colmajor": lay(f"(({p}_x, {c(m, p)}:1), ({q}_y, {c(n, q)}:{c(m, p)}))"),
        "rows_y_repl": lay(f"(({p}_x, {c(m, p)}), ({n}))"),
        "replicated": lay(f"(({m}), ({n}))"),
        "broadcast": lay(f"(({m}), ({n}); B@[x, y])"),
        "cannon_a": lay(f"(({p}_x, {c(m, p)}), ({q}_Time, {c(n, q)}); R@[x + y])"),
        # the free rotation level x (size p >= q) solves each residue once or more
        "cannon_b": lay(f"(({q}_Time, {c(m, q)}), ({q}_y, {c(n, q)}); R@[x + y])"),
        "skew_neg": lay(f"(({p}_x, {c(m, p)}), ({q}_Time, {c(n, q)}); R@[2*x - y, pace=2])"),
    }
    dst_only = {
        "partial_y": lay(f"(({p}_x, {c(m, p)}), ({n}); P@[y])"),
        "partial_xy": lay(f"(({c(m, 2)}, 2_Time), ({n}); P@[x, y])"),
        # a Time axis without rotation shows chunk 0 at step 0: the rest is held by nobody
        "time_chunk0": lay(f"(({p}_x, {c(m, p)}), ({q}_y, 2_Time, {c(n, 2 * q)}))"),
    }
    return src, dst_only


@pytest.fixture(scope="module")
def mesh():
    p, q = grid(MPI.COMM_WORLD.Get_size())
    mesh = Mesh(AbstractMesh((("x", p), ("y", q))), MPI.COMM_WORLD)
    yield mesh
    mesh.free()


def _all_ok(comm, failures: list[str]) -> list[str]:
    """Every rank's failures (at most 5 each), on every rank."""
    return [f for fs in comm.allgather(failures[:5]) for f in fs]


def _expected(dst: TensorLayout, mesh: Mesh, dtype=np.float64) -> np.ndarray:
    return generate_block(dst, mesh.coords, SEED, dtype)


@pytest.mark.mpi
@pytest.mark.parametrize("shape", [(13, 7), (7, 11), "exact"])
def test_redistribute_every_pair(mesh, shape):
    p, q = grid(mesh.size)
    if shape == "exact":
        shape = (2 * p * q, 3 * p * q)
    src, dst_only = layouts_for(shape, p, q)
    dsts = {**src, **dst_only}
    failures = []
    for sname, s in src.items():
        block = generate_block(s, mesh.coords, SEED)
        for dname, d in dsts.items():
            out = redistribute(block, s, d, mesh)
            want = _expected(d, mesh)
            if out.shape != d.block_shape or out.dtype != block.dtype:
                failures.append(f"rank {mesh.rank} {sname}->{dname}: shape {out.shape}")
                continue
            if d.partial:
                # coordinate 0 of the partial levels holds the value, the others zeros
                off = any(mesh.coords[lv] != 0 for lv in d.partial)
                if off and out.any():
                    failures.append(f"rank {mesh.rank} {sname}->{dname}: nonzero partial copy")
                total = out.copy()
                mesh.sub(*d.partial).Allreduce(MPI.IN_PLACE, total)
                out = total
            if not np.array_equal(out, want):
                failures.append(f"rank {mesh.rank} {sname}->{dname} {shape}: wrong values")
    assert _all_ok(mesh.cart, failures) == []


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.complex128])
def test_redistribute_dtypes(mesh, dtype):
    p, q = grid(mesh.size)
    src, dst_only = layouts_for((9, 10), p, q)
    failures = []
    for sname, dname in [("row", "cannon_b"), ("cannon_a", "col"), ("cyclic", "partial_y")]:
        s, d = src[sname], {**src, **dst_only}[dname]
        scale = 1 << 20
        block = (generate_block(s, mesh.coords, SEED) * scale).astype(dtype)
        want = (generate_block(d, mesh.coords, SEED) * scale).astype(dtype)
        out = redistribute(block, s, d, mesh)
        if d.partial:
            mesh.sub(*d.partial).Allreduce(MPI.IN_PLACE, out)
        if out.dtype != np.dtype(dtype) or not np.array_equal(out, want):
            failures.append(f"rank {mesh.rank} {sname}->{dname} {np.dtype(dtype)}")
    assert _all_ok(mesh.cart, failures) == []


@pytest.mark.mpi
@pytest.mark.parametrize("shape", [(13, 7), (6, 12)])
def test_gather(mesh, shape):
    p, q = grid(mesh.size)
    src, _ = layouts_for(shape, p, q)
    whole = global_matrix(shape, SEED)
    failures = []
    for root in sorted({0, mesh.size - 1}):
        for name, s in src.items():
            got = gather(generate_block(s, mesh.coords, SEED), s, mesh, root=root)
            if mesh.rank == root:
                ok = got is not None and np.array_equal(got, whole)
            else:
                ok = got is None
            if not ok:
                failures.append(f"rank {mesh.rank} gather {name} to {root}")
    assert _all_ok(mesh.cart, failures) == []


class _Spy:
    """Forwards to a communicator and records the names of the methods called on it."""

    def __init__(self, comm):
        self._comm = comm
        self.calls: list[str] = []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self._comm, name)


@pytest.mark.mpi
def test_one_alltoallv_per_call(mesh):
    p, q = grid(mesh.size)
    src, dst_only = layouts_for((13, 7), p, q)
    cart, comm = mesh.cart, mesh.comm
    spy_cart, spy_comm = _Spy(cart), _Spy(comm)
    mesh.cart, mesh.comm = spy_cart, spy_comm
    try:
        s = src["cannon_a"]
        block = generate_block(s, mesh.coords, SEED)
        redistribute(block, s, src["cannon_b"], mesh)
        redistribute(block, s, dst_only["partial_y"], mesh)
        gather(block, s, mesh)
    finally:
        mesh.cart, mesh.comm = cart, comm
    talk = [c for c in spy_cart.calls if not c.startswith("Get_")]
    assert talk == ["Alltoallv"] * 3
    assert spy_comm.calls == []


# -- bad input: every rank raises before any collective ----------------------------------------
@pytest.mark.mpi
def test_bad_input_raises_everywhere(mesh):
    p, q = grid(mesh.size)
    src, dst_only = layouts_for((13, 7), p, q)
    s = src["block_xy"]
    block = generate_block(s, mesh.coords, SEED)

    too_big = parse_layout(f"(({p + 1}_x, 4), (7))").with_shape((4 * p, 7))
    with pytest.raises(LayoutError, match=rf"level x has size {p + 1} .* but {p}"):
        redistribute(generate_block(too_big, mesh.coords, SEED), too_big, too_big, mesh)
    with pytest.raises(LayoutError, match="level z is not an axis"):
        redistribute(block, s, parse_layout("((13), (7); B@[z])"), mesh)
    with pytest.raises(LayoutError, match="differs from the source"):
        redistribute(block, s, parse_layout(f"(({p}_x, 14), (7))"), mesh)
    partial = dst_only["partial_y"]
    with pytest.raises(LayoutError, match="must be reduced"):
        redistribute(generate_block(partial, mesh.coords, SEED), partial, s, mesh)
    with pytest.raises(LayoutError, match="must be reduced"):
        gather(generate_block(partial, mesh.coords, SEED), partial, mesh)
    chunk0 = parse_layout(f"(({p}_x, {-(-13 // p)}), (2_Time, 4))").with_shape((13, 7))
    with pytest.raises(LayoutError, match="does not hold the whole tensor"):
        redistribute(generate_block(chunk0, mesh.coords, SEED), chunk0, s, mesh)
    own_skew = parse_layout(f"(({p}_x, {-(-13 // p)}), (2_Time, 4); R@[x])").with_shape((13, 7))
    with pytest.raises(LayoutError, match="does not hold the whole tensor"):
        gather(generate_block(own_skew, mesh.coords, SEED), own_skew, mesh)
    with pytest.raises(ValueError, match="does not match layout"):
        redistribute(block[:, :0], s, src["row"], mesh)
    with pytest.raises(ValueError, match="no MPI datatype"):
        redistribute(block.astype(object), s, src["row"], mesh)
    # the communicator is still usable: nobody is stuck in a collective
    assert mesh.cart.allreduce(1) == mesh.size


# -- serial: check_on_mesh ------------------------------------------------------------------
def test_check_on_mesh_accepts_matching_levels():
    am = AbstractMesh((("x", 3), ("y", 2)))
    for text in [
        "((3_x, 4), (2_y, 5))",
        "((12), (10))",
        "((12), (10); B@[x])",
        "((3_x, 4), (10); P@[y])",
        "((3_x, 4), (2_Time, 5); R@[x + y])",
        "((2_Time, 6), (2_y, 5); R@[x + y])",
    ]:
        check_on_mesh(parse_layout(text), am)


@pytest.mark.parametrize(
    "text, level",
    [
        ("((4_x, 3), (2_y, 5))", "x"),
        ("((3_x, 4), (5_y, 2))", "y"),
    ],
)
def test_check_on_mesh_size_mismatch(text, level):
    am = AbstractMesh((("x", 3), ("y", 2)))
    with pytest.raises(LayoutError) as err:
        check_on_mesh(parse_layout(text), am)
    msg = str(err.value)
    assert text.replace(" ", "")[:6] in msg.replace(" ", "")  # quotes the layout
    size = parse_layout(text).levels[level]
    assert f"level {level} has size {size}" in msg and f"but {am.sizes[level]}" in msg


@pytest.mark.parametrize(
    "text, level",
    [
        ("((3_z, 4), (10))", "z"),
        ("((12), (10); B@[w])", "w"),
        ("((12), (10); P@[w])", "w"),
        ("((3_x, 4), (2_Time, 5); R@[x + w])", "w"),
    ],
)
def test_check_on_mesh_unknown_level(text, level):
    am = AbstractMesh((("x", 3), ("y", 2)))
    with pytest.raises(LayoutError, match=rf"level {level} is not an axis of mesh x=3,y=2"):
        check_on_mesh(parse_layout(text), am)
