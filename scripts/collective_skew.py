"""What a collective adds to a loop of GEMMs with more ranks than cores, by the GEMMs' length.

    mpiexec -n 16 .venv/bin/python scripts/collective_skew.py [--gemms 96,128,192,256,384,512]
        [--sizes 4096,65536,262144,2097152] [--kinds shift,bcast] [--laps 5]

Above the cores `distmm calibrate` times each collective in loops where every rank does a 512^3
GEMM before it, and a 128^3 one (bench/calibration_counts.py: stepped_collectives), and the
model prices a run's collectives between the two by the computation before each
(bench/model/steps.py). A rank that reaches a collective waits for partners the scheduler has
given a GEMM, so what it adds depends on how long the GEMMs are; this shows it at more lengths.
For each GEMM size (``step``: the loop's seconds per iteration without the collective) and each
message size this prints what the collective adds, as calibrate times it (barrier to barrier,
the loop with it less without, median of --laps pairs of laps taken in turn): on the rows and
then the columns of the most square grid of the ranks, every row (column) at once, as Cannon's
and SUMMA's steps issue them ("grid"), and on all the ranks, as T10's ring does ("all"). Rank 0
prints one row per (GEMM, kind, where, bytes).
"""

import argparse
import statistics
import sys

from mpi4py import MPI

from algorithms.events import COMM_KINDS
from bench.calibration import collective_ops
from bench.calibration_counts import grid_ops
from bench.calibration_overlap import gemm_lap
from bench.metadata import node_cores
from bench.units import ints
from layouts.named import grid


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gemms", type=ints(), default=(96, 128, 192, 256, 384, 512))
    p.add_argument("--sizes", type=ints(), default=(4096, 65536, 262144, 2097152))
    p.add_argument("--kinds", default="shift,bcast", help="of algorithms.events.COMM_KINDS")
    p.add_argument("--laps", type=int, default=5, help="pairs of laps, with and without")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    g, me = world.Get_size(), world.Get_rank()
    kinds = args.kinds.split(",")
    if g < 2 or any(k not in COMM_KINDS for k in kinds) or args.laps < 1:
        if me == 0:
            print(
                f"collective_skew: needs 2 ranks or more, --laps >= 1 and --kinds among "
                f"{', '.join(COMM_KINDS)} (got {g} ranks, --kinds {args.kinds})",
                file=sys.stderr,
            )
        return 2
    pr, q = grid(g)
    rows = world.Split(me // q, me) if pr >= 2 else None
    cols = world.Split(me % q, me) if pr >= 2 else None
    on_node = node_cores(world)
    if me == 0:
        print(f"{g} ranks on {on_node} cores; grid {pr} x {q}" + ("" if rows else " (none)"))
        print(
            f"{'gemm':>5} {'step [ms]':>10} {'kind':>6} {'where':>6} {'bytes':>9} "
            f"{'adds [ms]':>10} {'adds/step':>10}"
        )
    for n in args.gemms:
        lap, _ = gemm_lap(world, False, n)
        for size in args.sizes:
            nbytes, on_all = collective_ops(world, size, rooted=True)
            places = {"all": on_all}
            if rows is not None:
                places["grid"] = grid_ops(rows, cols, size)[1]  # as calibrate times them
            for kind in kinds:
                for where, ops in sorted(places.items(), reverse=True):
                    op = ops[kind]
                    op(0)  # warm-up
                    pairs = [(lap(), lap(op)) for _ in range(args.laps)]
                    step = statistics.median(a for a, _ in pairs)
                    adds = statistics.median(b for _, b in pairs) - step
                    if me == 0:
                        print(
                            f"{n:>5} {1e3 * step:>10.2f} {kind:>6} {where:>6} {nbytes:>9} "
                            f"{1e3 * adds:>10.2f} {adds / step:>10.3f}",
                            flush=True,
                        )
    for c in (rows, cols):
        if c is not None:
            c.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
