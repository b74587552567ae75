"""Overlap on and off, measured and predicted: does the model order each pair as the runs do?

    .venv/bin/python scripts/overlap_pairs.py --profile results/<machine>/profile.json
        [--ranks 4,8,12,16] [--algos cannon,summa,t10] [--shapes square,tall-skinny]
        [--repeat 5] [--rounds 3] [--out results/overlap_pairs.csv]

For each P, algorithm (its default grid or F_op at P) and shape, runs ``distmm run`` with
overlap on and with ``--no-overlap``, the two in turn for ``--rounds`` rounds (median kept), and
prints measured and predicted seconds of each, on over off for both, and whether the model
orders the pair as measured (a pair measured within 3% of each other counts as a tie, either
order right). Above the cores a posted message no longer costs the rank all of its price
(bench/calibration_overlap.exposure_above): before that the model priced the two alike there
and the planner named plans without overlap that ran 1.2-1.4 times as long.
"""

import argparse
import statistics
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import get  # noqa: E402
from algorithms.plan import PlanError  # noqa: E402
from bench.files import save_csv_atomic  # noqa: E402
from bench.launch import Launcher  # noqa: E402
from bench.units import ints  # noqa: E402

SHAPES = {  # as scripts/model_accuracy.py's
    "square": (2048, 2048, 2048),
    "tall-skinny": (8192, 1024, 512),
    "K-large": (768, 8192, 768),
}
TIE = 0.03


def run(P: int, argv: list[str]) -> dict | None:
    record, why = Launcher.find().run_json(P, argv, 900, cwd=ROOT)
    if record is None:
        print(f"  failed: {' '.join(argv)}: {why}", file=sys.stderr)
    return record


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", required=True)
    p.add_argument("--ranks", type=ints(), default=(4, 8, 12, 16))
    p.add_argument("--algos", default="cannon,summa,t10")
    p.add_argument("--shapes", default="square,tall-skinny")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default="results/overlap_pairs.csv")
    args = p.parse_args()
    if not Path(args.profile).is_file():
        print(f"overlap_pairs: no profile {args.profile}", file=sys.stderr)
        return 2
    rows = []
    for P in args.ranks:
        for algo in args.algos.split(","):
            for name in args.shapes.split(","):
                try:  # an algorithm that cannot run on P ranks (Cannon: p x p) is left out
                    get(algo).plan(SHAPES[name], P)
                except PlanError:
                    continue
                shape = ",".join(map(str, SHAPES[name]))
                base = ["run", algo, "--shape", shape, "--repeat", str(args.repeat)]
                base += ["--profile", args.profile, "--json"]
                got = {True: [], False: []}
                for _ in range(args.rounds):
                    for on in (True, False):
                        r = run(P, base if on else [*base, "--no-overlap"])
                        if r is not None:
                            got[on].append(r)
                if not got[True] or not got[False]:
                    continue
                on, off = (
                    (
                        statistics.median(r["seconds"] for r in got[o]),
                        got[o][0]["predicted_seconds"],
                    )
                    for o in (True, False)
                )
                measured, predicted = on[0] / off[0], on[1] / off[1]
                right = abs(measured - 1) <= TIE or (measured < 1) == (predicted < 1)
                grid = "x".join(map(str, got[True][0]["grid"]))
                rows.append((P, algo, grid, name, *on, *off, measured, predicted, right))
                print(
                    f"P={P} {algo} {grid} {name}: on/off measured {measured:.3f}, "
                    f"predicted {predicted:.3f}",
                    flush=True,
                )
    cols = ["P", "algo", "grid", "shape", "on_s", "on_pred_s", "off_s", "off_pred_s"]
    table = pd.DataFrame(rows, columns=[*cols, "on/off", "on/off pred", "ordered"])
    save_csv_atomic(args.out, table)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    n = len(table)
    print(
        f"\npairs {n}: the model orders {int(table['ordered'].sum())} as measured (a tie within "
        f"{TIE:.0%} either way); on/off measured a median {table['on/off'].median():.3f}, "
        f"predicted {table['on/off pred'].median():.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
