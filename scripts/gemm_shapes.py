"""How well calibrate's GEMM tables price the GEMMs the algorithms run (issue 13): the tables
time a 5 x 5 x 5 grid of shapes (bench.calibration_gemm.GEMM_GRID) and the model interpolates
between them (bench.model.gemm_rates.GemmRates); here the shapes rank 0's schedule multiplies
(every algorithm's default grid at --ranks on the sweeps' shapes), the --top carrying most of
their flops, are timed as calibrate times its grid (bench.calibration_gemm._timed_passes: one
rank per core, the others asleep, GEMM_PASSES passes, each time taken beside a reference GEMM)
and set against each profile's price of them.

    mpiexec -n CORES .venv/bin/python scripts/gemm_shapes.py --profile P.json [P2.json ...]
        [--ranks 2,4,6,8,9,16] [--top 60] [--out timed.json]

Each table's level is divided out (the machine's speed drifts between a calibration and now,
and a plan's choices do not depend on it): per profile, the median, 90th percentile and largest
|price / time - 1| over the shapes, and the shapes priced furthest from their time. The spread
of the same shape's time from one timing to the next bounds what the tables can do: time twice
(--out, then --also an earlier --out) to see it.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
from model_accuracy import SHAPES as MODEL_SHAPES  # noqa: E402
from plan_accuracy import SHAPES as PLAN_SHAPES  # noqa: E402

# the model and planner sweeps' shapes, each once
SHAPES = tuple(dict.fromkeys((*MODEL_SHAPES.values(), *PLAN_SHAPES)))


def run_shapes(ranks: list[int], top: int) -> list[tuple[int, int, int]]:
    """The ``top`` GEMM shapes carrying most flops in rank 0's schedules (accumulating or not:
    the tables time C += A @ B)."""
    from algorithms import ALGORITHMS, PlanError, get
    from bench.model.schedule import schedule

    flops: Counter = Counter()
    for name in ALGORITHMS:
        module = get(name)
        for P in ranks:
            if not module.grids(P):
                continue
            for shape in SHAPES:
                try:
                    plan = module.plan(shape, P)
                except PlanError:
                    continue
                for e in schedule(module, plan):
                    if e.kind == "gemm":
                        flops[tuple(e.shape)] += e.flops
    return [s for s, _ in flops.most_common(top)]


def priced(profile: str, shapes) -> np.ndarray:
    from bench.model.gemm_rates import GemmRates

    rates = GemmRates.of(json.loads(Path(profile).read_text())["gemm"]["float32"])
    return np.array([rates.value(s) * 2.0 * np.prod(s) for s in shapes])


def report(name: str, shapes, ratio: np.ndarray, what: str = "price / time") -> None:
    r = ratio / np.median(ratio)
    off = abs(r - 1)
    print(
        f"{name}: median |{what} - 1| {np.median(off):.3f}, 90th percentile "
        f"{np.percentile(off, 90):.3f}, largest {off.max():.3f}; furthest: "
        + ", ".join(f"{'x'.join(map(str, shapes[i]))} {r[i]:.2f}" for i in np.argsort(-off)[:5])
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", nargs="+", required=True, help="profiles whose tables to check")
    ap.add_argument("--ranks", default="2,4,6,8,9,16", help="rank counts of the schedules")
    ap.add_argument("--top", type=int, default=60, help="shapes timed (most flops first)")
    ap.add_argument("--out", help="write the shapes' times here (JSON)")
    ap.add_argument("--also", help="an earlier --out: the times' own spread against it")
    args = ap.parse_args()
    for path in [*args.profile, *([args.also] if args.also else [])]:
        if not Path(path).is_file():
            ap.error(f"no such file: {path}")

    from bench.calibration_gemm import _timed_passes
    from bench.files import write_atomic
    from bench.machine import start_mpi

    shapes = run_shapes([int(x) for x in args.ranks.split(",")], args.top)
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    timed = _timed_passes(world, False, shapes, "float32", world.Get_rank() < facts["cores"], 1)
    if world.Get_rank() != 0:
        return 0
    cores = facts["cores"]
    print(f"{len(shapes)} shapes of the schedules at P = {args.ranks}, timed on {cores} cores")
    if args.out:
        rows = [[list(s), float(t)] for s, t in zip(shapes, timed, strict=True)]
        write_atomic(Path(args.out), json.dumps(rows))
    if args.also:
        before = {tuple(s): t for s, t in json.loads(Path(args.also).read_text())}
        common = [i for i, s in enumerate(shapes) if s in before]
        report(
            f"the times against {args.also}",
            [shapes[i] for i in common],
            np.array([before[shapes[i]] / timed[i] for i in common]),
            "then / now",
        )
    for profile in args.profile:
        report(profile, shapes, priced(profile, shapes) / timed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
