"""How long a direct move's fence takes when no rank is late: MPI's barrier against the
semaphore fence (layouts/direct.py), idle ranks, many laps each, the two taking turns.

    mpiexec -n P .venv/bin/python scripts/fence_latency.py [--laps 2000] [--rounds 3]

Prints rank 0's mean microseconds per crossing of each, per round. Where ranks outnumber cores
the semaphore fence is the one moves use; with a core per rank MPI's (DISTMM_FENCE).
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.units import positive


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--laps", type=positive, default=2000)
    p.add_argument("--rounds", type=positive, default=3)
    args = p.parse_args()
    from mpi4py import MPI

    from layouts.direct import SEM_BYTES, SemaphoreFence, node_cpus

    comm = MPI.COMM_WORLD
    os.environ["DISTMM_FENCE"] = "sem"
    win = MPI.Win.Allocate_shared(3 * SEM_BYTES if comm.Get_rank() == 0 else 0, 1, comm=comm)
    fence = SemaphoreFence.of(win, comm)
    kinds = {"mpi": comm.Barrier} | ({"sem": fence} if fence is not None else {})
    cores = node_cpus(comm)
    if comm.Get_rank() == 0:
        print(f"{comm.Get_size()} ranks on {cores} cores: mean us per crossing, idle ranks")
        print(f"{'round':>5} " + " ".join(f"{k:>8}" for k in kinds))
    for r in range(1, args.rounds + 1):
        took = {}
        for name, cross in kinds.items():
            for _ in range(args.laps // 10):  # warm-up
                cross()
            t0 = time.perf_counter()
            for _ in range(args.laps):
                cross()
            took[name] = (time.perf_counter() - t0) / args.laps * 1e6
        if comm.Get_rank() == 0:
            print(f"{r:>5} " + " ".join(f"{took[k]:>8.1f}" for k in kinds), flush=True)
    comm.Barrier()
    win.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
