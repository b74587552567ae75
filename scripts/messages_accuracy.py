"""The model's price of messages where the ranks fit the cores, against runs: overlapped and
blocking runs whose time is largely messages, each priced with one or more profiles.

    .venv/bin/python scripts/messages_accuracy.py --profile NEW.json [--profile OLD.json ...]
        [--ranks 2] [--repeat 5] [--records results/messages_accuracy.jsonl]
    .venv/bin/python scripts/messages_accuracy.py --profile P.json --records FILE --replay

Runs every case (algorithm and grid at --ranks, shapes with a thin dimension, so that their
blocks' messages are a good part of the time, and the three shapes of scripts/model_accuracy.py)
with overlap on and off under mpiexec, keeps each record (JSON lines in --records), then prices
each with every profile given and prints, per profile: the median |predicted / measured - 1|
over all runs, overlapped and blocking, and over the runs that spent over 10% outside their
GEMMs (1 - compute-only / measured); and, over those, the median of the time the model puts
outside the GEMMs (predicted - its GEMMs) over the time measured there (measured - compute
only). --replay prices the records of an earlier sweep again (profiles made by another version
of calibrate, or the model changed) without running anything.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import get  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.model import Profile, predict, schedule  # noqa: E402

SHAPES = (
    "4096,4096,64",
    "64,4096,4096",
    "4096,256,4096",
    "2048,2048,2048",
    "8192,1024,512",
    "768,8192,768",
)
# what each run's record keeps: what pricing it again needs
KEPT = ("algo", "P", "grid", "shape", "dtype", "overlap", "seconds", "compute_seconds")
CASES = {  # P -> (algorithm, grid or F_op)
    2: [
        ("summa", (1, 2)),
        ("summa", (2, 1)),
        ("t10", (1, 1, 2)),
        ("t10", (2, 1, 1)),
        ("t10", (1, 2, 1)),
        ("tesseract", (1, 1, 2)),
    ],
    4: [
        ("cannon", (2, 2)),
        ("summa", (2, 2)),
        ("t10", (2, 1, 2)),
        ("t10", (1, 4, 1)),
        ("tesseract", (1, 1, 4)),
    ],
    8: [
        ("cannon25d", (2, 2, 2)),
        ("summa", (2, 4)),
        ("t10", (2, 2, 2)),
        ("tesseract", (2, 2, 2)),
    ],
    16: [
        ("cannon", (4, 4)),
        ("summa", (4, 4)),
        ("t10", (4, 1, 4)),
        ("t10", (2, 4, 2)),
        ("tesseract", (2, 2, 4)),
    ],
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", action="append", required=True, help="(repeatable)")
    p.add_argument("--ranks", type=int, default=2, choices=sorted(CASES))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--records", default="results/messages_accuracy.jsonl")
    p.add_argument("--replay", action="store_true", help="price the records, run nothing")
    args = p.parse_args()
    records = Path(args.records)
    if not args.replay:
        records.parent.mkdir(parents=True, exist_ok=True)
        records.write_text("")
        launcher = Launcher.find(None)
        for shape in SHAPES:
            for algo, grid in CASES[args.ranks]:
                options = {get(algo).grid_option.name: grid}
                for overlap in (True, False):
                    argv = run_argv(
                        algo,
                        shape.split(","),
                        options,
                        overlap=overlap,
                        repeat=args.repeat,
                        as_json=True,
                    )
                    rec, why = launcher.run_json(args.ranks, argv, 300)
                    if rec is None:
                        print(f"{algo} {grid} {shape}: {why}", file=sys.stderr)
                        continue
                    with records.open("a") as f:
                        f.write(json.dumps({k: rec[k] for k in KEPT}) + "\n")
    runs = [json.loads(line) for line in records.read_text().splitlines() if line]
    for path in args.profile:
        _report(path, runs)
    return 0


def _report(path: str, runs: list[dict]) -> None:
    profile = Profile.load(path)
    errors: dict[str, list[float]] = {"overlapped": [], "blocking": [], "messages": []}
    outside = []
    for r in runs:
        algorithm = get(r["algo"])
        grid = {algorithm.grid_option.name: tuple(r["grid"])}
        plan = algorithm.plan(tuple(r["shape"]), r["P"], overlap=r["overlap"], **grid)
        pred = predict(
            schedule(algorithm, plan, 0, r["dtype"]), profile, r["dtype"], r["P"], P=r["P"]
        )
        error = pred.seconds / r["seconds"] - 1
        errors["overlapped" if r["overlap"] else "blocking"].append(error)
        if 1 - r["compute_seconds"] / r["seconds"] > 0.1:
            errors["messages"].append(error)
            outside.append(
                (pred.seconds - pred.phases["gemm"]) / (r["seconds"] - r["compute_seconds"])
            )
    every = errors["overlapped"] + errors["blocking"]

    def median_abs(xs) -> str:
        return f"{100 * statistics.median(abs(x) for x in xs):.1f}%" if xs else "-"

    print(
        f"{path}: {len(every)} runs, median |pred/meas - 1| {median_abs(every)} "
        f"(signed {100 * statistics.median(every):+.1f}%), {sum(abs(x) > 0.3 for x in every)} "
        f"over 30%; overlapped {median_abs(errors['overlapped'])}, blocking "
        f"{median_abs(errors['blocking'])}; {len(errors['messages'])} runs over 10% outside "
        f"their GEMMs {median_abs(errors['messages'])}, the model's time outside the GEMMs / "
        f"measured {statistics.median(outside) if outside else float('nan'):.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
