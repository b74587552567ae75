"""The network between nodes, as `distmm calibrate` measures it across nodes (issue 13).

A job whose ranks span several nodes (``COMM_TYPE_SHARED``: the ranks that share memory) is
laid out as a cluster ``cluster:NODES,RANKS_PER_NODE`` (each node's first RANKS_PER_NODE ranks,
the fewest any node has; the others sleep) and its messages between nodes are timed through the
communication layer, as the algorithms' shifts run, the ring of nodes along one axis:

- ``one_rank``: each node's first rank alone shifts to the next node (the others asleep): the
  latency, and the bandwidth one rank gets;
- ``every_rank``: every rank shifts to its counterpart on the next node at once, as a Cannon or
  SUMMA step across nodes does: the bandwidth the node's ranks share.

The link this gives (topology/links.py, the cluster's ``node`` level) has the one-rank fit's
latency and bandwidth per lane, and as many lanes as the node moves one rank's worth of data
(its ranks' summed bandwidth every rank at once over one rank's alone, rounded): so a message
costs ``alpha + n * max(1, R / lanes) / bandwidth`` with R ranks of a node sending at once, the
slower of one rank's own limit and the node's share, for any ranks per node a prediction asks.

The latency is what an algorithm's message pays, the layer's own few microseconds of Python
included (scripts/message_overhead.py: on a 2-core VM an 8-byte shift took 8.0-8.3 us where
Sendrecv alone took 3.1-3.3), so it is above osu_latency's on a fast network.

On one machine ``--topology cluster:N,R --emulate-links PRESET`` emulates the nodes: each
message between them is held to the preset (algorithms/levels.py), and the measurement should
give the preset back, which checks it (tests/test_calibrate_network.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from topology.hierarchy import cluster_mesh

from .calibration import fit, sleep_until_all
from .calibration_refresh import read_profile
from .errors import UsageError
from .files import write_json_atomic

NETWORK_SIZES = (8, 1 << 10, 1 << 16, 1 << 20, 1 << 22)
QUICK_SIZES = (8, 1 << 10, 1 << 16, 1 << 20)
LARGE = 1 << 16  # from this size a time is fitted for the bandwidth, below for the latency


# what a full calibrate launched across nodes says first
ACROSS_NODES = (
    "the network between them is timed last; the node's own figures are best timed on one node "
    "(`mpiexec -n RANKS distmm calibrate` there, then `calibrate --network-into` across nodes)"
)


def add_network_arguments(p) -> None:
    """calibrate's options for the network between nodes."""
    p.add_argument(
        "--network-into",
        metavar="PROFILE",
        help="time only the network between nodes (a job launched across nodes, or nodes "
        "emulated with --topology and --emulate-links) into PROFILE, everything else kept, "
        "written to --out (default: PROFILE itself); predict and plan on a cluster then take "
        "their network from the profile (bench/calibration_network.py)",
    )
    p.add_argument(
        "--topology",
        metavar="cluster:NODES,RANKS_PER_NODE",
        help="with --network-into: emulate these nodes on this machine (with --emulate-links)",
    )
    p.add_argument(
        "--emulate-links",
        metavar="PRESET",
        help="with --topology: hold each message between the emulated nodes to this network "
        "preset or JSON file, which the measurement should give back",
    )


def network_options(args) -> tuple:
    """(the --network-into profile's data or None, the tree and emulated links of
    ``--topology cluster:... --emulate-links PRESET`` or None, None); UsageError for a missing
    profile, a half or misplaced pair (checked before any collective)."""
    from dataclasses import replace

    from topology import MeshError
    from topology.hierarchy import is_cluster
    from topology.links import LinkModel
    from topology.tree import parse_topology

    into = read_profile(args.network_into, "--network-into") if args.network_into else None
    if not (args.topology or args.emulate_links):
        return into, None, None
    if not args.network_into:
        raise UsageError("--topology and --emulate-links go with --network-into PROFILE")
    if not (args.topology and args.emulate_links):
        raise UsageError(
            "emulated nodes need both --topology cluster:NODES,RANKS_PER_NODE and "
            "--emulate-links PRESET"
        )
    try:
        tree = parse_topology(args.topology)
        if not is_cluster(tree):
            raise MeshError(f"--topology {args.topology}: give cluster:NODES,RANKS_PER_NODE")
        return into, tree, replace(LinkModel.load(args.emulate_links, tree), emulated=True)
    except MeshError as err:
        raise UsageError(str(err)) from None


def network_nodes(world, tree) -> tuple:
    """(the communicator of the cluster's ranks, the cluster) to time the network on: ``tree``'s
    emulated nodes over the whole job, or the job's own nodes (UsageError on one node)."""
    P = world.Get_size()
    if tree is not None:
        if tree.size != P:
            raise UsageError(f"--topology has {tree.size} ranks but the job has {P}")
        return world, tree
    nodes, per_node = nodes_of(world)  # every rank the same answer: one error on all
    if nodes < 2:
        raise UsageError(
            "--network-into: this job runs on one node; launch it across nodes (as "
            "`mpiexec -n 8 -ppn 4 ...` on two) or emulate them with --topology "
            "cluster:NODES,RANKS_PER_NODE --emulate-links PRESET"
        )
    return cluster_comm(world, per_node), cluster_mesh(nodes, per_node)


def network_into(world, comm, quick: bool, data: dict, out: Path, tree, links) -> int:
    """`calibrate --network-into`: the network between the nodes of ``tree`` (``comm``: its
    ranks, :func:`network_nodes`; emulated with ``links``, or real) into the profile ``data``,
    written to ``out``."""
    entry = measure(world, comm, tree, links, quick)
    if world.Get_rank() == 0:
        data = dict(data, network=entry)
        write_json_atomic(out, data, indent=1)
        print("\n".join(table_text(entry)), flush=True)
        print(f"wrote {out}", flush=True)
    world.Barrier()
    return 0


def across_nodes(world, nodes: int, per_node: int, quick: bool, say) -> dict:
    """A full calibrate's last stage on a job across ``nodes`` nodes: the network's entry."""
    entry = measure(
        world, cluster_comm(world, per_node), cluster_mesh(nodes, per_node), None, quick
    )
    say("\n".join(table_text(entry)))
    return entry


def _iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) shifts of one size: fewer than ping-pong's, a slow network's 4 MiB
    shift taking tens of milliseconds."""
    if quick:
        return 2, 10 if nbytes <= LARGE else 4
    if nbytes <= LARGE:
        return 20, 200
    return 3, 20


def shared_memory(world):
    """The ranks of ``world`` that share this rank's node (MPI's COMM_TYPE_SHARED split)."""
    from mpi4py import MPI

    return world.Split_type(MPI.COMM_TYPE_SHARED)


def nodes_of(world, split=shared_memory) -> tuple[int, int]:
    """(nodes, ranks on the node with the fewest) of this job, ``split`` giving each rank its
    node's communicator (a collective)."""
    node = split(world)
    leader = node.bcast(world.Get_rank(), root=0)
    size = node.Get_size()
    node.Free()
    sizes = dict(world.allgather((leader, size)))
    return len(sizes), min(sizes.values())


def cluster_comm(world, per_node: int, split=shared_memory):
    """This job's ranks as a cluster in blocks: a communicator whose rank r is the
    (r % per_node)-th rank of node r // per_node (nodes in the order of their first job rank,
    however the launcher dealt the ranks out), or None on a rank past the first ``per_node`` of
    its node (a collective)."""
    from mpi4py import MPI

    node = split(world)
    leader, local = node.bcast(world.Get_rank(), root=0), node.Get_rank()
    node.Free()
    index = sorted(set(world.allgather(leader))).index(leader)
    keep = local < per_node
    comm = world.Split(0 if keep else MPI.UNDEFINED, index * per_node + local)
    return comm if keep else None


def measure(world, comm, tree, links, quick: bool) -> dict:
    """The network's entry of a profile (see the module docstring): on ``comm`` (the job's
    ranks as the cluster ``tree`` has them, None on a rank left out), messages held to
    ``links`` where the nodes are emulated (an emulated LinkModel, else None). Every rank of
    ``world`` calls it; each gets the entry."""
    from algorithms.comm import Comm
    from topology import AbstractMesh, Mesh
    from topology.hierarchy import cluster_size
    from topology.tree import default_binding

    nodes, per_node, placement = cluster_size(tree)
    mesh = c = None
    if comm is not None:
        # the algorithm's axes are the tree's: x across the nodes, y inside one
        names = {"node": "x", "local": "y"}
        abstract = AbstractMesh(tuple((names[n], s) for n, s in tree.axes))
        mesh = Mesh(abstract, comm, binding=default_binding(abstract, tree), tree=tree)
        mesh.sub("x")  # (a collective on the mesh: made here, while every rank is in)
        c = Comm(mesh, links=links)
    sizes = QUICK_SIZES if quick else NETWORK_SIZES
    found = {}
    for who in ("one_rank", "every_rank"):
        rows = []
        for n in sizes:
            mine = 0.0
            sleep_until_all(world)
            if c is not None and (who == "every_rank" or mesh.coords["y"] == 0):
                mine = _shifts(c, mesh, n, *_iters(n, quick))
            rows.append([n, max(world.allgather(mine))])
        found[who] = rows
    sleep_until_all(world)
    one, every = found["one_rank"], found["every_rank"]
    alpha = fit([(n, t) for n, t in one if n < LARGE])[0]
    beta_one = fit([(n, t) for n, t in one if n >= LARGE])[1]
    beta_every = fit([(n, t) for n, t in every if n >= LARGE])[1]
    lanes = max(1, round(per_node * beta_one / beta_every))
    return {
        "links": {"node": {"alpha": alpha, "bandwidth": 1 / beta_one, "lanes": lanes}},
        "nodes": nodes,
        "ranks_per_node": per_node,
        "placement": placement,
        "emulated": links.name if links is not None else None,
        "node_bandwidth": per_node / beta_every,
        **found,
    }


def _shifts(c, mesh, n: int, warm: int, timed: int) -> float:
    """Seconds a shift of ``n`` bytes along x (to the next node) takes, the median of ``timed``
    after ``warm`` untimed (a median: with 4 ranks on 2 cores one slow shift in 4 took the
    mean 13% over the emulated link's time); the ranks shifting cross a barrier of their own
    first."""
    import time

    buf, out = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
    mesh.sub("x").Barrier()
    times = []
    for i in range(warm + timed):
        if i == warm:
            c.reset()  # the emulated link's clock too: timed shifts queue from now
        t0 = time.perf_counter()
        c.shift(buf, "x", 1, out)
        times.append(time.perf_counter() - t0)
    c.reset()
    return float(np.median(times[warm:]))


def table_text(entry: dict) -> list[str]:
    """What calibrate prints of the network it measured."""
    link = entry["links"]["node"]
    where = f"emulated {entry['emulated']}" if entry["emulated"] else "measured"
    lines = [
        f"\n# the network between nodes ({where}: {entry['nodes']} nodes x "
        f"{entry['ranks_per_node']} ranks, a shift to the next node, one-way seconds per rank)",
        f"{'Size [B]':>12} {'one rank [us]':>14} {'MB/s':>9} {'every rank [us]':>16} {'MB/s':>9}",
    ]
    for (n, one), (_, every) in zip(entry["one_rank"], entry["every_rank"], strict=True):
        lines.append(
            f"{n:>12} {one * 1e6:>14.1f} {n / one / 1e6:>9.1f} {every * 1e6:>16.1f} "
            f"{n / every / 1e6:>9.1f}"
        )
    lines.append(
        f"# link: alpha {link['alpha'] * 1e6:.1f} us, {link['bandwidth'] / 1e6:.1f} MB/s a lane, "
        f"{link['lanes']} lane(s) (the node's ranks at once: "
        f"{entry['node_bandwidth'] / 1e6:.1f} MB/s)"
    )
    return lines


__all__ = [
    "ACROSS_NODES",
    "across_nodes",
    "add_network_arguments",
    "cluster_comm",
    "measure",
    "network_into",
    "network_nodes",
    "network_options",
    "nodes_of",
    "shared_memory",
    "table_text",
]
