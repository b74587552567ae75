"""How precisely an emulated link's hold ends (algorithms/levels.py, hold_until): the lateness
of holds against their deadlines, with and without other processes computing on the cores.

    .venv/bin/python scripts/hold_precision.py [--holds 300] [--hold-ms 2] [--busy 0,2]
        [--sleepers 2]

For each count of busy processes (each multiplying 512^2 matrices in a loop, as ranks do) it
starts ``--sleepers`` processes that hold ``--holds`` times to a deadline ``--hold-ms`` ahead,
with a small GEMM between holds, once by ``time.sleep`` to the deadline (how holds were made
before) and once by ``hold_until``, and prints the lateness's quantiles in microseconds (over
all sleepers; negative would be a hold ending early) and the CPU each hold took beyond a
sleep's. An emulated message's latency is the preset's plus this lateness (1gbe: 50 us).
"""

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread per process, as a rank's (set
# before NumPy loads OpenBLAS: its idle threads would spin through the holds)
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms.levels import hold_until, least_timer_slack


def busy(stop) -> None:
    a = np.ones((512, 512), np.float32)
    while not stop.is_set():
        a @ a


def sleeper(out, how: str, holds: int, hold_s: float) -> None:
    def sleep_to(deadline):
        time.sleep(max(deadline - time.perf_counter(), 0.0))

    wait = hold_until if how == "hold_until" else sleep_to
    if how == "hold_until":
        least_timer_slack()  # as a rank's LinkClock sets it
    x = np.ones((256, 256), np.float32)
    late, cpu = [], 0.0
    for _ in range(holds):
        deadline = time.perf_counter() + hold_s
        c0 = time.process_time()
        wait(deadline)
        cpu += time.process_time() - c0
        late.append(time.perf_counter() - deadline)
        x @ x
    out.put((late, cpu / holds))


def measure(how: str, n_busy: int, sleepers: int, holds: int, hold_s: float):
    stop, out = mp.Event(), mp.Queue()
    hogs = [mp.Process(target=busy, args=(stop,)) for _ in range(n_busy)]
    waits = [mp.Process(target=sleeper, args=(out, how, holds, hold_s)) for _ in range(sleepers)]
    for p in hogs + waits:
        p.start()
    got = [out.get() for _ in waits]
    for p in waits:
        p.join()
    stop.set()
    for p in hogs:
        p.join()
    late = np.concatenate([g[0][holds // 10 :] for g in got])  # the first tenth: finding it
    return np.quantile(late, [0.0, 0.1, 0.5, 0.9, 0.99]) * 1e6, np.mean([g[1] for g in got]) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--holds", type=int, default=300)
    p.add_argument("--hold-ms", type=float, default=2.0)
    p.add_argument("--busy", default="0,2")
    p.add_argument("--sleepers", type=int, default=2)
    args = p.parse_args()
    head = "lateness [us]: min    p10    p50    p90    p99   cpu/hold [us]"
    print(f"{'busy':>4} {'hold by':>10}   {head}")
    for n in [int(b) for b in args.busy.split(",")]:
        for how in ("sleep", "hold_until"):
            q, cpu = measure(how, n, args.sleepers, args.holds, args.hold_ms / 1e3)
            print(f"{n:>4} {how:>10}   " + " ".join(f"{v:6.0f}" for v in q) + f"   {cpu:8.0f}")


if __name__ == "__main__":
    main()
