"""The GEMM rate tables `distmm calibrate` measures: every shape of a grid on one BLAS thread,
and a coarser grid with each larger thread count a run gives a rank, each shape's time taken at
the machine's usual speed (:func:`steady_times`); and the pass with which a GEMM adds its
product into C (:func:`adding_seconds`)."""

from __future__ import annotations

from functools import partial

import numpy as np

from .calibration import PROBE_GEMM, _every_core, _square_operands, now, sleep_until_all

# m, k and n of the GEMM shapes timed (a 5 x 5 x 5 grid); 16 for the thin panels SUMMA and its
# kinds multiply (2048x16x512 takes 1.4 times what the rate at k = 96 says, k = 8 2.4 times)
GEMM_GRID = (16, 96, 320, 1024, 3072)

GEMM_PASSES = 3  # times each GEMM shape is timed, in passes over the whole grid


def gemm_rates(world, quick: bool, cores: int) -> dict[str, list[list[float]]]:
    """{dtype: [[m, k, n, seconds]]} over the GEMM_GRID shapes, timed through the same kernel
    path the communication layer uses (GEMM into a scratch tile, then accumulate): one core per
    rank (one BLAS thread, whatever the job's ranks per node give), at most `cores` ranks at
    once, each shape repeated for about 20 ms, in GEMM_PASSES passes over the grid, the median
    kept: one pass put the same shape's rate anywhere from 52 to 83 GFLOP/s in five
    calibrations here (a neighbour's burst hits a shape, not the grid); each time taken at the
    machine's usual speed by a reference GEMM timed beside it (:func:`steady_times`)."""
    grid = GEMM_GRID[::2] if quick else GEMM_GRID
    shapes = [(m, k, n) for m in grid for k in grid for n in grid]
    out: dict[str, list] = {}
    for dtype in ("float32", "float64"):
        seconds = _timed_passes(world, quick, shapes, dtype, world.Get_rank() < cores, 1)
        out[dtype] = [[*shape, float(t)] for shape, t in zip(shapes, seconds, strict=True)]
    return out


# m, k and n of the shapes timed with several BLAS threads per rank (on GEMM_GRID, which gives
# their one-thread times); quick: 320^3 alone (a share for every shape). Without 320 a 512-wide
# GEMM's share was interpolated from 96 and 1024: 2048x512x512 with 4 threads priced 1.33x what
# it took on a lent 16-core machine; with 2 threads here, ten shapes between the grid's points
# priced a median 12% off without 320 (4096x256x1024 1.34x, 2048x512x512 1.31x), 7% with it
# (1.04x and 0.95x; 64 shapes per thread count instead of 27, about 2 s more each)
THREAD_GRID = (96, 320, 1024, 3072)


def gemm_threads(world, quick: bool, cores: int) -> dict[str, list[list[float]]]:
    """{t: [[m, k, n, seconds]]} (float32) for every count t > 1 of BLAS threads a run gives a
    rank on this node (bench.machine.blas_threads: cores // g for g ranks), each with
    cores // t ranks at once (at most the job's), each rank t threads, as a run of that many
    ranks computes: what the one-thread rates do not say. On a 16-core machine here, runs at
    P = 2 and 4 (8 and 4 threads per rank) took a quarter and a half of what one-thread rates
    predicted."""
    from bench.machine import blas_threads

    grid = (320,) if quick else THREAD_GRID
    shapes = [(m, k, n) for m in grid for k in grid for n in grid]
    out: dict[str, list] = {}
    for t in sorted({blas_threads(cores, g) for g in range(1, cores + 1)} - {1}):
        active = world.Get_rank() < cores // t  # the job's ranks, if fewer
        seconds = _timed_passes(world, quick, shapes, "float32", active, t)
        out[str(t)] = [[*shape, float(s)] for shape, s in zip(shapes, seconds, strict=True)]
    return out


def _timed_passes(world, quick: bool, shapes, dtype: str, active: bool, threads: int):
    """Each shape's seconds per GEMM, the median over GEMM_PASSES passes of the median over
    the active ranks (the others asleep), each active rank with ``threads`` BLAS threads, each
    shape's time taken at the machine's usual speed (:func:`steady_times`)."""
    from threadpoolctl import threadpool_limits

    from algorithms.local_gemm import gemm_rows

    # random operands, as a run's blocks are: ones or zeros draw less power, and a node whose
    # cores are all busy may clock higher on them (on one core here the rate was the same)
    largest = max(max(m * k, k * n) for m, k, n in shapes) if active else 0
    data = np.random.default_rng(world.Get_rank()).standard_normal(2 * largest, dtype=dtype)
    ops = [x.astype(dtype) for x in _square_operands(world.Get_rank(), PROBE_GEMM)]
    ref = (*ops[:3], True, ops[3])  # the reference's gemm_rows arguments
    passes, refs = [], []
    for _ in range(1 if quick else GEMM_PASSES):
        times, beside = [0.0] * len(shapes), [0.0] * len(shapes)
        sleep_until_all(world)  # once a pass: the measuring ranks keep pace on their own
        with threadpool_limits(limits=threads, user_api="blas"):
            if active:  # (the others stay asleep)
                gemm_rows(*ref)  # warm-up
            for i, (m, k, n) in enumerate(shapes if active else ()):
                a = data[: m * k].reshape(m, k)
                b = data[largest : largest + k * n].reshape(k, n)
                c, tmp = np.zeros((m, n), dtype), np.zeros((m, n), dtype)
                gemm_rows(a, b, c, True, tmp)  # warm-up
                reps = 1 if quick else max(2, min(50, int(2e9 * threads / (2 * m * k * n))))
                t0 = now()
                for _ in range(reps):
                    gemm_rows(a, b, c, True, tmp)
                times[i] = (now() - t0) / reps
                beside[i] = _reference_seconds(ref)
        sleep_until_all(world)
        passes.append(times)
        refs.append(beside)
    steady = steady_times(np.array(passes), np.array(refs)) if active else np.zeros(len(shapes))
    measured = np.array([t for t in world.allgather(steady.tolist()) if t[0] > 0])
    return np.median(measured, axis=0)


def _reference_seconds(ref: tuple) -> float:
    """Seconds of the reference PROBE_GEMM^3 GEMM (``ref``: gemm_rows' arguments), the median
    of three."""
    from algorithms.local_gemm import gemm_rows

    laps = []
    for _ in range(3):
        t0 = now()
        gemm_rows(*ref)
        laps.append(now() - t0)
    return float(np.median(laps))


def steady_times(times: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """Each shape's seconds from ``times[p, i]`` (pass p, shape i), each timed beside a
    reference GEMM taking ``refs[p, i]``: every time scaled by the reference's median over
    all of them over its own, then the median over passes. A slow spell of the machine slows
    the shape and the reference beside it alike, so it leaves the table at the machine's
    usual speed. The median over passes alone kept what hit the same shapes in every pass: in
    one calibration on a 2-core VM (results/vm-2c-xeon/calibrate_9.txt) the 25 shapes with
    m = 16, timed first in each pass, took a median 2.33 times (14 of them over 2) what the
    calibration before had measured, the others 1.26, and the table skewed the planner's
    choices: 32 cases from block priced again with it chose the fastest in 16 and 13 of two
    sweeps (18 and 18 with its GEMM tables and copy bandwidth swapped for the earlier one's;
    22 and 24 with the earlier profile whole)."""
    return np.median(times * (np.median(refs) / refs), axis=0)


# the sizes of C whose adding pass calibrate times: from the L2 cache to memory
ADDED_BYTES = (1 << 16, 1 << 20, 1 << 23, 1 << 25)


def adding_seconds(world, cores: int) -> dict[str, list[list[float]]]:
    """{dtype: [[bytes, seconds], ...]}: one core adding an array of each ADDED_BYTES size into
    another (``c += t``, the pass with which a GEMM accumulates its product: algorithms/
    local_gemm.gemm_rows), a rank per core at once, each for about 20 ms: what the model takes
    off the price of a GEMM that writes its product straight into C (bench.model.gemm_rates.
    without_adding). Inside a GEMM + accumulate on a 2-core VM the pass ran at 7.5-21 GB/s of
    float32 after a k = 16 product and 4-13 after k = 256 (64 KiB to 32 MiB); alone, 7-22."""
    out = {}
    for dtype in ("float32", "float64"):
        rows = []
        for nbytes in ADDED_BYTES:
            c = np.ones(nbytes // np.dtype(dtype).itemsize, dtype)
            add = partial(np.add, c, np.ones_like(c), out=c)
            rows.append([nbytes, _every_core(world, cores, add, max(10, (1 << 28) // nbytes))])
        out[dtype] = rows
    return out


def gemm_tables(world, quick: bool, cores: int) -> dict:
    """{"gemm": :func:`gemm_rates`, "gemm_threads": :func:`gemm_threads`}, timed in this job
    (a calibration's, or `calibrate --refresh-gemm`'s)."""
    return {
        "gemm": gemm_rates(world, quick, cores),
        "gemm_threads": gemm_threads(world, quick, cores),
    }


__all__ = [
    "ADDED_BYTES",
    "GEMM_GRID",
    "THREAD_GRID",
    "adding_seconds",
    "gemm_rates",
    "gemm_tables",
    "gemm_threads",
    "steady_times",
]
