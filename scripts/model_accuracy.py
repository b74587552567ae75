"""The cost model against measurement (issue 4), printed as a table.

    .venv/bin/python scripts/model_accuracy.py [--profile results/profile.json] [--ranks 4,8,9]
        [--repeat 5] [--rounds 1] [--trace-overhead] [--out results/model_accuracy.csv]
        [--cluster RANKS_PER_NODE --emulate-links PRESET]

Calibrates first (``mpiexec -n <cores> distmm calibrate``) unless --profile names an existing
profile. Then, for every algorithm at every rank count it admits among --ranks and three shapes
(square, tall-skinny, K-large), runs ``distmm run --json --profile`` and compares:
- bytes: the bytes each rank counted against the model's schedule for that rank (ratio 1.000
  expected for every algorithm, since both come from the same loop);
- time: predicted / measured total, with the median |predicted / measured - 1| overall and the
  worst per algorithm;
- compute alone: the model's GEMM phase against the GEMM-only loop the run timed in the same job
  (`compute_seconds`), `compute pred/meas`, and the runs' pred/meas divided by it: a miss that
  the GEMMs alone share is the machine computing at another speed than when it was calibrated
  (a VM's host in another spell), not the price of the messages. Read it so up to the cores:
  above them calibrate prices each collective by what it adds to a loop of GEMMs, so part of
  what the GEMMs lose to time slicing is in the collectives' prices there.
With --rounds R the whole sweep runs R times, one run after another, and each run keeps the
round with its median time (and that round's trace): on a shared machine a slow spell then
lands on one round of a run, not on the run; a `spread` column gives the slowest round over
the fastest.
With --phases every run is traced (viztracer, bench/trace.py) and each phase of the model
(gemm, each collective kind, shifts, waits) is set against what the traces measured for it (the
busiest rank's time in that phase, median over repetitions; bench/spans.phase_summary; the polls
inside an overlapped GEMM count for the messages they progress), so a miss
is explained, not only counted: per run a `phases` column, then the median and worst
|pred/meas - 1| per phase over all runs.
With --trace-overhead it also times square runs with and without --trace.
With --replay CSV it runs nothing: the runs of a table it wrote are priced again under
--profile with the model as the code now has it (what a change to the model or the calibration
would have made of runs already measured), and summed up as a sweep is; runs on an emulated
cluster (the table's ``topology`` and ``links`` columns) are priced as such. Given several
tables (sweeps of the same runs at other times) it sums them up as one: each run measured in
at least half of them, by its median over them (:func:`pooled`).
With --cluster RPN --emulate-links PRESET every run is on an emulated cluster of P / RPN nodes
(``--topology cluster:P/RPN,RPN``, messages between nodes held to the preset's latency and
bandwidth) and the table adds the share of the time that is communication (1 - compute-only /
measured).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from bench.calibration import other_machine_note, unsteady_note  # noqa: E402
from bench.files import save_csv_atomic  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.machine import cores  # noqa: E402
from bench.model import Profile, ProfileError, bytes_per_rank, predict, schedule  # noqa: E402

SHAPES = {
    "square": (2048, 2048, 2048),
    "tall-skinny": (8192, 1024, 512),
    "K-large": (768, 8192, 768),
}


def launch(P: int, argv: list[str], timeout: int = 900) -> dict | None:
    """The JSON record `distmm ARGV` prints on P ranks (None, said on stderr, if it fails)."""
    record, why = Launcher.find().run_json(P, argv, timeout, cwd=ROOT)
    if record is None:
        print(f"  failed: {' '.join(argv)}: {why}", file=sys.stderr)
    return record


def calibrate(P: int, out: Path) -> None:
    failed = Launcher.find().calibrate(P, out, 900, cwd=ROOT)
    if failed:
        print(f"  {failed}", file=sys.stderr)


def phase_errors(trace: Path, run: dict) -> dict[str, float]:
    """{phase: predicted / measured} of one traced run (phases the model or the trace has)."""
    from bench.spans import phase_summary, spans_table

    summary = phase_summary(spans_table(trace), run)
    return {
        phase: v["predicted"] / v["measured"]
        for phase, v in summary.items()
        if phase != "total" and v["predicted"] and v["measured"]
    }


def print_phase_errors(table: pd.DataFrame) -> None:
    """Per phase over all runs: how many runs have it, median and worst |pred/meas - 1|, and the
    worst run."""
    rows = []
    for _, r in table.iterrows():
        for phase, ratio in r["phases"].items():
            rows.append((phase, ratio, f"{r['algo']} P={r['P']} {r['shape']}"))
    if not rows:
        return
    per = pd.DataFrame(rows, columns=["phase", "ratio", "run"])
    per["err"] = (per["ratio"] - 1).abs()
    print("\nper phase, predicted / measured (traces):")
    for phase, g in per.groupby("phase"):
        worst = g.loc[g["err"].idxmax()]
        print(
            f"  {phase:<15} runs {len(g):3d}  median ratio {g['ratio'].median():.2f}  "
            f"median |err| {g['err'].median():.2f}  worst {worst['ratio']:.2f} ({worst['run']})"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="results/profile.json")
    p.add_argument("--ranks", default="4,8,9")
    p.add_argument("--algos", default=",".join(ALGORITHMS))
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--rounds", type=int, default=1, help="sweeps over every run, in turn (median kept)"
    )
    p.add_argument("--phases", action="store_true", help="trace runs; per-phase errors")
    p.add_argument("--trace-overhead", action="store_true")
    p.add_argument("--out", default="results/model_accuracy.csv")
    p.add_argument("--cluster", type=int, metavar="RPN", help="emulated nodes of RPN ranks")
    p.add_argument("--emulate-links", metavar="PRESET", help="the network, with --cluster")
    p.add_argument(
        "--replay", metavar="CSV", nargs="+", help="price the runs of stored tables again"
    )
    args = p.parse_args()
    if args.replay:
        if args.cluster or args.emulate_links:
            p.error("--replay takes each run's machine from the table, not --cluster")
        for path in args.replay:
            if not Path(path).is_file():
                p.error(f"--replay: no table {path}")
        try:
            profile = Profile.load(args.profile)
            tables = [replayed(Path(path), profile) for path in args.replay]
            report(tables[0] if len(tables) == 1 else pooled(tables), args)
        except ProfileError as err:
            p.error(str(err))
        return
    profile = Path(args.profile).resolve()  # the runs start in ROOT
    if not profile.exists():
        print(f"calibrating on {cores()} ranks -> {profile}", file=sys.stderr, flush=True)
        profile.parent.mkdir(parents=True, exist_ok=True)
        calibrate(cores(), profile)
    meta = Profile.load(profile).meta
    for note in (unsteady_note(meta), other_machine_note(meta)):  # the runs run here
        if note:
            print(note, flush=True)
    cases = []  # (P, algo, shape name, cluster options)
    for P in (int(x) for x in args.ranks.split(",")):
        for algo in args.algos.split(","):
            if not get(algo).grids(P) or (args.cluster and P % args.cluster):
                continue
            cluster = {}
            if args.cluster:
                cluster = {
                    "topology": f"cluster:{P // args.cluster},{args.cluster}",
                    "emulate_links": args.emulate_links,
                }
            cases += [(P, algo, name, cluster) for name in args.shapes.split(",")]
    runs: dict[int, list] = {i: [] for i in range(len(cases))}  # (record, phases) per round
    for round_ in range(args.rounds):
        for i, (P, algo, name, cluster) in enumerate(cases):
            print(f"round {round_ + 1}: P={P} {algo} {name}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory() as tmp:
                trace = f"{tmp}/trace" if args.phases else None
                argv = run_argv(
                    algo,
                    SHAPES[name],
                    repeat=args.repeat,
                    profile=str(profile),
                    trace=trace,
                    as_json=True,
                    **cluster,
                )
                r = launch(P, argv)
                if r:
                    runs[i].append((r, phase_errors(Path(trace), r) if trace else {}))
    rows = []
    for i, (P, algo, name, cluster) in enumerate(cases):
        if not runs[i]:
            continue
        # the round with the median time: a slow spell of the shared machine lands on one round
        r, phases = sorted(runs[i], key=lambda rp: rp[0]["seconds"])[(len(runs[i]) - 1) // 2]
        seconds = [x["seconds"] for x, _ in runs[i]]  # every round's, in order
        module, shape = get(algo), SHAPES[name]
        model_bytes = bytes_per_rank(module, module.plan(shape, P), np.float32)
        counted = r["bytes_sent_per_rank"]
        ratio = (sum(counted) / sum(model_bytes)) if sum(model_bytes) else 1.0
        rows.append(
            {
                "algo": algo,
                "P": P,
                "shape": name,
                "grid": "x".join(map(str, r["grid"])),
                "measured_s": r["seconds"],
                "predicted_s": r["predicted_seconds"],
                "pred/meas": r["predicted_seconds"] / r["seconds"],
                "compute pred/meas": r["predicted_phases"].get("gemm", 0.0) / r["compute_seconds"],
                "comm share": 1 - r["compute_seconds"] / r["seconds"],
                "bytes counted/model": ratio,
                "bytes equal per rank": counted == model_bytes,
                "topology": cluster.get("topology", "mesh"),
                "links": cluster.get("emulate_links", ""),
                **(
                    {"spread": max(seconds) / min(seconds), "rounds_s": seconds}
                    if args.rounds > 1
                    else {}
                ),
                **({"phases": phases} if args.phases else {}),
            }
        )
    table = pd.DataFrame(rows)
    save_csv_atomic(args.out, table)
    report(table, args)
    if args.trace_overhead:
        trace_overhead(args)


def replayed(path: Path, profile) -> pd.DataFrame:
    """A stored table (``--out``) with each run priced again under ``profile``: rank 0's
    schedule of its plan, as `distmm run --profile` prices a run from native layouts, on one
    node or on the emulated cluster its ``topology`` and ``links`` columns name (tables from
    before those columns: on one node)."""
    table = pd.read_csv(path, keep_default_na=False)
    predicted, gemm = [], []
    for _, r in table.iterrows():
        module, grid = get(r["algo"]), tuple(int(x) for x in r["grid"].split("x"))
        # every algorithm's first option is its grid (T10's F_op)
        plan = module.plan(SHAPES[r["shape"]], int(r["P"]), **{module.options[0].name: grid})
        binding, tree, links = _emulated(plan, r.get("topology", "mesh"), r.get("links", ""))
        events = schedule(module, plan, 0, "float32", binding, tree)
        price = predict(events, profile, "float32", int(r["P"]), links=links, P=plan.P)
        predicted.append(price.seconds)
        gemm.append(price.phases.get("gemm", 0.0))
    table["predicted_s"] = predicted
    table["pred/meas"] = table["predicted_s"] / table["measured_s"]
    if "comm share" in table:  # 1 - compute-only / measured, of the round kept
        compute = table["measured_s"] * (1 - table["comm share"])
        at = table.columns.get_loc("pred/meas") + 1
        table = table.drop(columns=["compute pred/meas"], errors="ignore")
        table.insert(at, "compute pred/meas", np.asarray(gemm) / compute)
    if "rounds_s" in table:
        table["rounds_s"] = table["rounds_s"].map(json.loads)
    return table.drop(columns=["phases"], errors="ignore")


RUN = ["algo", "P", "shape", "grid", "topology", "links"]  # a run's identity across sweeps


def pooled(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Replayed sweeps of the same runs as one table: each run measured in at least half of
    them, its measured seconds and communication share the medians over those sweeps (one
    sweep's slow spell then decides nothing), ``rounds_s`` each sweep's measurement (the
    rounds summary then reads sweeps), the prediction its own (the same in every sweep)."""
    both = pd.concat([t.assign(sweep=i) for i, t in enumerate(tables)], ignore_index=True)
    for column, alone in (("topology", "mesh"), ("links", "")):  # (tables from before them)
        both[column] = both[column].fillna(alone) if column in both else alone
    both["compute"] = both["measured_s"] * (1 - both["comm share"])
    both["gemm"] = both["compute pred/meas"] * both["compute"]
    out = both.groupby(RUN, sort=False).agg(
        measured_s=("measured_s", "median"),
        predicted_s=("predicted_s", "first"),
        gemm=("gemm", "first"),
        compute=("compute", "median"),
        **{"comm share": ("comm share", "median")},
        **{"bytes equal per rank": ("bytes equal per rank", "all")},
        rounds_s=("measured_s", list),
        sweeps=("sweep", "nunique"),
    )
    out = out[out["sweeps"] >= (len(tables) + 1) // 2].reset_index()
    out["pred/meas"] = out["predicted_s"] / out["measured_s"]
    out["compute pred/meas"] = out["gemm"] / out["compute"]
    out["spread"] = out["rounds_s"].map(lambda r: max(r) / min(r))
    return out.drop(columns=["gemm", "compute"])


def _emulated(plan, topology: str, preset: str) -> tuple:
    """(binding, tree, links) of a run on ``topology`` with ``preset``'s links emulated, as
    `distmm run --topology T --emulate-links PRESET` binds and holds it (all None on a mesh)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from bench.runner import tree_setup

    how = SimpleNamespace(topology=topology or "mesh", bind=None)
    tree, binding, links = tree_setup(how, plan, preset or None)
    return binding, tree, (replace(links, emulated=True) if links else None)


def report(table: pd.DataFrame, args) -> None:
    """The table and its summary: errors overall, by P and by algorithm, the rounds' spread."""
    shown = table.drop(columns=["rounds_s"], errors="ignore")
    if "phases" in shown:
        shown["phases"] = shown["phases"].map(
            lambda d: " ".join(f"{k}={v:.2f}" for k, v in sorted(d.items()))
        )
    with pd.option_context("display.width", 250, "display.float_format", "{:.3f}".format):
        print(shown.to_string(index=False))
    err = (table["pred/meas"] - 1).abs()
    equal = int(table["bytes equal per rank"].sum())
    print(
        f"\nruns: {len(table)}; bytes equal on every rank in {equal} of {len(table)}; "
        f"median |pred/meas - 1| = {err.median():.3f}"
    )
    print(
        f"over 30%: {int((err > 0.3).sum())} runs; median |pred/meas - 1| by P: "
        + ", ".join(f"{P} {v:.3f}" for P, v in err.groupby(table["P"]).median().items())
        + f"; median communication share {table['comm share'].median():.2f}"
    )
    if "rounds_s" in table:
        first = (table["predicted_s"] / table["rounds_s"].map(lambda s: s[0]) - 1).abs()
        kind = "sweep" if "sweeps" in table else "round"  # (pooled: each run's sweeps)
        print(
            f"{table['rounds_s'].map(len).max()} {kind}s: the slowest {kind} over the fastest, "
            f"median {table['spread'].median():.2f}, over 1.3 in "
            f"{int((table['spread'] > 1.3).sum())} runs; the first {kind} alone: median "
            f"|pred/meas - 1| = {first.median():.3f}, {int((first > 0.3).sum())} runs over 30%"
        )
    if "compute pred/meas" in table:
        print(compute_text(table))
    worst = table.assign(err=err).groupby("algo")["err"].max()
    print(
        "worst |pred/meas - 1| per algorithm: "
        + ", ".join(f"{a} {v:.3f}" for a, v in worst.items())
    )
    if "phases" in table:
        print_phase_errors(table)


def compute_text(table: pd.DataFrame) -> str:
    """The summary's lines on the runs' GEMMs alone (``compute pred/meas``) and on the rest."""
    compute = table["compute pred/meas"]
    alone = (compute - 1).abs()
    over = table["pred/meas"] / compute
    rest = (over - 1).abs()
    return (
        f"compute alone (the GEMM-only loop each run timed in its job, against the model's GEMM "
        f"phase): median |pred/meas - 1| = {alone.median():.3f}, {int((alone > 0.3).sum())} "
        "over 30%; median pred/meas by P: "
        + ", ".join(f"{P} {v:.2f}" for P, v in compute.groupby(table["P"]).median().items())
        + f"\nthe runs' pred/meas over their compute's (the GEMMs' own miss divided out): "
        f"median |ratio - 1| = {rest.median():.3f}, {int((rest > 0.3).sum())} over 30%; median "
        "by P: " + ", ".join(f"{P} {v:.2f}" for P, v in over.groupby(table["P"]).median().items())
    )


def trace_overhead(args) -> None:
    """Square runs timed with and without --trace, at each rank count of --ranks."""
    print("\ntracing overhead (square, median of runs):")
    for P in (int(x) for x in args.ranks.split(",")):
        for algo in ("summa", "cannon"):
            if not get(algo).grids(P):
                continue
            plain, traced = [], []
            for _ in range(3):
                with tempfile.TemporaryDirectory() as d:
                    shape = (2048, 2048, 2048)
                    a = launch(P, run_argv(algo, shape, repeat=args.repeat, as_json=True))
                    b = launch(
                        P,
                        run_argv(algo, shape, repeat=args.repeat, trace=d + "/t", as_json=True),
                    )
                    if a and b:
                        plain.append(a["seconds"])
                        traced.append(b["seconds"])
            if plain:
                ov = statistics.median(traced) / statistics.median(plain) - 1
                print(
                    f"  P={P} {algo}: {statistics.median(plain):.4f} s plain, "
                    f"{statistics.median(traced):.4f} s traced, overhead {ov * 100:+.1f}%"
                )


if __name__ == "__main__":
    main()
