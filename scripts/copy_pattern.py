"""What a redistribution's access pattern costs one process: the same bytes copied as one run,
and as pieces of one block-cyclic tile row (256 bytes of float32 at 64 elements) every
``--every``-th of a row, written into place (scatter) or read from it (gather).

    .venv/bin/python scripts/copy_pattern.py [--n 3072] [--tile 64] [--every 4] [--repeat 20]

A move from ``block-cyclic:64`` places such pieces (scripts/redistribution_throughput.py's
``pattern`` column: the same copies made contiguous, between the same fences). Median of
--repeat laps after one warm-up, in milliseconds.
"""

import argparse
import statistics
import time

import numpy as np


def lap(op, repeat: int) -> float:
    op()
    laps = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        op()
        laps.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(laps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=3072, help="rows and columns of the whole matrix")
    p.add_argument("--tile", type=int, default=64, help="elements of a piece")
    p.add_argument("--every", type=int, default=4, help="one piece of every this many")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    n, tile, every = args.n, args.tile, args.every
    if n % (tile * every):
        p.error(f"--n {n} is not a multiple of --tile x --every = {tile * every}")
    piece = np.dtype((np.void, tile * 4))  # one piece as one item: no per-element loop
    whole = np.ones((n, n), np.float32)
    part = np.zeros((n, n // every), np.float32)
    run = np.zeros(part.size, np.float32)
    pieces, packed = whole.view(piece)[:, ::every], part.view(piece)
    bytes_ = part.nbytes
    print(f"{bytes_ / 2**20:.1f} MiB as {bytes_ // (tile * 4)} pieces of {tile * 4} B")
    rows = (
        ("one run", lambda: np.copyto(run, whole.reshape(-1)[: run.size])),
        ("pieces written into place", lambda: np.copyto(pieces, packed)),
        ("pieces read from place", lambda: np.copyto(packed, pieces)),
    )
    for name, op in rows:
        print(f"{name:28s} {lap(op, args.repeat):7.2f} ms")


if __name__ == "__main__":
    main()
