"""What a message costs through the communication layer over MPI's own, on two ranks.

    mpiexec -n 2 .venv/bin/python scripts/message_overhead.py [--bytes 8] [--shifts 1000]
        [--laps 3] [--emulate 100gbe,1gbe]

Rank 0 prints, per lap, microseconds per message of: MPI's Sendrecv alone, and Irecv, Isend
and Waitall alone; a shift through algorithms/comm.py (events recorded, as a run records them),
and an ishift and its wait (what an overlapping algorithm sends); and, for each preset of
``--emulate``, the same shift held to that network between two emulated nodes
(``cluster:2,1``). The layer's own cost is a shift's time less Sendrecv's, an ishift's less
Irecv, Isend and Waitall's; an emulated shift should
take about the preset's latency (its alpha plus bytes over bandwidth) where that is longer.
"""

import argparse
import time
from dataclasses import replace

import numpy as np
from mpi4py import MPI

from algorithms.comm import Comm
from topology import AbstractMesh, Mesh
from topology.links import LinkModel
from topology.tree import default_binding, parse_topology


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bytes", type=int, default=8)
    p.add_argument("--shifts", type=int, default=1000)
    p.add_argument("--laps", type=int, default=3)
    p.add_argument("--emulate", default="100gbe,1gbe", help="network presets, comma list")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        if world.Get_rank() == 0:
            print("message_overhead.py: run it on 2 ranks (mpiexec -n 2)")
        return 2
    other = 1 - world.Get_rank()
    tree = parse_topology("cluster:2,1")
    abstract = AbstractMesh((("x", 2), ("y", 1)))
    mesh = Mesh(abstract, world, binding=default_binding(abstract, tree), tree=tree)
    mesh.sub("x")
    buf, out = np.zeros(args.bytes, np.uint8), np.zeros(args.bytes, np.uint8)

    def sendrecv() -> None:
        world.Sendrecv(buf, dest=other, sendtag=7, recvbuf=out, source=other, recvtag=7)

    def isend_irecv() -> None:
        requests = [world.Irecv(out, source=other, tag=7), world.Isend(buf, dest=other, tag=7)]
        MPI.Request.Waitall(requests)

    ways = {"Sendrecv alone": sendrecv, "Irecv, Isend, Waitall alone": isend_irecv}
    for spec in [None, *filter(None, args.emulate.split(","))]:
        links = None if spec is None else replace(LinkModel.load(spec, tree), emulated=True)
        comm = Comm(mesh, links=links)
        name = "shift through the layer" + (f", held to {spec}" if spec else "")
        ways[name] = lambda comm=comm: comm.shift(buf, "x", 1, out)
        if spec is None:  # the overlapped shift (algorithms' default): ishift, then its wait
            ways["ishift and wait through the layer"] = lambda c=comm: c.ishift(
                buf, "x", 1, out
            ).wait()
        ways[name + " (reset)"] = comm.reset  # its events and clock, between laps
    for lap in range(args.laps):
        for name, way in ways.items():
            if name.endswith("(reset)"):
                way()
                continue
            world.Barrier()
            start = time.perf_counter()
            for _ in range(args.shifts):
                way()
            us = (time.perf_counter() - start) / args.shifts * 1e6
            if world.Get_rank() == 0:
                print(f"lap {lap + 1}: {name:<40} {us:8.2f} us a message ({args.bytes} B)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
