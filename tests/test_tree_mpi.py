"""A mesh bound onto a 2,2,2,1 MN-Core tree (8 ranks): sub-communicators, gathers, algorithms.

Runs under mpiexec -n 8 with ``--only-mpi`` (other sizes skip)."""

from dataclasses import replace

import numpy as np
import pytest
from mpi4py import MPI

from algorithms import get
from bench.runner import run_plan
from layouts import bind_layout, generate_block, global_matrix
from layouts.redistribute import gather
from topology import Mesh
from topology.tree import bindings, parse_topology

P = MPI.COMM_WORLD.Get_size()
TREE = parse_topology("mncore:2,2,2,1")
needs8 = pytest.mark.skipif(P != 8, reason="the 2,2,2,1 tree has 8 PEs")


@pytest.mark.mpi
@needs8
def test_bound_mesh_coordinates_and_subs():
    plan = get("summa3d").plan((8, 8, 8), 8)
    for b in bindings(plan.mesh, TREE):
        mesh = Mesh(plan.mesh, MPI.COMM_WORLD, binding=b, tree=TREE)
        try:
            assert mesh.rank == MPI.COMM_WORLD.Get_rank()
            assert mesh.coords == b.algo_coords(TREE.coords(mesh.rank), TREE)
            for a in mesh.names:
                assert mesh.sub(a).Get_rank() == mesh.coords[a]
            # ranked row-major over the two axes in mesh order, whatever their levels
            first, second = (a for a in mesh.names if a in ("x", "z"))
            both = mesh.sub("x", "z")
            assert both.Get_rank() == mesh.coords[first] * 2 + mesh.coords[second], str(b)
            got = both.allgather((mesh.coords[first], mesh.coords[second]))
            assert got == [(i, j) for i in range(2) for j in range(2)]
        finally:
            mesh.free()


@pytest.mark.mpi
@needs8
@pytest.mark.parametrize("algo", ["summa3d", "summa", "t10"])
def test_algorithms_on_every_binding(algo):
    from topology.links import LinkModel

    module = get(algo)
    plan = module.plan((24, 20, 16), 8)
    links = replace(LinkModel.load("flat", TREE), emulated=True)  # as `run --emulate-links`
    for b in bindings(plan.mesh, TREE):
        mesh = Mesh(plan.mesh, MPI.COMM_WORLD, binding=b, tree=TREE)
        try:
            r, blocks = run_plan(
                module, plan, mesh, np.dtype(np.float64), 1, 0, "exact", links=links
            )
            assert r["verified"], (str(b), r)
            assert sum(r["level_bytes"].values()) == r["bytes_sent"]
            bound = bind_layout(plan.A, b, TREE)
            a = gather(blocks["A"], bound, mesh.physical)
            if mesh.rank == 0:
                assert np.array_equal(a, global_matrix((24, 20), 1))
            assert np.array_equal(
                generate_block(bound, mesh.physical.coords, 1),
                generate_block(plan.A, mesh.coords, 1),
            )
        finally:
            mesh.free()


@pytest.mark.mpi
@needs8
@pytest.mark.timeout(120)
@pytest.mark.parametrize("algo, spec", [("summa3d", "block-cyclic:2"), ("t10", "cols")])
def test_end_to_end_on_the_tree(algo, spec):
    """From the user's layouts on the tree, for every binding, as `distmm run --topology
    mncore:2,2,2,1 --layouts ... --emulate-links` sets it up: verified, each mesh rank runs on
    the job rank the relabelling chose, each rank sends in each phase what the model counts,
    and each phase is held at least as long as the links take for what it sends."""
    from bench.endtoend import end_to_end, job_comm, placed_binding
    from layouts.endpoints import move_counts
    from topology.links import LinkModel

    module = get(algo)
    plan = module.plan((24, 20, 16), 8)
    links = replace(LinkModel.load("mncore-emu", TREE), emulated=True)
    world = MPI.COMM_WORLD
    for b in bindings(plan.mesh, TREE):
        e2e = end_to_end(dict.fromkeys("ABC", spec), plan, 8, True, TREE, b)
        job = job_comm(world, e2e)
        mesh = Mesh(plan.mesh, job, binding=placed_binding(plan.mesh, e2e), tree=TREE)
        try:
            assert e2e.ranks[mesh.rank] == world.Get_rank()
            assert mesh.tree_coords == TREE.coords(world.Get_rank())
            r, _ = run_plan(
                module, plan, mesh, np.dtype(np.float64), 1, 0, "exact", links=links,
                e2e=e2e, world=world,
            )  # fmt: skip
            assert r["verified"], (str(b), r["max_rel_error"])
            counted = e2e.bytes_sent(8)
            for into, phase in ((True, "redistribute_in"), (False, "redistribute_out")):
                assert r["phases"][phase]["bytes_sent_per_rank"] == counted[phase]
                counts = sum(move_counts(m, e2e.ranks) for m in e2e.moves if m.into == into)
                src, dst = np.nonzero(counts * (1 - np.eye(8, dtype=int)))
                held = links.exchange(src, dst, counts[src, dst] * 8).max(initial=0.0)
                assert r["phases"][phase]["seconds"] >= held, (str(b), phase)
        finally:
            mesh.free()
            if job is not world:
                job.Free()
