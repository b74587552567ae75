"""SUMMA with and without overlap at several panel widths: measured against the model.

    python scripts/overlap_panels.py --profile F [--shape 8192,1024,512] [--ranks 6,9,12,16]
        [--panels 1,2,4] [--rounds 3] [--repeat 5] [--records FILE] [--timeout S]
    python scripts/overlap_panels.py --replay FILE --profile F

For each rank count P (SUMMA's default grid) and each panel width, the width that gives each
multiple of the grid's lcm(pr, pc) panels (--panels: those multiples), `distmm run summa` with
overlap on and with --no-overlap, the rounds interleaved; prints the medians over rounds of the
measured and predicted seconds, their ratio, and how much faster overlap ran. It measures what
the model's walk assumes above the cores: that a rank pays all of a broadcast it posted before
a GEMM (bench/model/walk.py), so that overlap on and off are priced the same there. With
--replay it runs nothing: the stored runs are priced again under --profile with the model as
the code now has it (what a change to the walk would make of them).
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import get  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.model import Profile, predict, schedule  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--shape", default="8192,1024,512")
    ap.add_argument("--ranks", default="6,9,12,16")
    ap.add_argument("--panels", default="1,2,4", help="multiples of lcm(pr, pc) panels")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--records", help="append every run's JSON record to this file")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run at most")
    ap.add_argument("--replay", metavar="JSONL", help="price stored --records again; run nothing")
    args = ap.parse_args()
    for name, path in (("profile", args.profile), ("records", args.replay)):
        if path is not None and not Path(path).is_file():
            sys.exit(f"overlap_panels.py: {name} {path} does not exist")
    if args.replay:
        runs = replayed(Path(args.replay), Profile.load(args.profile))
        print(f"{args.replay} priced again under {args.profile}, medians over its rounds")
    else:
        runs = measured(args)
        print(f"summa {args.shape}, {args.rounds} rounds of --repeat {args.repeat}, medians")
    heads = ("P", 3), ("grid", 5), ("panel", 6), ("overlap", 8), ("measured", 9)
    heads += ("predicted", 9), ("pred/meas", 9), ("off/on", 7)
    print(" ".join(f"{h:>{w}}" for h, w in heads))
    ratios: dict = {True: [], False: []}
    for (P, grid, width, overlap), got in runs.items():
        if not got:
            continue
        meas = statistics.median(m for m, _ in got)
        pred = statistics.median(p for _, p in got)
        ratios[overlap].append(pred / meas)
        line = f"{P:>3} {grid:>5} {width:>6} {'on' if overlap else 'off':>8} {meas:>9.4g}"
        line += f" {pred:>9.4g} {pred / meas:>9.2f}"
        if not overlap and runs.get((P, grid, width, True)):
            on = statistics.median(m for m, _ in runs[(P, grid, width, True)])
            line += f" {meas / on:>7.2f}"
        print(line)
    for overlap, rs in ratios.items():
        if rs:
            print(
                f"overlap {'on' if overlap else 'off'}: {len(rs)} cases, pred/meas median "
                f"{statistics.median(rs):.2f}, median |pred/meas - 1| "
                f"{100 * statistics.median(abs(r - 1) for r in rs):.1f}%"
            )
    return 0


def measured(args) -> dict:
    """{(P, grid, panel width, overlap): [(measured, predicted seconds) per round]}, run now."""
    shape = tuple(map(int, args.shape.split(",")))
    launcher = Launcher.find()
    cases = []
    for P in map(int, args.ranks.split(",")):
        pr, pc = get("summa").plan(shape, P, overlap=True).mesh.shape
        for times in map(int, args.panels.split(",")):
            width = math.ceil(shape[1] / (math.lcm(pr, pc) * times))
            cases += [(P, f"{pr}x{pc}", width, overlap) for overlap in (True, False)]
    runs: dict = {c: [] for c in cases}
    for _ in range(args.rounds):
        for P, grid, width, overlap in cases:
            argv = run_argv(
                "summa",
                shape,
                {"panel": width},
                overlap=overlap,
                repeat=args.repeat,
                profile=args.profile,
                as_json=True,
            )
            record, why = launcher.run_json(P, argv, args.timeout, cwd=ROOT)
            if record is None:
                print(f"failed: {' '.join(argv)}: {why}", file=sys.stderr)
                continue
            runs[(P, grid, width, overlap)].append((record["seconds"], record["predicted_seconds"]))
            if args.records:
                with open(args.records, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return runs


def replayed(path: Path, profile: Profile) -> dict:
    """:func:`measured`'s cases from stored records, each priced again under ``profile`` as
    `distmm run --profile` prices it (rank 0's schedule, the run's ranks on this node)."""
    runs: dict = {}
    summa = get("summa")
    for line in path.read_text().splitlines():
        r = json.loads(line)
        width, P = r["params"]["panel"], r["P"]
        plan = summa.plan(tuple(r["shape"]), P, overlap=r["overlap"], panel=width)
        events = schedule(summa, plan, 0, "float32", None, None)
        predicted = predict(events, profile, "float32", P, P=P).seconds
        key = (P, "x".join(map(str, r["grid"])), width, r["overlap"])
        runs.setdefault(key, []).append((r["seconds"], predicted))
    return runs


if __name__ == "__main__":
    sys.exit(main())
