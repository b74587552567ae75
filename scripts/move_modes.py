"""Whether a run's moves take one time or two, job by job: the same `distmm run` from the user's
layouts launched again and again, each job's phases printed.

    .venv/bin/python scripts/move_modes.py [--ranks 4] [--algo tesseract] [--grid 1,1,RANKS]
        [--shape 1024,1024,1024] [--layouts block] [--jobs 12] [--repeat 3] [--pause 2]

With more ranks than cores MPI's barrier waits by polling and yielding the core, and in some
jobs, then in every repetition of them, each barrier takes a few milliseconds where it takes
0.1-1 in the others: the scheduler goes on running the yielding rank (results/vm-2c-zen3/
move_modes_s71_4.txt: tesseract 1x1x4 from block on 1024^3 at 4 ranks on 2 cores, moves in and
out 8.0-8.4 and 2.9-5.5 ms in 3 jobs of 12, 2.3-2.6 and 0.6-0.9 ms in the others, the GEMMs
alike). A move's two fences (layouts/direct.py) therefore wait asleep on semaphores there;
``--fences sem,mpi`` has the jobs take the two kinds in turn (DISTMM_FENCE) and sums up each
(fences_s72_16.txt: 2x2x4 on 2048^3 at 16 ranks, in / out 11.7 / 4.8 ms and no slow job of 12
asleep, 27.6 / 13.0 ms and 3-4 slow jobs of 12 polling). Each job's median redistribute_in /
multiply / redistribute_out is printed, then per phase the median over the jobs and the jobs
that took over --slow times it. --pause seconds pass before each job (a job after an idle spell
was slow more often).

A kernel had two modes too: ``--algo t10 --grid 16,1,1 --shape 8192,1024,512 --layouts native
--ranks 16`` (T10's ring, a shift after each short GEMM) took 0.17-0.20 s in some jobs and
0.11-0.13 in the rest, the slow jobs' ranks switching 4-7 times as often, until `distmm run`
made its blocks before having malloc keep freed memory (bench.machine.keep_freed;
results/vm-2c-zen3/t10_modes_s85.txt). ``--waits poll,heavy`` has the jobs take MPI's waiting
in turn as well: yielding the core on each empty poll, as distmm sets it above the cores
(bench/machine.py), or MPICH's heavy yield (MPIR_CVAR_ENABLE_HEAVY_YIELD=1, a short sleep).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import algorithms  # noqa: E402
from algorithms import PlanError  # noqa: E402
from bench.endtoend import PHASES  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.units import parse_shape, positive  # noqa: E402

FENCES = ("auto", "sem", "mpi")  # DISTMM_FENCE (layouts/direct.py)
WAITS = {"poll": "0", "heavy": "1"}  # MPIR_CVAR_ENABLE_HEAVY_YIELD


def choices(among):
    """A comma-separated list's parser, each item one of ``among``."""

    def parse(text: str) -> tuple[str, ...]:
        kinds = tuple(text.split(","))
        if not set(kinds) <= set(among):
            raise argparse.ArgumentTypeError(f"{text!r}: each is one of {', '.join(among)}")
        return kinds

    return parse


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=positive, default=4)
    p.add_argument("--algo", default="tesseract")
    p.add_argument(
        "--grid",
        help="the algorithm's grid (t10: its F_op; default: tesseract 1,1,RANKS, else "
        "the algorithm's own for --ranks)",
    )
    p.add_argument("--shape", type=parse_shape, default=(1024, 1024, 1024))
    p.add_argument("--layouts", default="block")
    p.add_argument("--jobs", type=positive, default=12)
    p.add_argument("--repeat", type=positive, default=3)
    p.add_argument("--pause", type=float, default=2.0)
    p.add_argument("--slow", type=float, default=2.0, help="a job this many times the median")
    p.add_argument(
        "--fences",
        type=choices(FENCES),
        default=("auto",),
        help="the jobs take these DISTMM_FENCE settings in turn (e.g. sem,mpi); default auto",
    )
    p.add_argument(
        "--waits",
        type=choices(WAITS),
        default=("poll",),
        help="... and these ways for MPI to wait (poll,heavy: MPICH's heavy yield); default poll",
    )
    args = p.parse_args()
    if args.slow <= 1 or args.pause < 0:
        p.error("--slow must be above 1 and --pause at least 0")
    if args.grid is None and args.algo == "tesseract":
        args.grid = f"1,1,{args.ranks}"  # (the algorithm's own would be 2-D for square counts)
    try:
        grid_flag = algorithms.get(args.algo).grid_option.name  # --fop for t10
    except PlanError as err:
        p.error(str(err))
    argv = run_argv(
        args.algo,
        args.shape,
        {grid_flag: args.grid} if args.grid else {},
        layouts=args.layouts,
        repeat=args.repeat,
        as_json=True,
    )
    launcher = Launcher.find()
    print(f"{args.jobs} jobs of `distmm {' '.join(argv)}` on {args.ranks} ranks")
    print(f"{'job':>4} {'fence/wait':>10} " + " ".join(f"{ph + ' [ms]':>22}" for ph in PHASES))
    kinds = [(f, w) for f in args.fences for w in args.waits]
    seen = {(k, ph): [] for k in kinds for ph in PHASES}
    jobs = {k: [] for k in kinds}
    for job in range(1, args.jobs + 1):
        kind = fence, wait = kinds[(job - 1) % len(kinds)]
        os.environ["DISTMM_FENCE"] = fence
        os.environ["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = WAITS[wait]
        time.sleep(args.pause)
        record, why = launcher.run_json(args.ranks, argv, 600, cwd=ROOT)
        if record is None:
            print(f"move_modes: job {job} failed: {why}", file=sys.stderr)
            return 1
        times = [record["phases"][ph]["seconds"] * 1e3 for ph in PHASES]
        jobs[kind].append(job)
        for ph, t in zip(PHASES, times, strict=True):
            seen[kind, ph].append(t)
        label = f"{fence}/{wait}"
        print(f"{job:>4} {label:>10} " + " ".join(f"{t:>22.2f}" for t in times), flush=True)
    for kind in jobs:  # each setting once, in the order given
        for ph in PHASES:
            times = seen[kind, ph]
            if not times:
                continue
            mid = statistics.median(times)
            slow = [j for j, t in zip(jobs[kind], times, strict=True) if t > args.slow * mid]
            which = f"fence/wait {'/'.join(kind)}, " if len(jobs) > 1 else ""
            print(
                f"{which}{ph}: median {mid:.2f} ms; over {args.slow:g}x it in {len(slow)} of "
                f"{len(times)} jobs" + (f" ({', '.join(map(str, slow))})" if slow else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
