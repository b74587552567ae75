"""What GEMMs cost with every rank of the node computing at once, at each rank count, against
the profile's price (what calibrate stores as each count's "gemm_shared", bench.calibration.
busy_gemm): under mpiexec, the first g ranks alone (the others asleep) for each g.

    mpiexec -n 16 .venv/bin/python scripts/gemm_busy.py [--sizes 512,1024]
        [--shapes M,K,N;M,K,N] [--profile F]

Rank 0 prints one line per (g, shape, C += A @ B or C = A @ B): seconds per GEMM (n^3 for each
of --sizes, M x K x N for each of --shapes), barrier to barrier, and with --profile the model's
price of it at g ranks per node (time slicing included) and their ratio. Time slicing differs
by shape: on a 2-core VM (results/vm-2c-amx) 8 ranks took 4.76 times as long as 2 over a
4096x512x128 GEMM (summa3d's on 8192x1024x512 at P = 8) and 4.31 times over 1024^3, where the
model takes one efficiency for every shape.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibration import busy_gemm
from bench.calibration_counts import alone, counts_measured
from bench.machine import start_mpi
from bench.model import Profile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--shapes", default="", help="M,K,N;M,K,N: GEMMs of these shapes too")
    ap.add_argument("--profile", help="machine profile: print its price beside each time")
    args = ap.parse_args()
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    profile = Profile.load(args.profile) if args.profile else None
    n_cores = facts["cores"]
    shapes = [(n, n, n) for n in map(int, args.sizes.split(","))]
    shapes += [tuple(map(int, s.split(","))) for s in args.shapes.split(";") if s.strip()]
    if world.Get_rank() == 0:
        print(
            f"{'ranks':>6}{'shape':>16}{'C':>4}{'seconds':>12}{'model':>12}{'ratio':>8}", flush=True
        )
    for g in [1, *counts_measured(world.Get_size())]:
        for shape in shapes:
            for accumulate in (True, False):
                with alone(world, g) as sub:
                    seconds = (
                        busy_gemm(sub, n_cores, False, shape=shape, accumulate=accumulate)[1]
                        if sub is not None
                        else None
                    )
                if world.Get_rank() == 0:
                    model = float("nan")
                    if profile:
                        at = profile.at(g)
                        model = at.gemm_seconds(*shape, "float32", accumulate) * profile.slowdown(g)
                    text = "x".join(map(str, shape))
                    print(
                        f"{g:>6}{text:>16}{'+=' if accumulate else '=':>4}{seconds:>12.6f}"
                        f"{model:>12.6f}{seconds / model:>8.2f}",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
