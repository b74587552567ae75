"""Whether a run's moves take one time or two, job by job: the same `distmm run` from the user's
layouts launched again and again, each job's phases printed.

    .venv/bin/python scripts/move_modes.py [--ranks 4] [--algo tesseract] [--grid 1,1,4]
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
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.endtoend import PHASES  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.units import parse_shape, positive  # noqa: E402

FENCES = ("auto", "sem", "mpi")  # DISTMM_FENCE (layouts/direct.py)


def fences(text: str) -> tuple[str, ...]:
    """``--fences``: fence kinds, comma-separated."""
    kinds = tuple(text.split(","))
    if not set(kinds) <= set(FENCES):
        raise argparse.ArgumentTypeError(f"{text!r}: each fence is one of {', '.join(FENCES)}")
    return kinds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=positive, default=4)
    p.add_argument("--algo", default="tesseract")
    p.add_argument("--grid", default="1,1,4")
    p.add_argument("--shape", type=parse_shape, default=(1024, 1024, 1024))
    p.add_argument("--layouts", default="block")
    p.add_argument("--jobs", type=positive, default=12)
    p.add_argument("--repeat", type=positive, default=3)
    p.add_argument("--pause", type=float, default=2.0)
    p.add_argument("--slow", type=float, default=2.0, help="a job this many times the median")
    p.add_argument(
        "--fences",
        type=fences,
        default=("auto",),
        help="the jobs take these DISTMM_FENCE settings in turn (e.g. sem,mpi); default auto",
    )
    args = p.parse_args()
    if args.slow <= 1 or args.pause < 0:
        p.error("--slow must be above 1 and --pause at least 0")
    argv = run_argv(
        args.algo,
        args.shape,
        {"grid": args.grid},
        layouts=args.layouts,
        repeat=args.repeat,
        as_json=True,
    )
    launcher = Launcher.find()
    print(f"{args.jobs} jobs of `distmm {' '.join(argv)}` on {args.ranks} ranks")
    print(f"{'job':>4} {'fence':>5} " + " ".join(f"{ph + ' [ms]':>22}" for ph in PHASES))
    seen = {(f, ph): [] for f in args.fences for ph in PHASES}
    jobs = {f: [] for f in args.fences}
    for job in range(1, args.jobs + 1):
        fence = args.fences[(job - 1) % len(args.fences)]
        os.environ["DISTMM_FENCE"] = fence
        time.sleep(args.pause)
        record, why = launcher.run_json(args.ranks, argv, 600, cwd=ROOT)
        if record is None:
            print(f"move_modes: job {job} failed: {why}", file=sys.stderr)
            return 1
        times = [record["phases"][ph]["seconds"] * 1e3 for ph in PHASES]
        jobs[fence].append(job)
        for ph, t in zip(PHASES, times, strict=True):
            seen[fence, ph].append(t)
        print(f"{job:>4} {fence:>5} " + " ".join(f"{t:>22.2f}" for t in times), flush=True)
    for fence in jobs:  # each setting once, in the order given
        for ph in PHASES:
            times = seen[fence, ph]
            if not times:
                continue
            mid = statistics.median(times)
            slow = [j for j, t in zip(jobs[fence], times, strict=True) if t > args.slow * mid]
            kind = f"fence {fence}, " if len(jobs) > 1 else ""
            print(
                f"{kind}{ph}: median {mid:.2f} ms; over {args.slow:g}x it in {len(slow)} of "
                f"{len(times)} jobs" + (f" ({', '.join(map(str, slow))})" if slow else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
