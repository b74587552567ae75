"""A mesh on an emulated cluster (4 ranks): placement, sub-communicators, gathers, and link
emulation holding messages between nodes (not those inside a node) to the network's time.

Runs under mpiexec -n 4 with ``--only-mpi`` (other sizes skip)."""

import json
from dataclasses import replace

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
    links = replace(LinkModel.load(path, tree), emulated=True)  # as `run --emulate-links`
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


def _slow_links(tree, tmp_path_factory, alpha=ALPHA, bandwidth=1e12):
    path = None
    if MPI.COMM_WORLD.Get_rank() == 0:
        path = tmp_path_factory.mktemp("net") / "slow.json"
        path.write_text(json.dumps({"node": {"alpha": alpha, "bandwidth": bandwidth}}))
    links = LinkModel.load(MPI.COMM_WORLD.bcast(str(path) if path else None, root=0), tree)
    return replace(links, emulated=True)  # as `run --emulate-links` holds them


def _run_e2e(name, specs, tree, links, on_nodes=True):
    """As `distmm run --layouts ... --topology cluster:... --emulate-links` sets a run up
    (``on_nodes`` False: relabelled by the plain rule, free to split the nodes' groups)."""
    import numpy as np

    from bench.endtoend import end_to_end, job_comm, placed_binding

    module = get(name)
    plan = module.plan((24, 20, 16), 4)
    binding = default_binding(plan.mesh, tree)
    e2e = end_to_end(specs, plan, 8, True, *((tree, binding) if on_nodes else ()))
    binding = placed_binding(plan.mesh, e2e)
    world = MPI.COMM_WORLD
    job = job_comm(world, e2e)
    mesh = Mesh(plan.mesh, job, binding=binding, tree=tree)
    try:
        # the relabelled mesh runs where the job's ranks are: native rank d on job rank ranks[d]
        assert mesh.tree_coords == tree.coords(world.Get_rank())
        assert e2e.ranks[mesh.rank] == world.Get_rank()
        result, _ = run_plan(
            module, plan, mesh, np.dtype("float64"), 2, 0, "exact", links=links, e2e=e2e,
            world=world,
        )  # fmt: skip
    finally:
        mesh.free()
        if job is not world:
            job.Free()
    return result, e2e


@pytest.mark.mpi
@needs4
@pytest.mark.timeout(120)
def test_end_to_end_on_a_cluster_holds_redistributions_to_the_network(tmp_path_factory):
    """From 2x2 block-cyclic layouts on cluster:2,2 with a slow network: verified, and each
    redistribution phase takes at least the network's time for the messages it sends between
    nodes."""
    import numpy as np

    from layouts.endpoints import move_counts

    tree = parse_topology("cluster:2,2")
    links = _slow_links(tree, tmp_path_factory)
    r, e2e = _run_e2e("cannon", dict.fromkeys("ABC", "block-cyclic:2"), tree, links)
    assert r["verified"], r["max_rel_error"]
    for into, phase in ((True, "redistribute_in"), (False, "redistribute_out")):
        # the moves in run as one exchange (layouts/batch.py): held once, for all they send
        counts = sum(move_counts(m, e2e.ranks) for m in e2e.moves if m.into == into)
        src, dst = np.nonzero(counts)
        held = links.exchange(src, dst, counts[src, dst] * 8).max()
        assert held >= ALPHA  # block-cyclic to blocks crosses the nodes
        assert r["phases"][phase]["seconds"] >= held


@pytest.mark.mpi
@needs4
@pytest.mark.timeout(120)
def test_the_move_out_lasts_until_its_busiest_rank_is_done(tmp_path_factory):
    """The move out ends with no barrier: its phase is the longest any rank's took, not rank
    0's. C from Cannon's blocks into columns on cluster:2,2, priced by bandwidth: ranks 1 and 2
    send twice what ranks 0 and 3 send between the nodes."""
    import numpy as np

    from layouts.endpoints import move_counts

    tree = parse_topology("cluster:2,2")
    links = _slow_links(tree, tmp_path_factory, alpha=1e-6, bandwidth=2e4)
    specs = {"A": "native", "B": "native", "C": "cols"}
    r, e2e = _run_e2e("cannon", specs, tree, links)
    assert r["verified"], r["max_rel_error"]
    counts = move_counts(e2e.move("C"), e2e.ranks)
    src, dst = np.nonzero(counts)
    held = links.exchange(src, dst, counts[src, dst] * 8)
    assert held[0] < 0.6 * held.max()  # rank 0 is not the busiest
    assert r["phases"]["redistribute_out"]["seconds"] >= held.max()


@pytest.mark.mpi
@needs4
@pytest.mark.timeout(120)
def test_relabelled_mesh_on_a_cluster(tmp_path_factory):
    """SUMMA's own layouts on the transposed mesh. The cluster's rule keeps the order (the
    transposition would split each node's pair of mesh ranks). Relabelled by the plain rule,
    the mesh moves nothing, and its kernel's messages cross the nodes where the relabelled
    ranks actually run (the RankOrder placement works for any order)."""
    tree = parse_topology("cluster:2,2")
    links = _slow_links(tree, tmp_path_factory)
    plan = get("summa").plan((24, 20, 16), 4)
    p, q = plan.mesh.shape
    specs = {
        n: str(getattr(plan, n)).replace("_x", "_b").replace("_y", "_a") + f"@a={q},b={p}"
        for n in "ABC"
    }
    r, e2e = _run_e2e("summa", specs, tree, links)
    assert r["verified"] and e2e.relabelling.is_identity
    r, e2e = _run_e2e("summa", specs, tree, links, on_nodes=False)
    assert r["verified"] and not e2e.relabelling.is_identity
    assert r["relabel"]["bytes_after"] == 0
    assert r["phases"]["redistribute_in"]["seconds"] < ALPHA  # nothing held: nothing moved
    assert r["multiply_seconds"] >= ALPHA  # broadcasts between nodes are


@pytest.mark.mpi
@needs4
@pytest.mark.timeout(120)
def test_moves_too_dense_to_match_keep_the_cluster_order(tmp_path_factory, monkeypatch):
    """Moves of more rank pairs than distmm holds (layouts.endpoints.MAX_PAIRS, here 0) keep
    the mesh as the cluster's binding laid it, verify, and are held to the network as any."""
    import numpy as np

    import layouts.endpoints as endpoints
    from layouts.endpoints import move_counts

    monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    tree = parse_topology("cluster:2,2")
    links = _slow_links(tree, tmp_path_factory)
    r, e2e = _run_e2e("cannon", dict.fromkeys("ABC", "block-cyclic:2"), tree, links)
    assert r["verified"] and not e2e.relabelling.counted and e2e.relabelling.is_identity
    counts = sum(move_counts(m, e2e.ranks) for m in e2e.moves if m.into)
    src, dst = np.nonzero(counts)
    assert (
        r["phases"]["redistribute_in"]["seconds"]
        >= links.exchange(src, dst, counts[src, dst] * 8).max()
    )
