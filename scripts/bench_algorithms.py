"""The algorithms benchmark (issue 3): overlap efficiency and a peer comparison, printed as a table.

    .venv/bin/python scripts/bench_algorithms.py [--shape 3072,3072,3072] [--repeat 3]
        [--ranks 4,8,9,16] [--peer] [--out results/bench_algorithms.csv]

For every algorithm at every rank count it admits among --ranks it runs
``mpiexec -n P distmm run ALGO --json`` and reports time, GFLOP/s and the ratio of the
compute-only time (the same ranks running only their local GEMMs, measured in the same run) to the
total; with --peer, pylops-mpi's SUMMA runs on the same shape and square P beside SUMMA and Cannon.
Each run is a separate job, one at a time, so they do not disturb each other.
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from bench.files import save_csv_atomic  # noqa: E402
from bench.launch import DISTMM, Launcher, run_argv  # noqa: E402
from bench.units import parse_ints  # noqa: E402


def launch(P: int, argv: list[str], program=DISTMM, timeout: int = 900) -> dict | None:
    """The JSON record `program ARGV` prints on P ranks (None, said on stderr, if it fails)."""
    record, why = Launcher.find().run_json(P, argv, timeout, program=program, cwd=ROOT)
    if record is None:
        print(f"  failed: {' '.join(argv)}: {why}", file=sys.stderr)
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="3072,3072,3072")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--ranks", default="4,8,9,16")
    p.add_argument("--algos", default=",".join(ALGORITHMS))
    p.add_argument("--peer", action="store_true", help="also time pylops-mpi's SUMMA")
    p.add_argument("--out", default="results/bench_algorithms.csv")
    args = p.parse_args()
    rows = []
    for P in (int(x) for x in args.ranks.split(",")):
        for algo in args.algos.split(","):
            if not get(algo).grids(P):
                continue
            print(f"P={P:>2} {algo} ...", file=sys.stderr, flush=True)
            r = launch(
                P, run_argv(algo, parse_ints(args.shape, 3), repeat=args.repeat, as_json=True)
            )
            if r:
                rows.append(
                    {
                        "P": P,
                        "algo": algo,
                        "grid": "x".join(map(str, r["grid"])),
                        "seconds": r["seconds"],
                        "gflops": r["gflops"],
                        "compute_seconds": r["compute_seconds"],
                        "compute/total": r["compute_ratio"],
                        "verified": r["verified"],
                    }
                )
        if args.peer and round(P**0.5) ** 2 == P:
            print(f"P={P:>2} pylops-mpi summa ...", file=sys.stderr, flush=True)
            r = launch(
                P,
                ["--shape", args.shape, "--repeat", str(args.repeat)],
                program=(sys.executable, "scripts/peer_pylops.py"),
            )
            if r:
                rows.append(
                    {
                        "P": P,
                        "algo": "pylops-mpi summa",
                        "grid": "",
                        "seconds": r["seconds"],
                        "gflops": r["gflops"],
                    }
                )
    table = pd.DataFrame(rows)
    save_csv_atomic(args.out, table)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    if args.peer:
        for P, group in table.groupby("P"):
            peer = group[group["algo"] == "pylops-mpi summa"]["seconds"]
            for algo in ("summa", "cannon"):
                mine = group[group["algo"] == algo]["seconds"]
                if len(peer) and len(mine):
                    print(f"P={P}: {algo} / pylops-mpi time = {mine.iloc[0] / peer.iloc[0]:.2f}")


if __name__ == "__main__":
    main()
