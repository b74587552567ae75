"""The network stage on a job's own nodes (bench/calibration_network.py), the node split faked:
the ranks of one parity are one node, as a launcher dealing the ranks out over two nodes places
them. Runs under mpiexec at any rank count with ``--only-mpi``."""

import pytest
from mpi4py import MPI

from bench.calibration_network import cluster_comm, measure, nodes_of
from topology.hierarchy import cluster_mesh

WORLD = MPI.COMM_WORLD
P, ME = WORLD.Get_size(), WORLD.Get_rank()


def by_parity(world):
    return world.Split(world.Get_rank() % 2, world.Get_rank())


@pytest.mark.mpi
def test_this_machine_is_one_node():
    assert nodes_of(WORLD) == (1, P)


@pytest.mark.mpi
@pytest.mark.skipif(P < 2, reason="two nodes need two ranks")
@pytest.mark.timeout(120)
def test_nodes_dealt_out_are_measured_in_blocks():
    nodes, per_node = nodes_of(WORLD, by_parity)
    assert (nodes, per_node) == (2, P // 2)  # an odd count leaves the even node one rank more
    comm = cluster_comm(WORLD, per_node, by_parity)
    node, local = ME % 2, ME // 2
    if local < per_node:  # rank r of the cluster is the (r % per_node)-th of node r // per_node
        assert comm.Get_rank() == node * per_node + local
    else:
        assert comm is None
    entry = measure(WORLD, comm, cluster_mesh(nodes, per_node), None, quick=True)
    assert WORLD.allgather(entry) == [entry] * P  # every rank has the same entry
    link = entry["links"]["node"]
    assert link["alpha"] > 0 and link["bandwidth"] > 0 and link["lanes"] >= 1
    assert (entry["nodes"], entry["ranks_per_node"], entry["emulated"]) == (2, per_node, None)
    assert all(t > 0 for rows in (entry["one_rank"], entry["every_rank"]) for _, t in rows)
    if comm is not None:
        comm.Free()
