"""Layout changes timed with the caches emptied first (as calibrate times them) and warm (the
blocks just written, as a run's small blocks may still be), against the profile's price: is a
redistribution priced slow because calibrate's moves start cold? Under mpiexec, the first g
ranks alone (the others asleep) for each g of --counts.

    mpiexec -n 16 .venv/bin/python scripts/moves_warmth.py [--counts 4,8,16] [--mib 0.25,1,4,16]
        [--profile F]

Rank 0 prints one line per (g, move, bytes a rank holds): the loads the model prices
(messages, bytes sent, bytes copied: bench.model.redistribution.loads), the median seconds cold
and warm (barrier to barrier, as calibrate and a run's phases time them; the least of two
alternating rounds each), and with --profile the model's price (bench.model.redistribution.
pairs_seconds, every rank on this node) and each time over it.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibration_counts import A2AV_MOVES, _evicting, alone, timed_move
from bench.machine import start_mpi
from bench.model import Profile
from bench.model.redistribution import pairs_seconds


def timings(comm, nbytes: int, names: tuple[str, str], n_cores: int) -> tuple | None:
    """(calibrate's move, bench.calibration_counts.TimedMove; cold seconds, warm seconds) of
    one move on ``comm``; None where it moves nothing between ranks."""
    from mpi4py import MPI

    from layouts.direct import direct, release
    from layouts.transfer import transfer

    g = comm.Get_size()
    found = timed_move(names, nbytes, g, max(g / n_cores, 1.0))
    if found is None:
        return None
    move = transfer(found.src, found.src_mesh, found.dst, found.dst_mesh, comm)
    move = direct(move, comm, np.float32)
    block = np.ones(found.src.block_shape, np.float32)
    evict = _evicting(comm) if g <= n_cores else (lambda: None)
    best = {"cold": np.inf, "warm": np.inf}
    for _ in range(2):  # rounds, cold and warm in turn
        for mode in best:
            laps = []
            for _ in range(8):
                if mode == "cold":
                    evict()
                comm.Barrier()
                t0 = MPI.Wtime()
                move(block, comm, True)
                comm.Barrier()
                laps.append(MPI.Wtime() - t0)
            best[mode] = min(best[mode], float(np.median(laps[1:])))
    release(move)
    cold, warm = (comm.bcast(best[k], root=0) for k in ("cold", "warm"))
    return found, cold, warm


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="4,8,16", help="rank counts (at most the job's)")
    ap.add_argument("--mib", default="0.25,1,4,16", help="MiB of the matrix each rank holds")
    ap.add_argument("--profile", help="machine profile: print its price beside each time")
    args = ap.parse_args()
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    profile = Profile.load(args.profile) if args.profile else None
    n_cores = facts["cores"]
    root = world.Get_rank() == 0
    if root:
        print(
            f"{'ranks':>5} {'move':<22}{'MiB':>6}{'msgs':>6}{'sent MiB':>9}{'copied MiB':>11}"
            f"{'cold ms':>9}{'warm ms':>9}{'model ms':>9}{'cold/mod':>9}{'warm/mod':>9}",
            flush=True,
        )
    for g in (int(x) for x in args.counts.split(",")):
        if g > world.Get_size():
            if root:
                print(f"(count {g} left out: the job has {world.Get_size()} ranks)", flush=True)
            continue
        for nbytes in (int(float(x) * 2**20) for x in args.mib.split(",")):
            for names in A2AV_MOVES:
                with alone(world, g) as sub:
                    got = timings(sub, nbytes, names, n_cores) if sub is not None else None
                if not root or got is None:
                    continue
                found, cold, warm = got
                load, model = found.loads, float("nan")
                if profile:
                    model = pairs_seconds(*found.pairs, g, profile, 4, g, pieces=found.pieces)
                print(
                    f"{g:>5} {' -> '.join(names):<22}{nbytes / 2**20:>6.2f}"
                    f"{load[0]:>6.0f}{load[1] / 2**20:>9.2f}{load[2] / 2**20:>11.2f}"
                    f"{cold * 1e3:>9.3f}{warm * 1e3:>9.3f}{model * 1e3:>9.3f}"
                    f"{cold / model:>9.2f}{warm / model:>9.2f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
