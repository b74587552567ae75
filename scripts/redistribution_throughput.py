"""Redistribution throughput (issue 12): each end-to-end run's moves against MPI's own all-to-all
of the same volume, timed in the same job the same way, no model between them.

    .venv/bin/python scripts/redistribution_throughput.py [--ranks 4,8,9,16]
        [--inputs block-cyclic:64,cols] [--shapes square,tall-skinny] [--repeat 9]
        [--out results/redistribution_throughput.csv]

For every rank count one job (``mpiexec -n P python THIS --worker``) builds, for every algorithm
it admits, shape and input layout (A, B and C all in it), the moves an end-to-end run makes
(bench.endtoend: A and B in as one batch, C out; the same relabelling) and times, interleaved,
barrier to barrier as a run's phases are:
- ``redistribution``: the move itself as a run makes it (on one node written straight into
  the peers' blocks in shared memory, layouts/direct.py; else packing, Alltoallv, unpacking),
  the kept part's copy included, into the blocks it moved into the lap before;
- ``alltoall``: MPI_Alltoall in which every rank sends the busiest rank's bytes of that move,
  spread evenly over the other ranks (the all-to-all of the same volume);
- ``alltoallv``: MPI_Alltoallv with the move's own counts, from and into ready buffers (what
  the move would cost with no packing or unpacking at all);
- ``packed``: the same move through the Transfer's packing, Alltoallv and unpacking (what it
  costs across nodes, and on one node with DISTMM_DIRECT=0);
- ``alltoall_whole``: MPI_Alltoall in which every rank receives as many elements as the
  busiest rank's destination blocks hold (what it receives and what it keeps), spread evenly
  over all the ranks, itself included: an all-to-all writing the same elements as the move;
- ``contiguous`` (direct moves only): the move's own copies, as many elements to each peer and
  kept, made as one contiguous run each into the same peers' blocks between the same fences:
  what the move would take were every piece one run (its access pattern's cost, apart).
It prints, per move, ``throughput`` = alltoall / redistribution (>= 0.8 wanted; above 1 the
move beat the uniform all-to-all of its peak volume), ``vs_alltoallv`` = alltoallv /
redistribution, ``packed_throughput`` = alltoall / packed, ``whole_throughput`` =
alltoall_whole / redistribution and ``pattern`` = contiguous / redistribution, with medians
overall and by P.
scripts/end_to_end.py sets the same moves against the model's price instead.

On one node MPICH 5 moves a large message in a single copy (cross-memory attach, on by default
since pmodels/mpich#7639), which a move that packs and unpacks cannot match: on our 2-core VM
the packed moves ran at a median 0.33 of the all-to-all's speed (P = 4-16), 0.79 at P = 4 with
MPIR_CVAR_CH4_CMA_ENABLE=0 (MPICH's two-copy path, where the all-to-all took 4-8x longer);
written into shared memory, 0.54 (a move also copies the part it keeps, which no all-to-all
sends), and 0.91 at stop 72, with its fences asleep where ranks outnumber cores
(layouts/direct.py: MPI's barrier, polling, took milliseconds in some jobs).
``whole_throughput`` sets each move against an all-to-all that writes as many elements as it
does: on another 2-core VM (results/vm-2c-amx) the moves in and out from ``cols`` at
P = 4, which keep about as many elements as they send, ran at 0.85-1.16 of that one (summa's
in at 0.45 of the all-to-all of its peak volume and 1.01 of that one): there the kept part is
the whole gap. Over every move at P = 4-16, from ``cols`` 0.54 and 0.67, from
``block-cyclic:64`` 0.51 and 0.51: from ``cols`` it explains about a quarter of the gap, from
``block-cyclic:64`` none of it. What does is ``pattern``: on results/vm-2c-zen3 (stop 69) the
same copies made contiguous took a median 0.59 of the move's time, and the all-to-all 1.21x
that (block-cyclic:64 1.24-1.37 by P, cols 0.97-1.23): written into the peers' blocks as one
run each, the moves would beat MPI's all-to-all. Their pieces are 256-byte tile rows from
``block-cyclic:64`` (shorter where a block's edge cuts a tile) and rows of a block from
``cols``; scripts/copy_pattern.py on that VM, one process: 9 MiB as 256-byte pieces, one of
every four in a row, written into place in 0.71 ms and read from it in 0.91, where one run took
0.52 (in a run before, 1.83 and 2.21 against 1.00). A move places every piece once, however it
is made.
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from bench.endtoend import end_to_end, job_comm  # noqa: E402
from bench.files import save_csv_atomic  # noqa: E402
from bench.launch import Launcher  # noqa: E402

SHAPES = {"square": (3072, 3072, 3072), "tall-skinny": (8192, 1024, 512)}
DTYPE = np.float32


def lap(comm, op, repeat: int) -> float:
    """Rank 0's median seconds of ``op`` between barriers (after one warm-up)."""
    from mpi4py import MPI

    op()
    laps = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = MPI.Wtime()
        op()
        comm.Barrier()
        laps.append(MPI.Wtime() - t0)
    return comm.bcast(statistics.median(laps), root=0)


def mpi_ops(comm, move):
    """(uniform Alltoall of the busiest rank's volume, Alltoallv of the move's counts, uniform
    Alltoall of the busiest rank's whole destination) as callables, and that volume; ``move``:
    this rank's Transfer or Batch (what it sends and receives to itself is kept, not sent)."""
    from mpi4py import MPI

    P, me = comm.Get_size(), comm.Get_rank()
    send, recv = (np.array(c, np.int64) for c in (move.sendcounts, move.recvcounts))
    # every element of a destination block is written once, the kept ones by a local copy
    whole = comm.allreduce(int(recv.sum()), op=MPI.MAX)
    send[me] = recv[me] = 0
    peak = comm.allreduce(int(send.sum()), op=MPI.MAX)
    each = -(-peak // (P - 1))
    a, b = np.ones(each * P, DTYPE), np.empty(each * P, DTYPE)
    part = -(-whole // P)  # to every rank, this one included (MPI copies that part locally)
    wa, wb = np.ones(part * P, DTYPE), np.empty(part * P, DTYPE)
    sbuf, rbuf = np.ones(max(send.sum(), 1), DTYPE), np.empty(max(recv.sum(), 1), DTYPE)
    sv = [sbuf, (send, np.concatenate(([0], np.cumsum(send)[:-1]))), MPI.FLOAT]
    rv = [rbuf, (recv, np.concatenate(([0], np.cumsum(recv)[:-1]))), MPI.FLOAT]
    ops = (
        lambda: comm.Alltoall(a, b),
        lambda: comm.Alltoallv(sv, rv),
        lambda: comm.Alltoall(wa, wb),
    )
    return ops, peak


def contiguous_twin(fast, sources, comm):
    """A callable making ``fast``'s (a layouts.direct.Direct) copies as contiguous runs of the
    same sizes: to each peer its elements into a stretch of the peer's block (each sender's own
    stretch where they fit), and the kept ones into this rank's, between the same fences."""
    me, P = comm.Get_rank(), comm.Get_size()
    sources = (sources,) if fast.single else tuple(sources)
    copies = []
    for part, block, out, pushes in zip(fast.parts, sources, fast.mine, fast.pushes, strict=True):
        flat, at = block.reshape(-1), 0
        for target, src, _ in pushes:
            to = min(me * (target.size // P), target.size - src.size)
            at = at if at + src.size <= flat.size else 0  # an element may go to several peers
            copies.append((target[to : to + src.size], flat[at : at + src.size]))
            at += src.size
        kept = part.keep_from.size
        copies.append((out.reshape(-1)[:kept], flat[flat.size - kept :]))

    def run():
        fast._fence(comm)
        for to, of in copies:
            np.copyto(to, of)
        fast._fence(comm)

    return run


def worker(args) -> None:
    from mpi4py import MPI

    from layouts.batch import Batch
    from layouts.direct import Direct, direct, release
    from layouts.transfer import transfer

    world = MPI.COMM_WORLD
    P, me = world.Get_size(), world.Get_rank()
    itemsize = np.dtype(DTYPE).itemsize
    rows = []
    for algo in args.algos.split(","):
        if not get(algo).grids(P):
            continue
        for name in args.shapes.split(","):
            plan = get(algo).plan(SHAPES[name], P, overlap=True)
            for spec in args.inputs.split(","):
                e2e = end_to_end(dict.fromkeys("ABC", spec), plan, itemsize)
                comm = job_comm(world, e2e)
                ins = [m for m in e2e.moves if m.into]
                parts = [
                    transfer(m.src, m.src_mesh, m.dst, m.dst_mesh, world, e2e.ranks) for m in ins
                ]
                inverse = [int(t) for t in np.argsort(e2e.ranks)]
                phases = []  # (phase, matrices, communicator, move, its source block(s))
                if parts:
                    move = Batch.of(parts, me) if len(parts) > 1 else parts[0]
                    blocks = tuple(np.ones(m.src.block_shape, DTYPE) for m in ins)
                    matrices = "".join(m.matrix for m in ins)
                    phases.append(("in", matrices, world, move, blocks if parts[1:] else blocks[0]))
                for m in (m for m in e2e.moves if not m.into):
                    out = transfer(m.src, m.src_mesh, m.dst, m.dst_mesh, comm, inverse)
                    phases.append(("out", m.matrix, comm, out, np.ones(m.src.block_shape, DTYPE)))
                for phase, matrices, c, move, source in phases:
                    fast = direct(move, c, DTYPE)  # what a run moves with
                    quick = lambda f=fast, b=source, c=c: f(b, c, True)  # noqa: E731
                    run = lambda t=move, b=source, c=c: t(b, c, True)  # noqa: E731
                    (uniform, exact, whole), peak = mpi_ops(c, move)
                    kinds = ("redistribution", "alltoall", "alltoallv", "packed", "alltoall_whole")
                    ops = (quick, uniform, exact, run, whole)
                    if isinstance(fast, Direct):
                        kinds += ("contiguous",)
                        ops += (contiguous_twin(fast, source, c),)
                    times = {k: [] for k in kinds}
                    for _ in range(3):  # interleaved, so a slow minute hits all of them
                        for key, op in zip(times, ops, strict=True):
                            times[key].append(lap(c, op, args.repeat))
                    t = {k: statistics.median(v) for k, v in times.items()}
                    rows.append(
                        {
                            "P": P,
                            "algo": algo,
                            "shape": name,
                            "input": spec,
                            "phase": phase,
                            "matrices": matrices,
                            "peak_MiB": peak * itemsize / 2**20,
                            **{f"{k}_ms": 1e3 * v for k, v in t.items()},
                            "throughput": t["alltoall"] / t["redistribution"],
                            "vs_alltoallv": t["alltoallv"] / t["redistribution"],
                            "packed_throughput": t["alltoall"] / t["packed"],
                            "whole_throughput": t["alltoall_whole"] / t["redistribution"],
                            "pattern": t.get("contiguous", math.nan) / t["redistribution"],
                        }
                    )
                    release(fast)
                if comm is not world:
                    comm.Free()
    if me == 0:
        print(json.dumps({"rows": rows}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="4,8,9,16")
    p.add_argument("--algos", default=",".join(ALGORITHMS))
    p.add_argument("--inputs", default="block-cyclic:64,cols")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--repeat", type=int, default=9, help="laps per median (three medians each)")
    p.add_argument("--out", default="results/redistribution_throughput.csv")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    rows = []
    own = ["--algos", args.algos, "--inputs", args.inputs, "--shapes", args.shapes]
    for P in (int(x) for x in args.ranks.split(",")):
        print(f"P={P} ...", file=sys.stderr, flush=True)
        record, why = Launcher.find().run_json(
            P,
            [*own, "--repeat", str(args.repeat), "--worker"],
            1800,
            program=(sys.executable, str(Path(__file__).resolve())),
            cwd=ROOT,
        )
        if record is None:
            print(f"  P={P} failed: {why}", file=sys.stderr)
            continue
        rows += record["rows"]
    table = pd.DataFrame(rows)
    if table.empty:
        sys.exit("no job succeeded")
    save_csv_atomic(args.out, table)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.round(3).to_string(index=False))
    moving = table[table["peak_MiB"] > 0]  # a move that keeps everything is a local copy
    print(f"\n{len(table) - len(moving)} moves only copy locally: left out below")
    for col in ("throughput", "vs_alltoallv", "packed_throughput", "whole_throughput", "pattern"):
        v = moving[col].dropna()
        if v.empty:
            continue
        print(
            f"\n{col}: median {v.median():.2f}, min {v.min():.2f}, >= 0.8 in "
            f"{int((v >= 0.8).sum())}/{len(v)}; median by P and phase:"
        )
        print(moving.pivot_table(index="phase", columns="P", values=col, aggfunc="median").round(2))


if __name__ == "__main__":
    main()
