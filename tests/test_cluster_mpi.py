"""A mesh on an emulated cluster (4 ranks): placement, sub-communicators, gathers, and link
emulation holding messages between nodes (not those inside a node) to the network's time.

Runs under mpiexec -n 4 with ``--only-mpi`` (other sizes skip)."""

import json

import pytest
from mpi4py import MPI

from algorithms import get
from bench.runner import run_plan
from topology import Mesh
from topology.links import LinkModel
from topology.tree import default_binding, parse_topology

P = MPI.COMM_WORLD.Get_size()
needs4 = pytest.mark.skipif(P != 4, reason="the clusters here have 4 ranks")
ALPHA = 0.05  # s: a network slow enough to see under any load


@pytest.mark.mpi
@needs4
@pytest.mark.parametrize("topo", ["cluster:2,2", "cluster:2,2:round-robin", "cluster:1,4"])
def test_cluster_placement_and_emulation(topo, tmp_path_factory):
    tree = parse_topology(topo)
    module = get("cannon")
    plan = module.plan((64, 64, 64), 4)
    binding = default_binding(plan.mesh, tree)
    mesh = Mesh(plan.mesh, MPI.COMM_WORLD, binding=binding, tree=tree)
    path = None
    if MPI.COMM_WORLD.Get_rank() == 0:
        path = tmp_path_factory.mktemp("net") / "slow.json"
        path.write_text(json.dumps({"node": {"alpha": ALPHA, "bandwidth": 1e12}}))
    path = MPI.COMM_WORLD.bcast(str(path) if path else None, root=0)
    links = LinkModel.load(path, tree)
    try:
        assert mesh.rank == MPI.COMM_WORLD.Get_rank()
        assert mesh.coords == plan.mesh.coords(mesh.rank)  # rank r is algorithm rank r
        for a in mesh.names:
            assert mesh.sub(a).Get_rank() == mesh.coords[a]
        result, _ = run_plan(module, plan, mesh, "float32", 3, 1, "exact", links=links)
        assert result["verified"], result
        t = result["seconds"]
        if topo == "cluster:1,4":  # one node: nothing is held
            assert t < ALPHA
        else:  # each multiplication shifts across nodes at least once
            assert t >= ALPHA
    finally:
        mesh.free()
