"""pylops-mpi's SUMMA (MPIMatrixMult kind="summa") timed like `distmm run`, for comparison.

    mpiexec -n 4 python scripts/peer_pylops.py --shape 3072,3072,3072 [--repeat 3] [--dtype float32]

Same machine set-up as distmm (yielding MPI when oversubscribed, BLAS threads per rank), same
deterministic inputs (each rank generates only its own blocks), barrier before and after each
timed repetition; rank 0 prints one JSON line. Needs `pip install pylops-mpi` (optional).
"""

import argparse
import json
import statistics
import sys

import numpy as np

from bench.machine import launched_rank, start_mpi
from bench.verify import SEED_A, SEED_B
from layouts.data import values


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dtype", default="float32")
    args = p.parse_args()
    M, K, N = (int(x) for x in args.shape.split(","))
    try:  # (optional: not among distmm's dependencies) before MPI starts, on every rank alike
        import pylops_mpi
    except ImportError:  # one line, from rank 0
        sys.exit(1 if launched_rank() else "peer_pylops.py needs pylops-mpi (pip install it)")
    MPI, _ = start_mpi()
    from pylops_mpi.basicoperators.MatrixMult import MPIMatrixMult, local_block_split

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    rows, ks = local_block_split((M, K), rank, world)
    a = values(
        SEED_A,
        np.arange(rows.start, rows.stop)[:, None],
        np.arange(ks.start, ks.stop)[None, :],
        dtype=args.dtype,
    )
    kr, cols = local_block_split((K, N), rank, world)
    b = values(
        SEED_B,
        np.arange(kr.start, kr.stop)[:, None],
        np.arange(cols.start, cols.stop)[None, :],
        dtype=args.dtype,
    )
    op = MPIMatrixMult(a, N, kind="summa", dtype=args.dtype)
    shapes = world.allgather(b.size)
    x = pylops_mpi.DistributedArray(
        global_shape=K * N,
        local_shapes=shapes,
        partition=pylops_mpi.Partition.SCATTER,
        dtype=args.dtype,
    )
    x[:] = b.ravel()
    op.matvec(x)  # warm-up
    times = []
    for _ in range(args.repeat):
        world.Barrier()
        t0 = MPI.Wtime()
        op.matvec(x)
        world.Barrier()
        times.append(MPI.Wtime() - t0)
    if rank == 0:
        med = statistics.median(times)
        print(
            json.dumps(
                {
                    "peer": "pylops-mpi summa",
                    "P": world.Get_size(),
                    "shape": [M, K, N],
                    "seconds": med,
                    "gflops": 2 * M * K * N / med / 1e9,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
