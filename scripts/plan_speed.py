"""How fast `distmm plan` answers (issue 13, point 7): wall time and peak RSS of one plan per
(shape, P), each in a fresh process, with the planner's own pricing time from its JSON.

    .venv/bin/python scripts/plan_speed.py [--profile results/profile.json]
        [--P 64,512,4096,8192] [--shapes "M,K,N;M,K,N"] [--layouts block[,native,...]]
        [--limit-gib 8] [--repeat 1]

Without --profile it uses the tests' profile with round numbers. From native layouts what the
planner costs does not depend much on the figures; from the user's layouts it does: that profile
has no layout-change coefficients, so the search's lower bounds on moves are 0 and it counts no
pieces (at P = 8192 from block, 8192^3: 13 layouts' moves priced exactly, 8 with
results/vm-2c-xeon/profile_8.json, which counts pieces; 1.95 and 2.44 s wall here). Give a
calibrated profile for the figure a user sees.

Wall time counts the whole command: start-up, imports, pricing and printing; CPU time (user +
system) is the figure other jobs on the machine inflate least. With --repeat N every plan runs N
times, the plans taking turns (a slow spell of a shared machine then slows them alike), and the
medians are printed (peak RSS: the largest).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from model_scaling import PROFILE  # noqa: E402

RANKS = (64, 512, 4096, 8192)
SHAPES = ("8192,8192,8192", "65536,65536,65536", "1048576,1048576,1048576")


def plan(shape: str, P: int, profile: str, limit: int, layouts: str) -> dict:
    """Wall seconds, peak RSS bytes, the planner's record (or None) and a status line."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    argv = ["plan", "--shape", shape, "--P", str(P), "--profile", profile, "--json"]
    argv += ["--layouts", layouts]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.cli", *argv],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            preexec_fn=cap,
        )
        _, code, usage = os.wait4(child.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        text, lines = out.read().decode(), err.read().decode(errors="replace").splitlines()
    ok = os.waitstatus_to_exitcode(code) == 0
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,  # less inflated than wall by other jobs
        "rss": usage.ru_maxrss * 1024,  # KiB on Linux
        "record": json.loads(text) if ok else None,
        "status": "ok" if ok else (lines or ["failed"])[-1],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="machine profile (default: round numbers)")
    ap.add_argument("--P", default=",".join(map(str, RANKS)), help="rank counts (comma list)")
    ap.add_argument("--shapes", default=";".join(SHAPES), help="M,K,N;M,K,N;...")
    ap.add_argument(
        "--layouts",
        default="block",
        help="the user's layouts, comma list (block: plan's default, priced end to end; "
        "native: the kernels alone)",
    )
    ap.add_argument("--limit-gib", type=float, default=8.0, help="address-space cap per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each plan, in turns (medians)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile and os.path.abspath(args.profile)  # the runs start in ROOT
        if profile is None:
            profile = str(Path(tmp) / "profile.json")
            Path(profile).write_text(json.dumps(PROFILE))
        head = (
            f"{'shape':<20}{'P':>6}{'layouts':>8}{'wall [s]':>10}{'CPU [s]':>9}{'pricing [s]':>13}"
        )
        print(f"{head}{'priced':>8}{'pruned':>8}{'peak RSS':>11}  best")
        runs = [
            (shape, P, layouts)
            for layouts in args.layouts.split(",")
            for shape in args.shapes.split(";")
            for P in map(int, args.P.split(","))
        ]
        results: dict = {run: [] for run in runs}
        for _ in range(max(args.repeat, 1)):
            for shape, P, layouts in runs:
                r = plan(shape, P, profile, int(args.limit_gib * 2**30), layouts)
                results[(shape, P, layouts)].append(r)
        for (shape, P, layouts), tries in results.items():
            r = _median(tries)
            rec = r["record"] or {}
            best = rec.get("recommended", {})
            priced = len(rec.get("candidates", []))
            what = f"{best.get('algo')} {best.get('grid')}" if rec else r["status"][:60]
            print(
                f"{shape:<20}{P:>6}{layouts:>8}{r['wall']:>10.2f}{r['cpu']:>9.2f}"
                f"{rec.get('planning_seconds', float('nan')):>13.3f}{priced:>8}"
                f"{rec.get('pruned', 0):>8}{r['rss'] / 2**20:>8.0f} MiB  {what}"
            )
    return 0


def _median(tries: list[dict]) -> dict:
    """One run standing for several: median wall, CPU and planning time, the largest RSS, the
    first failure's status if any failed."""
    failed = [t for t in tries if t["record"] is None]
    if failed:
        return failed[0]
    out = dict(tries[len(tries) // 2])
    for key in ("wall", "cpu"):
        out[key] = statistics.median(t[key] for t in tries)
    out["rss"] = max(t["rss"] for t in tries)
    seconds = statistics.median(t["record"]["planning_seconds"] for t in tries)
    out["record"] = {**out["record"], "planning_seconds": seconds}
    return out


if __name__ == "__main__":
    sys.exit(main())
