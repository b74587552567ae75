"""A sweep's configuration: the TOML file, the flags that override it, and the runs it expands
to. A sweep is a TOML file (see ``scripts/*.toml``) or command-line flags, or both (flags win)::

    name = "strong"                        # results/<name>.csv unless `results` says otherwise
    algorithms = ["cannon", "summa"]       # default: every algorithm
    ranks = [1, 4, 9, 16]
    shapes = [[2048, 2048, 2048]]          # strong scaling: the same problems at every P
    # weak = { base = [1024, 1024, 1024], ranks = 1, per = "work" }   # instead of shapes
    dtypes = ["float32"]
    layouts = ["native", "block"]          # where A, B start and C ends (distmm run --layouts):
                                           # native (default), rows, cols, block,
                                           # block-cyclic:NB or LAYOUT@MESH
    repeat = 5                             # 5: the report can separate two algorithms
    jobs = 1                               # separate mpiexec jobs per configuration (rounds)
    warmup = 1
    trace = false                          # --trace into results/<name>-traces/<run>/
    profile = "results/profile.json"       # or: calibrate = true (calibrate once, first)
    topology = "mncore:2,2,2,2"            # passed to distmm run as --topology
    timeout = 300                          # seconds per run
    launcher = "srun"                      # "mpiexec" (default), "srun" or a template such as
                                           # "srun --mpi=pmix -n {P} {cmd}" ({ppn}, {hostfile})
    hostfile = "hosts.txt"                 # mpiexec's hostfile
    ranks_per_node = 4                     # -ppn / --map-by ppr:N:node / --ntasks-per-node
    pin = true                             # bind each rank to a core

Every layout but ``native`` times the redistribution of A and B in and of C out as well as the
multiplication (the row's ``seconds`` are end to end, ``multiply_seconds`` the kernel's). The
layouts are checked for every shape and rank count before any run; a tree ``topology`` takes
native layouts only (as `distmm run` does).

``jobs`` > 1 runs every configuration in that many separate jobs, in rounds (each round runs
every configuration once), so that a slow drift of the machine touches every configuration
alike. Repetitions within one job share its process placement and memory layout and are not
independent of each other; jobs are (pyperf spawns worker processes for the same reason).
`distmm compare` tests the jobs' medians against each other where a configuration has several.

Weak scaling keeps the work per rank constant: at P ranks every dimension of ``base`` is scaled
by (P / ranks)^(1/3), so M K N / P stays what it was at ``ranks`` (``per = "memory"`` scales by
(P / ranks)^(1/2) instead, keeping the elements of A, B and C per rank constant). Sizes are
rounded to a multiple of ``round`` (default 16).

The TOML is checked against the small table below rather than a schema library: the checks are
one line each, and the error names the key and its line, which tomllib does not report for a
value it parsed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from algorithms import ALGORITHMS, get
from layouts.endpoints import NATIVE, user_layouts
from layouts.tensorlayout import LayoutError
from topology.mesh import MeshError

from .errors import UsageError
from .launch import LAUNCHER_HELP, launcher_problem
from .stats import MIN_SAMPLES
from .units import parse_ints

KEY_FIELDS = "algo P M K N dtype repeat warmup topology trace scaling".split()
# TOML key -> (type check, description for the error message)
_KEYS = {
    "name": (
        lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", v),
        "a name of letters, digits, '.', '_' or '-'",
    ),
    "algorithms": (lambda v: _list_of(v, str) and v, "a non-empty list of algorithm names"),
    "ranks": (
        lambda v: _list_of(v, int) and v and all(x >= 1 for x in v),
        "a non-empty list of positive integers",
    ),
    "shapes": (
        lambda v: _list_of(v, list) and v and all(_shape_ok(s) for s in v),
        "a list of [M, K, N] lists of positive integers",
    ),
    "weak": (lambda v: isinstance(v, dict), "a table {base = [M, K, N], ranks = P0, per = ...}"),
    "dtypes": (
        lambda v: _list_of(v, str) and v and all(x in ("float32", "float64") for x in v),
        'a list of "float32" / "float64"',
    ),
    "layouts": (
        lambda v: _list_of(v, str) and v and all(x.strip() for x in v),
        'a non-empty list of layout names ("native", "block", "block-cyclic:64", ...)',
    ),
    "repeat": (lambda v: _int(v) and v >= 1, "a positive integer"),
    "jobs": (lambda v: _int(v) and v >= 1, "a positive integer"),
    "warmup": (lambda v: _int(v) and v >= 0, "a non-negative integer"),
    "topology": (lambda v: isinstance(v, str) and v, "a topology string"),
    "trace": (lambda v: isinstance(v, bool), "true or false"),
    "profile": (lambda v: isinstance(v, str) and v, "a path to a profile JSON"),
    "calibrate": (lambda v: isinstance(v, bool) or v == "quick", 'true, false or "quick"'),
    "timeout": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
        "a positive number of seconds",
    ),
    "results": (lambda v: isinstance(v, str) and v.endswith(".csv"), "a path ending in .csv"),
    "launcher": (lambda v: isinstance(v, str) and not launcher_problem(v), LAUNCHER_HELP),
    "hostfile": (lambda v: isinstance(v, str) and v, "a path to a hostfile"),
    "ranks_per_node": (lambda v: _int(v) and v >= 1, "a positive integer"),
    "pin": (lambda v: isinstance(v, bool), "true or false"),
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
            raise UsageError(
                f"{where(key)}: unknown key 'weak.{key}' (known: {', '.join(_WEAK_KEYS)})"
            )
        ok, what = _WEAK_KEYS[key]
        if not ok(value):
            raise UsageError(f"{where(key)}: weak.{key} must be {what}, not {value!r}")
    if "weak" in data and "base" not in data["weak"]:
        raise UsageError(f"{where('weak')}: weak needs base = [M, K, N]")
    if "shapes" in data and "weak" in data:
        raise UsageError(f"{where('weak')}: give shapes (strong scaling) or weak, not both")
    _check_algorithms(data.get("algorithms", []), where("algorithms"))
    return data


def _check_algorithms(names: list[str], where: str) -> None:
    for algo in names:
        if algo not in ALGORITHMS:
            raise UsageError(
                f"{where}: unknown algorithm {algo!r} (choose from {', '.join(ALGORITHMS)})"
            )


def _ints(text: str, flag: str, count: int | None = None) -> list[int]:
    try:
        return list(parse_ints(text, count))
    except ValueError as err:
        raise UsageError(f"{flag} {err}") from None


def configure(args) -> dict:
    """The sweep's settings: the TOML file's, overridden by flags."""
    cfg = load_toml(args.file) if args.file else {}
    if args.name:
        cfg["name"] = args.name
    if args.algos:
        cfg["algorithms"] = [a.strip() for a in args.algos.split(",") if a.strip()]
        _check_algorithms(cfg["algorithms"], "--algos")
    if args.ranks:
        cfg["ranks"] = _ints(args.ranks, "--ranks")
    if args.shapes:
        cfg["shapes"] = [_ints(s, "--shapes", 3) for s in args.shapes.split(";") if s.strip()]
        cfg.pop("weak", None)
    if args.weak:
        cfg["weak"] = {"base": _ints(args.weak, "--weak", 3)}
        cfg.pop("shapes", None)
    layouts_from = None  # where the layouts came from, for an error message
    if getattr(args, "layouts", None):
        cfg["layouts"] = [x.strip() for x in args.layouts.split(";") if x.strip()]
        layouts_from = "--layouts"
    elif "layouts" in cfg:
        line = _line_of(Path(args.file).read_text(), "layouts")
        layouts_from = f"{args.file}:{line}" if line else args.file
    if args.dtype:
        cfg["dtypes"] = [d.strip() for d in args.dtype.split(",")]
        if not _KEYS["dtypes"][0](cfg["dtypes"]):
            raise UsageError(f"--dtype {args.dtype!r}: float32 and/or float64")
    if args.profile and not args.calibrate:  # flags win: a given profile replaces calibrate
        cfg.pop("calibrate", None)
    if args.calibrate and not args.profile:
        cfg.pop("profile", None)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout}: too small")
    for key in (
        "repeat",
        "jobs",
        "warmup",
        "timeout",
        "trace",
        "calibrate",
        "profile",
        "topology",
        "results",
        "launcher",
        "hostfile",
        "ranks_per_node",
        "pin",
    ):
        if getattr(args, key, None) is not None:
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
    cfg.setdefault("repeat", MIN_SAMPLES)  # fewer: the report can never name a fastest
    cfg.setdefault("jobs", 1)
    cfg.setdefault("warmup", 1)
    cfg.setdefault("trace", False)
    cfg.setdefault("timeout", 600)
    cfg.setdefault("launcher", "mpiexec")
    cfg.setdefault("pin", False)
    cfg.setdefault("results", f"results/{cfg['name']}.csv")
    cfg["layouts"] = list(dict.fromkeys(x.strip() for x in cfg.get("layouts", [NATIVE])))
    _check_layouts(cfg, layouts_from)
    return cfg


def _check_layouts(cfg: dict, where: str | None) -> None:
    """Every layout at every rank count and shape of the sweep (the same for every algorithm),
    so that a bad one stops the sweep before its first run, in one line naming where it came
    from."""
    moved = [spec for spec in cfg["layouts"] if spec != NATIVE]
    for spec in moved:
        for P in cfg["ranks"]:
            for shape in shapes_at(cfg, P):
                try:
                    user_layouts(dict.fromkeys("ABC", spec), tuple(shape), P)
                except (LayoutError, MeshError) as err:
                    at = f"{where or 'layouts'}: layouts {spec!r} at P={P}, shape "
                    at += "x".join(map(str, shape))
                    raise UsageError(f"{at}: {err}") from None


def weak_shape(base, base_ranks: int, P: int, per: str = "work", rounding: int = 16):
    """Weak scaling: base at base_ranks, every dimension scaled by (P/base_ranks)^(1/3) (constant
    work per rank) or ^(1/2) (constant memory per rank), rounded to a multiple of `rounding`."""
    factor = (P / base_ranks) ** (1 / 3 if per == "work" else 1 / 2)
    return [max(rounding, int(round(d * factor / rounding)) * rounding) for d in base]


def run_key(point: dict) -> str:
    """The row key of a run: a hash of what makes it a different run. Native layouts leave the
    key as it was before layouts were an axis, so older tables still resume."""
    fields = {k: point[k] for k in KEY_FIELDS}
    if point.get("layouts_in", NATIVE) != NATIVE:
        fields["layouts_in"] = point["layouts_in"]
    if point.get("job", 0):  # the first job keeps the key of a sweep with one job per point
        fields["job"] = point["job"]
    return hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def shapes_at(cfg: dict, P: int) -> list[list[int]]:
    """The shapes the sweep runs at P ranks: ``shapes``, or the weak-scaling one."""
    weak = cfg.get("weak")
    if not weak:
        return cfg["shapes"]
    per, rounding = weak.get("per", "work"), weak.get("round", 16)
    return [weak_shape(weak["base"], weak.get("ranks", 1), P, per, rounding)]


def plan_runs(cfg: dict) -> tuple[list[dict], list[str]]:
    """The sweep's runs in order (round by round with ``jobs``), and notes on the
    (algorithm, P) pairs skipped."""
    runs, skipped = [], []
    for job in range(cfg.get("jobs", 1)):
        runs += _round(cfg, job, skipped if job == 0 else [])
    return runs, skipped


def _round(cfg: dict, job: int, skipped: list[str]) -> list[dict]:
    runs = []
    for algo in cfg["algorithms"]:
        cannot = [P for P in cfg["ranks"] if not get(algo).grids(P)]
        if cannot and not cfg.get("topology"):
            skipped.append(f"{algo} cannot use P = {', '.join(map(str, cannot))}")
        for P in cfg["ranks"]:
            if P in cannot and not cfg.get("topology"):
                continue
            for M, K, N in shapes_at(cfg, P):
                for dtype in cfg["dtypes"]:
                    for layouts in cfg.get("layouts", [NATIVE]):
                        point = {
                            "sweep": cfg["name"],
                            "scaling": "weak" if cfg.get("weak") else "strong",
                            "algo": algo,
                            "P": P,
                            "M": M,
                            "K": K,
                            "N": N,
                            "dtype": dtype,
                            "repeat": cfg["repeat"],
                            "warmup": cfg["warmup"],
                            "topology": cfg.get("topology", ""),
                            "trace": bool(cfg["trace"]),
                            "layouts_in": layouts,
                            "job": job,
                        }
                        point["key"] = run_key(point)
                        runs.append(point)
    return runs
