"""How the cost model's own cost scales (issue 13, point 7): wall time and peak RSS of
`distmm predict` and `distmm plan` over a table of shapes and rank counts, each in a fresh process.

    .venv/bin/python scripts/model_scaling.py [--profile results/profile.json] [--quick]
        [--limit-gib 8]

Without --profile it uses a profile with round numbers (the tests' one): the model's cost does
not depend on the figures in it. Every run is capped at --limit-gib of address space, so a case
that would take the machine's memory fails (and is reported) instead.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILE = {
    "machine": {"cores": 2},
    "p2p": {"small": {"alpha": 2e-6, "beta": 1e-10}, "large": {"alpha": 5e-6, "beta": 1e-10}},
    "gemm": {"float32": [[512, 512, 512, 0.0025]], "float64": [[512, 512, 512, 0.005]]},
    "collective_factor": {},
}
CUBES = {n: f"{n},{n},{n}" for n in (8192, 32768, 65536, 1048576)}
CASES = [  # (command, arguments); the three cases first
    ("predict", ["tesseract", "--grid", "1,1,16", "--shape", CUBES[32768], "--P", "16"]),
    ("plan", ["--shape", CUBES[65536], "--P", "64"]),
    ("plan", ["--shape", CUBES[8192], "--P", "4096"]),
    ("predict", ["tesseract", "--grid", "1,1,16", "--shape", CUBES[1048576], "--P", "16"]),
    ("predict", ["summa", "--shape", CUBES[65536], "--P", "4096"]),
    ("predict", ["t10", "--shape", CUBES[65536], "--P", "4096"]),
    ("predict", ["summa", "--shape", CUBES[1048576], "--P", "8192"]),
    ("plan", ["--shape", CUBES[1048576], "--P", "64"]),
    ("plan", ["--shape", "65536,4096,65536", "--P", "512"]),
    ("plan", ["--shape", CUBES[8192], "--P", "1024"]),
    ("plan", ["--shape", CUBES[8192], "--P", "8192"]),
]
QUICK = CASES[:2] + CASES[3:4]


def run(command: str, args: list[str], profile: str, limit: int) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, status) of one `distmm` command in a fresh process."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.cli", command, *args, "--profile", profile],
            cwd=ROOT,
            stdout=out,
            stderr=err,
            preexec_fn=cap,
        )
        _, code, usage = os.wait4(child.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(code)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    status = "ok" if child.returncode == 0 else (lines or [f"exit {child.returncode}"])[-1]
    return wall, usage.ru_maxrss * 1024, status  # ru_maxrss: KiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="machine profile (default: round numbers)")
    ap.add_argument("--quick", action="store_true", help="the issue's memory cases only")
    ap.add_argument("--limit-gib", type=float, default=8.0, help="address-space cap per run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile and os.path.abspath(args.profile)  # the runs start in ROOT
        if profile is None:
            profile = str(Path(tmp) / "profile.json")
            Path(profile).write_text(json.dumps(PROFILE))
        print(f"{'command':<70}{'wall [s]':>10}{'peak RSS':>12}  status")
        for command, cargs in QUICK if args.quick else CASES:
            wall, peak, status = run(command, cargs, profile, int(args.limit_gib * 2**30))
            rss = f"{peak / 2**20:.0f} MiB"
            print(
                f"{'distmm ' + command + ' ' + ' '.join(cargs):<70}{wall:>10.2f}{rss:>12}  "
                f"{status[:60]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
