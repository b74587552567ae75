"""How much calibrate's GEMM table varies from one calibration to the next, by the number of
passes over its grid of shapes (bench.calibration_gemm.GEMM_PASSES), and what that does to the
planner.

    mpiexec -n 2 .venv/bin/python scripts/gemm_passes.py --time DIR [--passes 3,6] [--tables 3]
    .venv/bin/python scripts/gemm_passes.py --compare DIR [--profile P --records R.jsonl ...]

--time times --tables tables with each passes count, the counts taking turns, with calibrate's
own code (gemm_rates: one rank per core, the others asleep) and writes DIR/passes_P_I.json.
--compare prints, for every two tables with the same passes, how their float32 times differ
shape by shape once each table's level is divided out (the machine's speed drifts between
tables, and the planner's choices do not depend on it): the ratio's 10th and 90th percentiles
and its median |r - 1|. With --profile and --records it also prices stored planner sweeps
(scripts/plan_accuracy.py --records) with the profile's GEMM table swapped for each table
(scripts/replan.py) and prints the first choices that were measured fastest and within 10%.
"""

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def time_tables(out: Path, passes: list[int], tables: int) -> None:
    import bench.calibration_gemm as cg
    from bench.calibration import now
    from bench.files import write_atomic
    from bench.machine import start_mpi

    MPI, facts = start_mpi()
    world, cores = MPI.COMM_WORLD, facts["cores"]
    for i, p in itertools.product(range(1, tables + 1), passes):
        cg.GEMM_PASSES = p
        t0 = now()
        table = cg.gemm_rates(world, False, cores)
        if world.Get_rank() == 0:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(out / f"passes_{p}_{i}.json", json.dumps(table))
            print(f"passes {p}, table {i}: {now() - t0:.0f} s", flush=True)


def load(path: Path) -> np.ndarray:
    return np.array([row[3] for row in json.loads(path.read_text())["float32"]])


def compare(out: Path, profile: str | None, records: list[str]) -> None:
    groups: dict[int, list[Path]] = {}
    for f in sorted(out.glob("passes_*_*.json")):
        groups.setdefault(int(f.stem.split("_")[1]), []).append(f)
    for p, files in sorted(groups.items()):
        for a, b in itertools.combinations(files, 2):
            r = load(b) / load(a)
            r /= np.median(r)
            lo, hi = np.percentile(r, [10, 90])
            print(
                f"passes {p}: {a.stem} vs {b.stem}: shape by shape 10th-90th percentile "
                f"{lo:.3f}-{hi:.3f}, median |r - 1| {np.median(abs(r - 1)):.3f}"
            )
    if not profile:
        return
    base = json.loads(Path(profile).read_text())
    for p, files in sorted(groups.items()):
        for f in files:
            base["gemm"] = json.loads(f.read_text())
            with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
                json.dump(base, tmp)
                tmp.flush()
                for rec in records:
                    got = subprocess.run(
                        [sys.executable, str(ROOT / "scripts" / "replan.py"), "--records", rec]
                        + ["--profile", tmp.name],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    line = next(ln for ln in got.splitlines() if ln.startswith("cases "))
                    print(f"passes {p}, {f.stem}, {Path(rec).name}: {line}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time", type=Path, help="time the tables into this folder (under MPI)")
    ap.add_argument("--compare", type=Path, help="compare the tables in this folder")
    ap.add_argument("--passes", default="3,6")
    ap.add_argument("--tables", type=int, default=3, help="tables with each passes count")
    ap.add_argument("--profile", help="a profile whose GEMM table each table replaces")
    ap.add_argument("--records", nargs="*", default=[], help="plan_accuracy.py --records files")
    args = ap.parse_args()
    if bool(args.time) == bool(args.compare):
        ap.error("give --time DIR or --compare DIR")
    if args.time:
        time_tables(args.time, [int(p) for p in args.passes.split(",")], args.tables)
    else:
        compare(args.compare, args.profile, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
