"""How often `distmm compare` flags a change (issue 14's targets), from two results tables.

    .venv/bin/python scripts/significance_check.py OLD.csv NEW.csv             # identical sweeps
    .venv/bin/python scripts/significance_check.py OLD.csv NEW.csv --slowed summa
    .venv/bin/python scripts/significance_check.py OLD.csv NEW.csv --make-slowed summa \\
        --factor 1.2 --out SLOWED.csv     # a copy of NEW with summa's times x 1.2 (synthetic)

Prints, per algorithm, the configurations in both tables and how many were flagged slower or
faster (two-sided Mann-Whitney U over the per-repetition samples, alpha 0.05), then the targets:
- without --slowed (two identical sweeps): no significant difference for >= 95% of configurations;
- with --slowed ALGO (ALGO slowed by about 20% in NEW): every configuration of ALGO flagged slower,
  nothing else flagged.
Exit status 0 when the targets are met, 1 when not, 2 on bad input.
"""

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.comparison import FASTER, SLOWER, TableError, compare, read_table  # noqa: E402

TIME_COLUMNS = ("seconds", "seconds_min", "seconds_max")


def make_slowed(src: str, algos: set[str], factor: float, out: str) -> int:
    """Copy ``src`` with the ok rows of ``algos`` ``factor`` times slower; the rows changed."""
    with open(src, newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames or [], list(reader)
    changed = 0
    for row in rows:
        if row.get("status") != "ok" or row.get("algo") not in algos:
            continue
        for col in TIME_COLUMNS:
            if row.get(col):
                row[col] = repr(float(row[col]) * factor)
        if row.get("gflops"):
            row["gflops"] = repr(float(row["gflops"]) / factor)
        if row.get("samples"):
            row["samples"] = json.dumps([t * factor for t in json.loads(row["samples"])])
        changed += 1
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", metavar="OLD.csv")
    ap.add_argument("new", metavar="NEW.csv")
    ap.add_argument("--slowed", default="", help="comma-separated algorithms slowed in NEW")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-effect", type=float, default=5.0, help="percent, as distmm compare")
    ap.add_argument("--relative", action="store_true", help="as distmm compare --relative")
    ap.add_argument("--make-slowed", metavar="ALGOS", help="write a slowed copy of NEW instead")
    ap.add_argument("--factor", type=float, default=1.2, help="slowdown of --make-slowed")
    ap.add_argument("--out", help="where --make-slowed writes")
    args = ap.parse_args()
    if args.make_slowed:
        if not args.out:
            ap.error("--make-slowed needs --out")
        n = make_slowed(args.new, set(args.make_slowed.split(",")), args.factor, args.out)
        print(f"{args.out}: {n} rows of {args.make_slowed} x {args.factor:g} (synthetic)")
        return 0
    try:
        old, new = read_table(args.old), read_table(args.new)
    except TableError as err:
        print(f"significance_check: {err}", file=sys.stderr)
        return 2
    slowed = {a for a in args.slowed.split(",") if a}
    changes = [
        c
        for c in compare(
            old, new, args.alpha, min_effect=args.min_effect / 100, relative=args.relative
        )
        if c.ratio is not None
    ]
    if not changes:
        print("significance_check: no configuration in both tables", file=sys.stderr)
        return 2

    by_algo: dict[str, list] = defaultdict(list)
    for c in changes:
        by_algo[c.config[0]].append(c)
    print(f"# {new.path} against {old.path}: Mann-Whitney U, alpha {args.alpha:g}")
    print(f"{'algorithm':<12} {'configs':>7} {'slower':>7} {'faster':>7} {'flagged':>8}  samples")
    for algo, cs in by_algo.items():
        slower = sum(c.verdict == SLOWER for c in cs)
        faster = sum(c.verdict == FASTER for c in cs)
        counts = sorted({f"{len(c.old)}/{len(c.new)}" for c in cs})
        mark = " (slowed)" if algo in slowed else ""
        print(f"{algo:<12} {len(cs):>7} {slower:>7} {faster:>7} "
              f"{(slower + faster) / len(cs):>8.0%}  {','.join(counts)}{mark}")  # fmt: skip
    untestable = sum(not c.testable for c in changes)
    if untestable:
        print(f"note: {untestable} configurations have too few samples for any p < {args.alpha:g}")

    flagged = [c for c in changes if c.verdict in (SLOWER, FASTER)]
    if not slowed:
        quiet = 1 - len(flagged) / len(changes)
        met = quiet >= 0.95
        verdict = "met" if met else "MISSED"
        print(f"target: no significant difference for >= 95% of configurations: {quiet:.0%} "
              f"({len(changes) - len(flagged)} of {len(changes)}) -> {verdict}")  # fmt: skip
        return 0 if met else 1
    of_slowed = [c for c in changes if c.config[0] in slowed]
    caught = sum(c.verdict == SLOWER for c in of_slowed)
    false = [c for c in flagged if c.config[0] not in slowed]
    met_caught = bool(of_slowed) and caught == len(of_slowed)
    print(f"target: every configuration of {','.join(sorted(slowed))} flagged slower: "
          f"{caught} of {len(of_slowed)} -> {'met' if met_caught else 'MISSED'}")  # fmt: skip
    print(f"target: nothing else flagged: {len(false)} of {len(changes) - len(of_slowed)} "
          f"flagged -> {'met' if not false else 'MISSED'}")  # fmt: skip
    for c in false:
        print(f"  flagged: {c.label}  {c.ratio:.3f}x  p {c.p_value:.3g}")
    return 0 if met_caught and not false else 1


if __name__ == "__main__":
    sys.exit(main())
