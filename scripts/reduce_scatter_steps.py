"""What a reduce-scatter after each GEMM costs a loop, blocking or posted (the steps of summa_a
and summa_b, algorithms/stationary.py): the world cut into groups of --group ranks, each lap a
GEMM of (--rows x 256) @ (256 x 2048) float32 and a reduce-scatter of its product in the group.

    mpiexec -n P .venv/bin/python scripts/reduce_scatter_steps.py [--group 4] [--rows 128]
        [--laps 20] [--rounds 2]

Prints rank 0's milliseconds per lap, barrier to barrier, of: the GEMMs alone; each
reduce-scatter blocking after its GEMM (what the loops do); posted after its GEMM and waited
before the next one's post; posted and waited one GEMM later (it needs a second product
buffer). MPI moves a posted reduce-scatter only inside its calls, here the next post or wait.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.units import positive


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--group", type=positive, default=4)
    p.add_argument("--rows", type=positive, default=128)
    p.add_argument("--laps", type=positive, default=20)
    p.add_argument("--rounds", type=positive, default=2)
    args = p.parse_args()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, g = world.Get_rank(), args.group
    if world.Get_size() % g or args.rows % g:
        sys.exit(
            0 if rank else f"reduce_scatter_steps: --group {g} must divide the ranks and --rows"
        )
    group = world.Split(rank // g, rank % g)
    rng = np.random.default_rng(rank)
    a_t = rng.standard_normal((2048, 256)).astype(np.float32).T
    chunk = rng.standard_normal((args.rows, 256)).astype(np.float32)
    products = [np.empty((args.rows, 2048), np.float32) for _ in range(2)]
    pieces = [np.empty((args.rows // g, 2048), np.float32) for _ in range(2)]

    def gemm(i):
        np.matmul(chunk, a_t, out=products[i % 2])

    def post(i):
        return group.Ireduce_scatter_block(products[i % 2], pieces[i % 2], op=MPI.SUM)

    def gemms_alone():
        for i in range(args.laps):
            gemm(i)

    def blocking():
        for i in range(args.laps):
            gemm(i)
            group.Reduce_scatter_block(products[i % 2], pieces[i % 2], op=MPI.SUM)

    def posted():
        request = MPI.REQUEST_NULL
        for i in range(args.laps):
            gemm(i)
            request.Wait()
            request = post(i)
        request.Wait()

    def posted_a_step_later():
        requests = []
        for i in range(args.laps):
            if len(requests) == 2:
                requests.pop(0).Wait()
            gemm(i)
            requests.append(post(i))
        MPI.Request.Waitall(requests)

    loops = [gemms_alone, blocking, posted, posted_a_step_later]
    for r in range(args.rounds):
        for loop in loops:
            world.Barrier()
            start = time.perf_counter()
            loop()
            world.Barrier()
            lap = (time.perf_counter() - start) / args.laps
            if rank == 0:
                print(f"round {r + 1} {loop.__name__:<20} {lap * 1e3:8.2f} ms a lap", flush=True)
    group.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
