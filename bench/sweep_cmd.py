"""`distmm sweep [FILE.toml] [flags]`: a scaling sweep, one `distmm run` under mpiexec per point.

A sweep is a TOML file (see ``scripts/*.toml``) or command-line flags, or both (flags win)::

    name = "strong"                        # results/<name>.csv unless `results` says otherwise
    algorithms = ["cannon", "summa"]       # default: every algorithm
    ranks = [1, 4, 9, 16]
    shapes = [[2048, 2048, 2048]]          # strong scaling: the same problems at every P
    # weak = { base = [1024, 1024, 1024], ranks = 1, per = "work" }   # instead of shapes
    dtypes = ["float32"]
    repeat = 3
    warmup = 1
    trace = false                          # --trace into results/<name>-traces/<run>/
    profile = "results/profile.json"       # or: calibrate = true (calibrate once, first)
    topology = "mncore:2,2,2,2"            # passed to distmm run as --topology
    timeout = 300                          # seconds per run

Weak scaling keeps the work per rank constant: at P ranks every dimension of ``base`` is scaled
by (P / ranks)^(1/3), so M K N / P stays what it was at ``ranks`` (``per = "memory"`` scales by
(P / ranks)^(1/2) instead, keeping the elements of A, B and C per rank constant). Sizes are
rounded to a multiple of ``round`` (default 16).

Every run is one row of the results table (CSV), keyed by a hash of its configuration. The table
is rewritten atomically after each run, so a sweep killed at any moment leaves a whole table;
started again, it skips every key already there (ok, wrong, failed or timeout: a failed run is a
result too) and runs the rest. ``--retry-failed`` reruns the failed and timed-out ones, replacing
their rows.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .cli import UsageError

DONE = ("ok", "wrong", "failed", "timeout")
RETRYABLE = ("failed", "timeout")
COLUMNS = [
    "key", "status", "sweep", "scaling", "algo", "P", "M", "K", "N", "dtype", "repeat", "warmup",
    "topology", "trace", "grid", "params",
    "seconds", "seconds_min", "seconds_max", "gflops", "compute_seconds", "compute_ratio",
    "verified", "max_rel_error", "bytes_sent", "bytes_sent_per_rank_max", "messages",
    "peak_memory_bytes", "predicted_seconds", "predicted_phases", "trace_dir", "layouts",
    "host", "cores", "mpi_library", "git_commit", "timestamp", "wall_seconds", "error",
]
# TOML key -> (type check, description for the error message)
_KEYS = {
    "name": (lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", v), "a name "
             "of letters, digits, '.', '_' or '-'"),
    "algorithms": (lambda v: _list_of(v, str) and v, "a non-empty list of algorithm names"),
    "ranks": (lambda v: _list_of(v, int) and v and all(x >= 1 for x in v),
              "a non-empty list of positive integers"),
    "shapes": (lambda v: _list_of(v, list) and v and all(_shape_ok(s) for s in v),
               "a list of [M, K, N] lists of positive integers"),
    "weak": (lambda v: isinstance(v, dict), "a table {base = [M, K, N], ranks = P0, per = ...}"),
    "dtypes": (lambda v: _list_of(v, str) and v and all(x in ("float32", "float64") for x in v),
               'a list of "float32" / "float64"'),
    "repeat": (lambda v: _int(v) and v >= 1, "a positive integer"),
    "warmup": (lambda v: _int(v) and v >= 0, "a non-negative integer"),
    "topology": (lambda v: isinstance(v, str) and v, "a topology string"),
    "trace": (lambda v: isinstance(v, bool), "true or false"),
    "profile": (lambda v: isinstance(v, str) and v, "a path to a profile JSON"),
    "calibrate": (lambda v: isinstance(v, bool) or v == "quick", 'true, false or "quick"'),
    "timeout": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
                "a positive number of seconds"),
    "results": (lambda v: isinstance(v, str) and v.endswith(".csv"), "a path ending in .csv"),
}
_WEAK_KEYS = {
    "base": (lambda v: _shape_ok(v), "[M, K, N] (positive integers)"),
    "ranks": (lambda v: _int(v) and v >= 1, "a positive integer (the P of the base shape)"),
    "per": (lambda v: v in ("work", "memory"), '"work" or "memory"'),
    "round": (lambda v: _int(v) and v >= 1, "a positive integer"),
}


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape_ok(s) -> bool:
    return isinstance(s, list) and len(s) == 3 and all(_int(x) and x >= 1 for x in s)


def _list_of(v, kind) -> bool:
    if not isinstance(v, list):
        return False
    return all(_int(x) if kind is int else isinstance(x, kind) for x in v)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", metavar="FILE.toml", help="sweep description (TOML)")
    p.add_argument("--name", help="sweep name (default: the TOML's, or 'sweep')")
    p.add_argument("--algos", help="comma-separated algorithms (default: all)")
    p.add_argument("--ranks", help="comma-separated rank counts, e.g. 1,4,9")
    p.add_argument("--shapes", help="M,K,N shapes separated by ';', e.g. '1024,1024,1024;4096,256,4096'")
    p.add_argument("--weak", metavar="M,K,N", help="weak scaling from this shape at 1 rank "
                   "(constant work per rank) instead of --shapes")
    p.add_argument("--dtype", help="comma-separated dtypes (float32, float64)")
    p.add_argument("--repeat", type=int, help="timed repetitions per run (default 3)")
    p.add_argument("--warmup", type=int, help="untimed warm-ups per run (default 1)")
    p.add_argument("--trace", action="store_true", default=None, help="trace every run")
    p.add_argument("--profile", help="machine profile: add the model's prediction to each row")
    p.add_argument("--calibrate", action="store_true", default=None,
                   help="run distmm calibrate once first (at the sweep's largest P, at least the "
                   "cores) into results/NAME-profile.json and use it (TOML: calibrate = true, or "
                   "\"quick\" for a shorter, rougher calibration)")
    p.add_argument("--topology", help="passed to distmm run as --topology")
    p.add_argument("--timeout", type=float, help="seconds per run (default 600)")
    p.add_argument("--results", help="results table (default results/NAME.csv)")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun runs recorded as failed or timeout (replacing their rows)")
    p.add_argument("--dry-run", action="store_true", help="list the runs, run nothing")
    p.add_argument("--mpiexec", help="the mpiexec to use (default: the environment's)")


# -- configuration --------------------------------------------------------------------------
def _line_of(text: str, key: str) -> int | None:
    pat = re.compile(rf"""(^|[{{,\s])["']?{re.escape(key)}["']?\s*=""")
    for no, line in enumerate(text.splitlines(), 1):
        if pat.search(line.split("#", 1)[0]):
            return no
    return None


def load_toml(path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: {err}") from None

    def where(key: str) -> str:
        line = _line_of(text, key)
        return f"{path}:{line}" if line else path

    for key, value in data.items():
        if key not in _KEYS:
            raise UsageError(f"{where(key)}: unknown key {key!r} (known: {', '.join(_KEYS)})")
        ok, what = _KEYS[key]
        if not ok(value):
            raise UsageError(f"{where(key)}: {key} must be {what}, not {value!r}")
    for key, value in data.get("weak", {}).items():
        if key not in _WEAK_KEYS:
            raise UsageError(f"{where(key)}: unknown key 'weak.{key}' "
                             f"(known: {', '.join(_WEAK_KEYS)})")
        ok, what = _WEAK_KEYS[key]
        if not ok(value):
            raise UsageError(f"{where(key)}: weak.{key} must be {what}, not {value!r}")
    if "weak" in data and "base" not in data["weak"]:
        raise UsageError(f"{where('weak')}: weak needs base = [M, K, N]")
    if "shapes" in data and "weak" in data:
        raise UsageError(f"{where('weak')}: give shapes (strong scaling) or weak, not both")
    from algorithms import ALGORITHMS

    for algo in data.get("algorithms", []):
        if algo not in ALGORITHMS:
            raise UsageError(f"{where('algorithms')}: unknown algorithm {algo!r} "
                             f"(choose from {', '.join(ALGORITHMS)})")
    return data


def _split_ints(text: str, what: str, count: int | None = None) -> list[int]:
    try:
        vals = [int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a list of integers") from None
    if not vals or any(v < 1 for v in vals) or (count and len(vals) != count):
        raise UsageError(f"{what} {text!r}: needs {count or 'some'} positive integers")
    return vals


def configure(args) -> dict:
    """The sweep's settings: the TOML file's, overridden by flags."""
    from algorithms import ALGORITHMS

    cfg = load_toml(args.file) if args.file else {}
    if args.name:
        cfg["name"] = args.name
    if args.algos:
        cfg["algorithms"] = [a.strip() for a in args.algos.split(",") if a.strip()]
        for a in cfg["algorithms"]:
            if a not in ALGORITHMS:
                raise UsageError(f"--algos: unknown algorithm {a!r} "
                                 f"(choose from {', '.join(ALGORITHMS)})")
    if args.ranks:
        cfg["ranks"] = _split_ints(args.ranks, "--ranks")
    if args.shapes:
        cfg["shapes"] = [_split_ints(s, "--shapes", 3) for s in args.shapes.split(";") if s.strip()]
        cfg.pop("weak", None)
    if args.weak:
        cfg["weak"] = {"base": _split_ints(args.weak, "--weak", 3)}
        cfg.pop("shapes", None)
    if args.dtype:
        cfg["dtypes"] = [d.strip() for d in args.dtype.split(",")]
        if not _KEYS["dtypes"][0](cfg["dtypes"]):
            raise UsageError(f"--dtype {args.dtype!r}: float32 and/or float64")
    for key in ("repeat", "warmup", "timeout"):
        value = getattr(args, key)
        if value is not None:
            if value < (0 if key == "warmup" else 1e-9):
                raise UsageError(f"--{key} {value}: too small")
            cfg[key] = value
    for key in ("trace", "calibrate", "profile", "topology", "results"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if "ranks" not in cfg:
        raise UsageError("no rank counts: give ranks in the TOML file or --ranks")
    if "shapes" not in cfg and "weak" not in cfg:
        raise UsageError("no shapes: give shapes or weak in the TOML file, or --shapes / --weak")
    if cfg.get("calibrate") and cfg.get("profile"):
        raise UsageError("give profile or calibrate, not both")
    cfg.setdefault("name", Path(args.file).stem if args.file else "sweep")
    cfg.setdefault("algorithms", list(ALGORITHMS))
    cfg.setdefault("dtypes", ["float32"])
    cfg.setdefault("repeat", 3)
    cfg.setdefault("warmup", 1)
    cfg.setdefault("trace", False)
    cfg.setdefault("timeout", 600)
    cfg.setdefault("results", f"results/{cfg['name']}.csv")
    return cfg


def weak_shape(base, base_ranks: int, P: int, per: str = "work", rounding: int = 16):
    """Weak scaling: base at base_ranks, every dimension scaled by (P/base_ranks)^(1/3) (constant
    work per rank) or ^(1/2) (constant memory per rank), rounded to a multiple of `rounding`."""
    factor = (P / base_ranks) ** (1 / 3 if per == "work" else 1 / 2)
    return [max(rounding, int(round(d * factor / rounding)) * rounding) for d in base]


def run_key(point: dict) -> str:
    fields = {k: point[k] for k in ("algo", "P", "M", "K", "N", "dtype", "repeat", "warmup",
                                    "topology", "trace", "scaling")}
    return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def plan_runs(cfg: dict) -> tuple[list[dict], list[str]]:
    """The sweep's runs in order, and notes on the (algorithm, P) pairs skipped."""
    from algorithms import get

    runs, skipped = [], []
    weak = cfg.get("weak")
    for algo in cfg["algorithms"]:
        cannot = [P for P in cfg["ranks"] if not get(algo).grids(P)]
        if cannot and not cfg.get("topology"):
            skipped.append(f"{algo} cannot use P = {', '.join(map(str, cannot))}")
        for P in cfg["ranks"]:
            if P in cannot and not cfg.get("topology"):
                continue
            if weak:
                shapes = [weak_shape(weak["base"], weak.get("ranks", 1), P,
                                     weak.get("per", "work"), weak.get("round", 16))]
            else:
                shapes = cfg["shapes"]
            for M, K, N in shapes:
                for dtype in cfg["dtypes"]:
                    point = {"sweep": cfg["name"], "scaling": "weak" if weak else "strong",
                             "algo": algo, "P": P, "M": M, "K": K, "N": N, "dtype": dtype,
                             "repeat": cfg["repeat"], "warmup": cfg["warmup"],
                             "topology": cfg.get("topology", ""), "trace": bool(cfg["trace"])}
                    point["key"] = run_key(point)
                    runs.append(point)
    return runs, skipped


# -- results table --------------------------------------------------------------------------
def read_table(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def write_table(path: Path, rows: list[dict]) -> None:
    """Rewrite the whole table into a temporary file and rename it over the old one."""
    extra = sorted({k for r in rows for k in r} - set(COLUMNS))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + extra, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as fh:
        fh.write(buf.getvalue())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# -- launching ------------------------------------------------------------------------------
def find_mpiexec(given: str | None) -> str:
    if given:
        return given
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        raise UsageError("no mpiexec found (run scripts/setup.sh, or install an MPI)")
    return found


def mpi_flavour(mpiexec: str) -> tuple[str, str]:
    """('openmpi' | 'mpich' | 'unknown', first line of mpiexec --version)."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
        text = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"cannot run {mpiexec} --version: {err}") from None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text.lower():
        return "openmpi", first
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return "mpich", first
    return "unknown", first


def mpiexec_command(mpiexec: str, flavour: str, P: int, cores: int) -> list[str]:
    cmd = [mpiexec]
    if flavour == "openmpi":
        if P > cores:
            cmd.append("--oversubscribe")
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd + ["-n", str(P)]


def _child_setup() -> None:
    """In the child: die with the sweep (Linux), so a killed sweep leaves no runs behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launch(cmd: list[str], timeout: float, env: dict) -> tuple[str, int | None, str, str]:
    """Run cmd in its own process group; ('done' | 'timeout', rc, stdout, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, preexec_fn=_child_setup)
    try:
        out, err = proc.communicate(timeout=timeout)
        return "done", proc.returncode, out, err
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return "timeout", None, out, err
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc) -> None:
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _env(P: int, cores: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1" if P >= cores else str(max(1, cores // P)))
    if P > cores:
        from .machine import YIELD_SETTINGS

        for k, v in YIELD_SETTINGS.items():
            env.setdefault(k, v)
    return env


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, cwd=Path(__file__).resolve().parent.parent)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def row_for(point: dict, state: str, rc, out: str, err: str, wall: float, trace_dir: str,
            facts: dict) -> dict:
    row = dict(point)
    row.update(trace_dir=trace_dir, wall_seconds=f"{wall:.2f}", **facts,
               timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    result = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    if state == "timeout":
        row.update(status="timeout", error=f"timed out after {wall:.0f} s", trace_dir="")
        return row
    if result is None:
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        useful = [ln for ln in lines if "error" in ln.lower()] or lines
        row.update(status="failed", trace_dir="",
                   error=(useful[0] if useful else f"exit status {rc}, no output")[:500])
        return row
    per = result.get("bytes_sent_per_rank") or [0]
    row.update(
        status="ok" if rc == 0 and result.get("verified") else ("wrong" if rc in (0, 1) else "failed"),
        grid="x".join(map(str, result.get("grid", []))),
        params=json.dumps(result.get("params", {}), sort_keys=True),
        **{k: result.get(k) for k in ("seconds", "seconds_min", "seconds_max", "gflops",
                                      "compute_seconds", "compute_ratio", "verified",
                                      "max_rel_error", "bytes_sent", "messages",
                                      "peak_memory_bytes", "predicted_seconds")},
        bytes_sent_per_rank_max=max(per),
        predicted_phases=json.dumps(result["predicted_phases"], sort_keys=True)
        if "predicted_phases" in result else "",
        layouts=json.dumps(result.get("layouts", {})),
        mpi_library=result.get("mpi_library", facts["mpi_library"]),
        error="" if rc == 0 else (err.strip().splitlines() or [f"exit status {rc}"])[-1][:500],
    )
    return row


def _fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


# -- main -----------------------------------------------------------------------------------
def main(args) -> int:
    from .machine import cores as count_cores

    cfg = configure(args)
    runs, skipped = plan_runs(cfg)
    results = Path(cfg["results"])
    say = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    for note in skipped:
        say(f"distmm sweep: skipping {note} (no grid for that many ranks)")
    if args.dry_run:
        for r in runs:
            print(f"{r['key']}  {r['algo']:<10} P={r['P']:<4} {r['M']}x{r['K']}x{r['N']} {r['dtype']}")
        return 0
    if cfg.get("profile") and not Path(cfg["profile"]).exists():
        raise UsageError(f"profile {cfg['profile']} does not exist")
    results.parent.mkdir(parents=True, exist_ok=True)
    lock = open(results.with_name(f".{results.name}.lock"), "w")
    try:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise UsageError(f"another sweep is writing {results}") from None
    except ImportError:
        pass

    ncores = count_cores()
    mpiexec = find_mpiexec(args.mpiexec)
    flavour, version = mpi_flavour(mpiexec)
    facts = {"host": socket.gethostname(), "cores": ncores, "mpi_library": version,
             "git_commit": git_commit()}
    rows = read_table(results)
    by_key = {r["key"]: r for r in rows}
    redo = RETRYABLE if args.retry_failed else ()
    pending = [r for r in runs if r["key"] not in by_key
               or by_key[r["key"]].get("status") not in DONE or by_key[r["key"]]["status"] in redo]
    say(f"distmm sweep {cfg['name']}: {len(runs)} runs, {len(runs) - len(pending)} already in "
        f"{results}, {len(pending)} to run ({mpiexec}, {flavour}, {ncores} cores)")

    profile = cfg.get("profile")
    if cfg.get("calibrate"):
        profile = str(results.with_name(f"{results.stem}-profile.json"))
        if not Path(profile).exists() and pending:
            # The README's advice: calibrate at the rank count the runs use, so the profile
            # holds this machine's time slicing when ranks outnumber cores.
            P = max(2, ncores, *(r["P"] for r in runs))
            say(f"distmm sweep: calibrating on {P} ranks into {profile}")
            cmd = mpiexec_command(mpiexec, flavour, P, ncores) + [
                sys.executable, "-m", "bench.cli", "calibrate", "--out", profile] + (
                ["--quick"] if cfg["calibrate"] == "quick" else [])
            state, rc, out, err = launch(cmd, max(cfg["timeout"], 300), _env(P, ncores))
            if state != "done" or rc != 0:
                raise UsageError(f"calibration failed ({state}, exit {rc}): "
                                 f"{(err.strip().splitlines() or [''])[-1]}")
    trace_root = results.with_name(f"{results.stem}-traces")

    bar = None
    if pending and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(pending), unit="run", file=sys.stderr, dynamic_ncols=True)
    start = time.monotonic()
    failures = 0
    try:
        for i, point in enumerate(pending):
            label = f"{point['algo']} P={point['P']} {point['M']}x{point['K']}x{point['N']} {point['dtype']}"
            if bar is not None:
                bar.set_description(label)
            cmd = mpiexec_command(mpiexec, flavour, point["P"], ncores) + [
                sys.executable, "-m", "bench.cli", "run", point["algo"],
                "--shape", f"{point['M']},{point['K']},{point['N']}", "--dtype", point["dtype"],
                "--repeat", str(point["repeat"]), "--warmup", str(point["warmup"]), "--json"]
            trace_rel = ""
            if point["trace"]:
                trace_dir = trace_root / f"{point['algo']}-P{point['P']}-{point['key']}"
                shutil.rmtree(trace_dir, ignore_errors=True)
                trace_root.mkdir(parents=True, exist_ok=True)
                cmd += ["--trace", str(trace_dir)]
                trace_rel = os.path.relpath(trace_dir, results.parent)
            if profile:
                cmd += ["--profile", profile]
            if point["topology"]:
                cmd += ["--topology", point["topology"]]
            t0 = time.monotonic()
            state, rc, out, err = launch(cmd, cfg["timeout"], _env(point["P"], ncores))
            row = row_for(point, state, rc, out, err, time.monotonic() - t0, trace_rel, facts)
            rows = [r for r in rows if r["key"] != point["key"]] + [row]
            write_table(results, rows)
            failures += row["status"] != "ok"
            elapsed = time.monotonic() - start
            eta = elapsed / (i + 1) * (len(pending) - i - 1)
            detail = (f"{float(row['seconds']):.4f} s" if row["status"] in ("ok", "wrong")
                      else row["error"])
            line = f"[{i + 1}/{len(pending)}] {label}: {row['status']} {detail}"
            if bar is not None:
                bar.write(line, file=sys.stderr)
                bar.update(1)
            else:
                say(f"{line}  (elapsed {_fmt_time(elapsed)}, eta {_fmt_time(eta)})")
    finally:
        if bar is not None:
            bar.close()
    say(f"distmm sweep {cfg['name']}: done, {len(pending) - failures} ok, {failures} not ok of "
        f"{len(pending)} run now; table: {results}")
    print(results)
    return 0
