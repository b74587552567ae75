"""What COSTA's relabelling saves from the user's layouts, against the bound that decides
whether it is worked out at all (layouts.endpoints.WORTH_MATCHING) and what working it out costs:
for every algorithm's default plan at P, the bytes its moves send in the order laid, the most
any order could save (each mesh rank on the rank holding most of what it needs) and what the
matching saved (float32), with the seconds of each.

    .venv/bin/python scripts/relabel_gain.py --shape 65536,65536,65536 --P 4096
        [--layouts block-cyclic:64]
"""

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.units import parse_shape, positive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, type=parse_shape, help="M,K,N")
    ap.add_argument("--P", type=positive, required=True, help="ranks")
    ap.add_argument("--layouts", default="block", help="the user's layouts of A, B and C")
    args = ap.parse_args()

    from algorithms import ALGORITHMS, PlanError, get
    from bench.model.redistribution import plan_moves
    from layouts import endpoints
    from layouts.endpoints import move_overlaps, user_layouts
    from layouts.tensorlayout import LayoutError
    from topology.mesh import MeshError

    shape = args.shape
    try:
        users = user_layouts(dict.fromkeys("ABC", args.layouts), shape, args.P)
    except (LayoutError, MeshError) as err:
        ap.error(str(err))
    print(
        f"{args.layouts} at P = {args.P}, {'x'.join(map(str, shape))}; worth matching above "
        f"{endpoints.WORTH_MATCHING:.0%} of the bytes moved in order"
    )
    print(
        f"{'algorithm':28} {'in order':>12} {'at most saved':>14} {'saved':>14} "
        f"{'bound [s]':>10} {'matching [s]':>12}"
    )
    for name in ALGORITHMS:
        module = get(name)
        if not module.grids(args.P):
            continue
        try:
            plan = module.plan(shape, args.P)
        except PlanError:
            continue
        moves = plan_moves(users, plan)
        if not moves:
            continue
        try:
            overlaps = move_overlaps(moves)
        except endpoints.TooManyPairs:
            print(f"{name:28} too many rank pairs to hold: not relabelled")
            continue
        t0 = time.perf_counter()
        in_order, at_most = endpoints.kept_bounds(moves, overlaps, np.arange(args.P), args.P)
        t1 = time.perf_counter()
        with mock.patch.object(endpoints, "WORTH_MATCHING", 0.0):  # matched whatever it saves
            matched = endpoints.relabelling(moves, args.P, 4, overlaps=overlaps)
        t2 = time.perf_counter()
        before = max(matched.bytes_before, 1)
        print(
            f"{name + ' ' + str(plan.mesh):28} {matched.bytes_before / 2**20:10.1f} MiB "
            f"{100 * 4 * (at_most - in_order) / before:13.3f}% "
            f"{100 * matched.bytes_saved / before:13.3f}% "
            f"{t1 - t0:10.3f} {t2 - t1:12.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
