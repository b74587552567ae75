"""What GEMMs cost with every rank of the node computing at once, at each rank count, against
the profile's price (what calibrate stores as each count's "gemm_shared", bench.calibration.
busy_gemm): under mpiexec, the first g ranks alone (the others asleep) for each g.

    mpiexec -n 16 .venv/bin/python scripts/gemm_busy.py [--sizes 512,1024] [--profile F]

Rank 0 prints one line per (g, n): seconds per n^3 GEMM + accumulate, barrier to barrier, and
with --profile the model's price of it at g ranks per node and their ratio.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibration import busy_gemm
from bench.calibration_counts import alone, counts_measured
from bench.machine import cores, start_mpi
from bench.model import Profile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,1024")
    ap.add_argument("--profile", help="machine profile: print its price beside each time")
    args = ap.parse_args()
    world = start_mpi()[0].COMM_WORLD
    profile = Profile.load(args.profile) if args.profile else None
    n_cores = cores()
    if world.Get_rank() == 0:
        print(f"{'ranks':>6}{'n':>6}{'seconds':>12}{'model':>12}{'ratio':>8}", flush=True)
    for g in [1, *counts_measured(world.Get_size())]:
        for n in map(int, args.sizes.split(",")):
            with alone(world, g) as sub:
                seconds = busy_gemm(sub, n_cores, False, n)[1] if sub is not None else None
            if world.Get_rank() == 0:
                model = profile.at(g).gemm_seconds(n, n, n, "float32") if profile else float("nan")
                print(f"{g:>6}{n:>6}{seconds:>12.6f}{model:>12.6f}{seconds / model:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
