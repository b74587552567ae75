"""`distmm sweep [FILE.toml] [flags]`: a scaling sweep, one `distmm run` under mpiexec per point.

A sweep is a TOML file (see ``scripts/*.toml``; the keys are described in
bench/sweep_config.py) or command-line flags, or both (flags win).

Every run is one row of the results table (CSV), keyed by a hash of its configuration. The table
is rewritten atomically after each run, so a sweep killed at any moment leaves a whole table;
started again, it skips every key already there (ok, wrong, failed or timeout: a failed run is a
result too) and runs the rest. ``--retry-failed`` reruns the failed and timed-out ones, replacing
their rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .errors import UsageError
from .faults import fault_from_env
from .launch import Launcher, add_launcher_arguments, run_argv, stop_on_sigterm
from .metadata import as_row, git_state, settings
from .record import DONE, RETRYABLE, read_table, row_from_result, write_table
from .sweep_config import configure, plan_runs
from .units import format_seconds, nonnegative, positive


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", metavar="FILE.toml", help="sweep description (TOML)")
    p.add_argument("--name", help="sweep name (default: the TOML's, or 'sweep')")
    p.add_argument("--algos", help="comma-separated algorithms (default: all)")
    p.add_argument("--ranks", help="comma-separated rank counts, e.g. 1,4,9")
    p.add_argument(
        "--shapes", help="M,K,N shapes separated by ';', e.g. '1024,1024,1024;4096,256,4096'"
    )
    p.add_argument(
        "--weak",
        metavar="M,K,N",
        help="weak scaling from this shape at 1 rank (constant work per rank) instead of --shapes",
    )
    p.add_argument("--dtype", help="comma-separated dtypes (float32, float64)")
    p.add_argument(
        "--layouts",
        metavar="NAME;NAME",
        help="';'-separated layouts of A, B and C, each run with distmm run --layouts, e.g. "
        "'native;block;block-cyclic:64' (default native)",
    )
    p.add_argument("--repeat", type=positive, help="timed repetitions per run (default 5)")
    p.add_argument(
        "--jobs",
        type=positive,
        help="separate jobs per configuration, run in rounds (default 1; compare tests the "
        "jobs' medians: use 5 or more to tell changes apart)",
    )
    p.add_argument("--warmup", type=nonnegative, help="untimed warm-ups per run (default 1)")
    p.add_argument("--trace", action="store_true", default=None, help="trace every run")
    p.add_argument("--profile", help="machine profile: add the model's prediction to each row")
    p.add_argument(
        "--calibrate",
        action="store_true",
        default=None,
        help="run distmm calibrate once first (at the sweep's largest P, at least the "
        "cores) into RESULTS-profile.json beside the results table (results/NAME-profile.json "
        "by default) and use it (TOML: calibrate = true, or "
        '"quick" for a shorter, rougher calibration)',
    )
    p.add_argument("--topology", help="passed to distmm run as --topology")
    p.add_argument("--timeout", type=float, help="seconds per run (default 600)")
    p.add_argument("--results", help="results table (default results/NAME.csv)")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="rerun runs recorded as failed or timeout (replacing their rows)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs, run nothing")
    p.add_argument("--mpiexec", help="the mpiexec to use (default: the environment's)")
    add_launcher_arguments(p)


def _fmt_time(s: float) -> str:
    s = int(s)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
        if s >= 3600
        else f"{s // 60:02d}:{s % 60:02d}"
    )


def main(args) -> int:
    cfg = configure(args)
    runs, skipped = plan_runs(cfg)
    results = Path(cfg["results"]).resolve()  # one table, one lock, through any symlink
    for note in skipped:
        _say(f"distmm sweep: skipping {note} (no grid for that many ranks)")
    if not runs:
        raise UsageError("nothing to run: no algorithm of the sweep has a grid for its ranks")
    if args.dry_run:
        for r in runs:
            print(f"{r['key']}  {_label(r, 10)}")
        return 0
    if cfg.get("profile") and not Path(cfg["profile"]).exists():
        raise UsageError(f"profile {cfg['profile']} does not exist")
    try:  # every run would fail on it, each a row
        fault_from_env()
    except ValueError as err:
        raise UsageError(str(err)) from None
    results.parent.mkdir(parents=True, exist_ok=True)
    where = (cfg.get("hostfile"), cfg.get("ranks_per_node"), cfg["pin"])
    launcher = Launcher.find(args.mpiexec, cfg["launcher"], *where)
    with _locked(results):
        stop_on_sigterm()  # a killed sweep ends its job as a Ctrl-C does
        return _sweep(cfg, runs, results, launcher, args.retry_failed)


def _label(point: dict, width: int = 0) -> str:
    """``cannon P=4 64x64x64 float32`` and the layouts where they are not native."""
    shape = "x".join(str(point[d]) for d in "MKN")
    text = f"{point['algo']:<{width}} P={point['P']:<{4 if width else 0}} {shape} {point['dtype']}"
    layouts = point.get("layouts_in", "native")
    return text + ("" if layouts == "native" else f" layouts={layouts}")


def _outcome(row: dict) -> str:
    """The time of a finished run (end to end, and the kernel's where layouts moved), or its
    error."""
    if row["status"] not in ("ok", "wrong"):
        return row["error"]
    text = f"{format_seconds(float(row['seconds']))} s"
    if row.get("layouts_in", "native") != "native" and row.get("multiply_seconds") is not None:
        text += f" end to end, {format_seconds(float(row['multiply_seconds']))} s multiply"
    return text


def _say(*text) -> None:
    print(*text, file=sys.stderr, flush=True)


@contextmanager
def _locked(results: Path):
    """Hold the results table's lock (a file beside it) while the sweep writes the table."""
    lock = FileLock(results.with_name(f".{results.name}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(f"another sweep is writing {results}") from None
    try:
        yield
    finally:
        lock.release()


def _sweep(cfg: dict, runs: list[dict], results: Path, launcher: Launcher, retry: bool) -> int:
    facts = {
        "host": socket.gethostname(),
        "cores": launcher.cores,
        "mpi_library": launcher.version,
        "git_commit": git_state()[0],
        "launcher": launcher.name,
    }
    rows = read_table(results)
    by_key = {r["key"]: r for r in rows}
    redo = RETRYABLE if retry else ()
    pending = [
        r
        for r in runs
        if r["key"] not in by_key
        or by_key[r["key"]].get("status") not in DONE
        or by_key[r["key"]]["status"] in redo
    ]
    _say(
        f"distmm sweep {cfg['name']}: {len(runs)} runs, {len(runs) - len(pending)} already in "
        f"{results}, {len(pending)} to run ({launcher.name}: {launcher.mpiexec or 'template'}, "
        f"{launcher.flavour}, {launcher.cores} cores)"
    )
    profile = _calibrated(cfg, runs, results, launcher) if pending else cfg.get("profile")
    trace_root = results.with_name(f"{results.stem}-traces")
    bar = None
    if pending and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(pending), unit="run", file=sys.stderr, dynamic_ncols=True)
    start = time.monotonic()
    failures = 0
    try:
        for i, point in enumerate(pending):
            shape = (point["M"], point["K"], point["N"])
            label = _label(point)
            if bar is not None:
                bar.set_description(label)
            trace_dir = trace_rel = None
            if point["trace"]:
                trace_dir = trace_root / f"{point['algo']}-P{point['P']}-{point['key']}"
                shutil.rmtree(trace_dir, ignore_errors=True)
                trace_root.mkdir(parents=True, exist_ok=True)
                trace_rel = os.path.relpath(trace_dir, results.parent)
            argv = run_argv(
                point["algo"],
                shape,
                dtype=point["dtype"],
                topology=point["topology"],
                repeat=point["repeat"],
                warmup=point["warmup"],
                profile=profile,
                trace=trace_dir,
                as_json=True,
                layouts=point["layouts_in"],
            )
            t0 = time.monotonic()
            state, rc, out, err = launcher.run(point["P"], argv, cfg["timeout"])
            # a job that printed no record still says what it ran with (the record's own wins)
            job = {**facts, **as_row({"settings": settings(launcher.env(point["P"]))})}
            row = row_from_result(
                point, state, rc, out, err, time.monotonic() - t0, trace_rel or "", job
            )
            rows = [r for r in rows if r["key"] != point["key"]] + [row]
            write_table(results, rows)
            failures += row["status"] != "ok"
            elapsed = time.monotonic() - start
            eta = elapsed / (i + 1) * (len(pending) - i - 1)
            detail = _outcome(row)
            line = f"[{i + 1}/{len(pending)}] {label}: {row['status']} {detail}"
            if bar is not None:
                bar.write(line, file=sys.stderr)
                bar.update(1)
            else:
                _say(f"{line}  (elapsed {_fmt_time(elapsed)}, eta {_fmt_time(eta)})")
    finally:
        if bar is not None:
            bar.close()
    _say(
        f"distmm sweep {cfg['name']}: done, {len(pending) - failures} ok, {failures} not ok of "
        f"{len(pending)} run now; table: {results}"
    )
    print(results)
    return 1 if failures else 0  # (as a test run: a script or CI sees that some run failed)


def _calibrated(cfg: dict, runs: list[dict], results: Path, launcher: Launcher) -> str | None:
    """The profile the runs use: the given one, or with ``calibrate`` RESULTS-profile.json beside
    the results table, calibrated first if it is not there yet."""
    if not cfg.get("calibrate"):
        return cfg.get("profile")
    profile = str(results.with_name(f"{results.stem}-profile.json"))
    if not Path(profile).exists():
        # The README's advice: calibrate at the rank count the runs use, so the profile holds
        # this machine's time slicing when ranks outnumber cores.
        P = max(2, launcher.cores, *(r["P"] for r in runs))
        _say(f"distmm sweep: calibrating on {P} ranks into {profile}")
        quick = cfg["calibrate"] == "quick"
        failed = launcher.calibrate(P, profile, max(cfg["timeout"], 300), quick)
        if failed:
            raise UsageError(failed)
    return profile
