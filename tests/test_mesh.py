"""Meshes: AbstractMesh arithmetic (serial) and Mesh on COMM_WORLD (under mpiexec, any size)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from topology import AbstractMesh, Mesh, MeshError


# -- serial: AbstractMesh -------------------------------------------------------------------
@pytest.mark.parametrize(
    "axes",
    [
        (("x", 1),),
        (("x", 5),),
        (("row", 3), ("col", 4)),
        (("a", 2), ("b", 1), ("c", 3)),
        (("p", 2), ("q", 2), ("r", 2)),
    ],
)
def test_coords_rank_round_trip(axes):
    am = AbstractMesh(axes)
    seen = []
    for r in range(am.size):
        c = am.coords(r)
        assert list(c) == list(am.names)
        assert all(0 <= c[n] < s for n, s in am.axes)
        assert am.rank(c) == r
        seen.append(tuple(c.values()))
    # row-major: the first axis is the most significant
    assert seen == list(itertools.product(*(range(s) for s in am.shape)))


def test_row_major_example_and_strides():
    am = AbstractMesh((("row", 3), ("col", 4)))
    assert am.coords(6) == {"row": 1, "col": 2}
    assert am.rank_strides == {"row": 4, "col": 1}
    assert am.rank({"row": 2, "col": 5}) == 2 * 4 + 1  # coordinates wrap (periodic)
    assert am.size == 12 and am.shape == (3, 4) and am.names == ("row", "col")
    assert AbstractMesh.of(row=3, col=4) == am
    assert str(am) == "row=3,col=4"


def test_group():
    am = AbstractMesh((("x", 2), ("y", 3), ("z", 2)))
    for r in range(am.size):
        c = am.coords(r)
        assert am.group(r, []) == [r]
        assert am.group(r, am.names) == list(range(am.size))
        for names in [("x",), ("y",), ("z",), ("x", "z"), ("y", "z")]:
            want = sorted(
                q
                for q in range(am.size)
                if all(am.coords(q)[n] == c[n] for n in am.names if n not in names)
            )
            assert am.group(r, names) == want
    assert am.group(1, ["y"]) == [1, 3, 5]
    assert am.group(7, ["y"]) == [7, 9, 11]
    assert am.group(7, ["x", "z"]) == [0, 1, 6, 7]


@pytest.mark.parametrize(
    "axes",
    [
        (),
        (("Time", 2),),
        (("1x", 2),),
        (("x-y", 2),),
        (("x", 0),),
        (("x", -2),),
        (("x", 2), ("x", 3)),
    ],
)
def test_bad_meshes(axes):
    with pytest.raises(MeshError):
        AbstractMesh(axes)


def test_rank_out_of_range():
    am = AbstractMesh((("x", 2), ("y", 2)))
    for r in (-1, 4):
        with pytest.raises(MeshError, match="outside"):
            am.coords(r)


# -- MPI: Mesh on COMM_WORLD ----------------------------------------------------------------
def _factorings(size: int) -> list[tuple[int, ...]]:
    """The world size as 1, 2 and 3 axes (smallest prime factors first, then size-1 axes)."""
    primes, n, f = [], size, 2
    while n > 1:
        while n % f == 0:
            primes.append(f)
            n //= f
        f += 1
    two = (primes[0], size // primes[0]) if primes else (1, 1)
    three = (two[0],) + ((primes[1], two[1] // primes[1]) if len(primes) > 1 else (two[1], 1))
    return [(size,), two, (1, size), three]


def _meshes():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    for shape in _factorings(comm.Get_size()):
        names = ("x", "y", "z")[: len(shape)]
        yield Mesh(AbstractMesh(tuple(zip(names, shape, strict=True))), comm)


@pytest.mark.mpi
def test_mesh_coords_and_subs():
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    for mesh in _meshes():
        am = mesh.abstract
        assert mesh.rank == world.Get_rank()
        assert mesh.coords == am.coords(mesh.rank)
        assert mesh.cart.Get_topo()[2] == list(am.coords(mesh.rank).values())
        cart_group = mesh.cart.Get_group()
        for k in range(1, len(am.names) + 1):
            for names in itertools.combinations(am.names, k):
                sub = mesh.sub(*reversed(names))  # axis order in the call does not matter
                assert sub is mesh.sub(*names)
                assert sub.Get_size() == np.prod([am.sizes[n] for n in names])
                group = sub.Get_group()
                members = group.Translate_ranks(list(range(sub.Get_size())), cart_group)
                group.Free()
                assert list(members) == am.group(mesh.rank, names)
        cart_group.Free()
        with pytest.raises(MeshError, match="no axis"):
            mesh.sub("nope")
        mesh.free()


@pytest.mark.mpi
def test_ring_shift_brings_expected_coordinate():
    for mesh in _meshes():
        for name in mesh.names:
            size = mesh.sizes[name]
            sub = mesh.sub(name)
            assert sub.Get_rank() == mesh.coords[name]
            for disp in (1, -1, 2, size):
                source, dest = mesh.ring(name, disp)
                send = np.array([mesh.coords[name]], dtype=np.int64)
                recv = np.empty(1, dtype=np.int64)
                sub.Sendrecv(send, dest=dest, recvbuf=recv, source=source)
                assert recv[0] == (mesh.coords[name] - disp) % size
                assert source == (mesh.coords[name] - disp) % size
        mesh.free()


@pytest.mark.mpi
def test_wrong_size_raises_on_every_rank():
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    size = world.Get_size()
    for axes in [(("x", size + 1),), (("x", size), ("y", 2))]:
        with pytest.raises(MeshError, match=f"the job has {size}"):
            Mesh(AbstractMesh(axes), world)
    # nobody is left inside Create_cart: a collective still completes
    assert world.allreduce(1) == size
