"""Stored planner runs priced again under a profile (and the model as the code now has it):
what a change to the model or the calibration would have made of runs already measured.

    .venv/bin/python scripts/replan.py --records plan_block.jsonl [more.jsonl ...]
        --profile profile.json [--layouts block] [--judge-rounds K] [--debiased] [--misses]

The records are ``scripts/plan_accuracy.py --records``'s JSON lines: each case's candidates
as they were run, with their measured timings (on a mesh, or on a cluster emulated with
--emulate-links: priced as such). Every case is planned again (the same
candidates, priced now); among its measured candidates the one now predicted fastest is the
first choice, against the one measured fastest. Prints each case, then the cases' hits, the
runs' median |pred/meas - 1|, each algorithm's median pred/meas and the moves' in and out
(where they took time) and the runs' own repeatability (plan_accuracy.py's); a case whose new
recommendation was not among those measured is counted apart (the records cannot say). With
--judge-rounds K the first choices are also judged on every K of the rounds alone (their
median): how far the score moves with the rounds measured, e.g. K = 3 on a sweep of 5 rounds
for what the usual 3 could have made of it. With --debiased they are judged once more with
each (algorithm, P)'s median pred/meas over the records divided out of its prices, fitted in
sample: the most a per-algorithm correction of the model could score on these runs. With
--misses each case the first choice misses is explained: its phases and the fastest's, priced
now against the median of every round measured (in / kernel / out | in / kernel / out, ms).

A case found in several records files (sweeps of the same cases at other times) is judged on
them all: each candidate by the median over the sweeps of its median there, those measured in
at least half of the sweeps (:func:`_pooled`); the repeatability is then one sweep's against
the others'. Each run's pred/meas is still its own.
"""

import argparse
import itertools
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import cache, partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import cores
from bench.model import Profile
from bench.plan_view import phases_text, repeatability_text
from bench.planner import candidates, recommend
from bench.stats import case_agreement
from layouts.endpoints import user_layouts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--records", required=True, nargs="+", help="plan_accuracy.py --records FILE(s)"
    )
    ap.add_argument("--profile", required=True)
    ap.add_argument("--layouts", default="block", help="the layouts the runs started from")
    ap.add_argument("--judge-rounds", type=int, help="also judge on every K of the rounds")
    ap.add_argument(
        "--debiased",
        action="store_true",
        help="also judge with each (algorithm, P)'s median pred/meas divided out (in sample)",
    )
    ap.add_argument(
        "--misses",
        action="store_true",
        help="under each miss, the first choice's and the fastest's phases, priced and measured",
    )
    args = ap.parse_args()
    cases: dict[str, list[dict]] = {}
    for sweep, f in enumerate(args.records):
        for line in Path(f).read_text().splitlines():
            run = json.loads(line)
            if run["runs"]:
                cases.setdefault(run["case"], []).append({**run, "sweep": sweep})
    Profile.load(args.profile)  # (read here first: a bad profile fails before any process starts)
    hits = within = unmeasured = 0
    agree = [0, 0, 0]
    judged = []  # per case: (first choice now, {candidate: its rounds' seconds})
    priced_now = []  # per case: (P, {candidate: (algorithm, seconds now, seconds measured)})
    ratios: dict[str, list[float]] = {}
    moves: dict[str, list[float]] = {"in": [], "out": []}  # pred/meas of each phase of moves
    sweeps = max(len({run["sweep"] for run in runs}) for runs in cases.values())
    if sweeps > 1:
        print(
            f"sweeps: up to {sweeps} measured each case; each candidate judged by its median over "
            "those measuring it, if at least half; the rounds below are sweeps"
        )
    print(f"{'case':<22}{'first choice now':<34}{'measured fastest':<34}{'first/fastest':>14}")
    # each case planned on its own, a process per core (results in the cases' order)
    price = partial(_replayed, profile=args.profile, layouts=args.layouts, misses=args.misses)
    with ProcessPoolExecutor(min(cores(), len(cases)) or 1) as pool:
        for case, out in zip(cases, pool.map(price, cases.values()), strict=True):
            first, fastest, ratio = out["first"], out["fastest"], out["ratio"]
            agree = [a + b for a, b in zip(agree, out["agreement"], strict=True)]
            for algo, r in out["ratios"]:
                ratios.setdefault(algo, []).append(r)
            for side, r in out["moves"]:
                moves[side].append(r)
            judged.append((first, out["rounds"]))
            priced_now.append(out["priced"])
            hits += first == fastest
            within += ratio <= 1.10
            unmeasured += out["unmeasured"]
            print(f"{case:<22}{first:<34}{fastest:<34}{ratio:>14.3f}")
            if args.misses and first != fastest:
                for name in (first, fastest):
                    print(f"    {name:<34}{out['phases'].get(name, 'not priced now')}")
    errors = [abs(r - 1) for rs in ratios.values() for r in rs]
    n = len(cases)
    print(
        f"cases {n}: first choice among the measured now the fastest in {hits} "
        f"({100 * hits / n:.0f}%), within 10% in {within} ({100 * within / n:.0f}%); the new "
        f"recommendation was not measured in {unmeasured}"
    )
    print(
        f"runs {len(errors)}: median |pred/meas - 1| {100 * statistics.median(errors):.1f}%, "
        f"{sum(e > 0.3 for e in errors)} over 30%; median pred/meas by algorithm: "
        + ", ".join(f"{a} {statistics.median(r):.2f} ({len(r)})" for a, r in sorted(ratios.items()))
    )
    print(
        "moves, median pred/meas: "
        + ", ".join(f"{k} {statistics.median(r):.2f} ({len(r)})" for k, r in moves.items() if r)
    )
    print(repeatability_text(*agree))
    if args.judge_rounds:
        print(_judged_on_subsets(judged, args.judge_rounds))
    if args.debiased:
        print(_debiased(priced_now))
    return 0


def _replayed(runs: list[dict], profile: str, layouts: str, misses: bool = False) -> dict:
    """One case's stored runs priced again: its first choice now among the measured, the
    measured fastest, their ratio, each run's pred/meas, its moves', and what judging needs;
    with ``misses``, where those two differ, their phases priced and measured."""
    profile = _loaded(profile)
    case = runs[0]["case"]
    P = int(case.split()[0].removeprefix("P="))
    shape = tuple(int(x) for x in case.split()[1].split("x"))
    users = user_layouts(dict.fromkeys("ABC", layouts), shape, P)
    topology, links = _machine(runs[0]["argv"])
    # the fastest few exactly (the measured are mostly among them): a third of the time of
    # pricing every candidate (what a replay of 32 cases takes, more than plan_accuracy's own)
    keep = 2 * len({tuple(run["argv"]) for run in runs})
    cands = candidates(
        shape, P, profile, "float32", P, topology, links, users=users, keep=keep, emulated=True
    )
    priced = {tuple(c.run_args(shape, "float32", topology, links)): c for c in cands}
    # a run the ranking left out (slower than those kept, or left to its twin, Algorithm.
    # same_as: summa25d on p x p x 1, say), priced with its algorithm alone
    for algo in {run["argv"][1] for run in runs if tuple(run["argv"]) not in priced}:
        alone = candidates(
            shape, P, profile, "float32", P, topology, links, [algo], users, emulated=True
        )
        for c in alone:
            priced.setdefault(tuple(c.run_args(shape, "float32", topology, links)), c)
    # seconds by candidate, measured and priced now; (algorithm, pred/meas) of each run, and
    # (side, pred/meas) of its moves
    measured, now, ratios, moves = {}, {}, [], []
    rounds = _pooled(runs)
    argvs = [tuple(run["argv"]) for run in runs]
    for run in runs:
        name, c = run["candidate"], priced.get(tuple(run["argv"]))
        own = statistics.median(r["seconds"] for r in run["runs"])
        if c is not None:
            ratios.append((c.algo, c.seconds / own))
            for side, pred in zip(("in", "out"), c.redistribute, strict=True):
                took = [r["phases"][f"redistribute_{side}"]["seconds"] for r in run["runs"]]
                if pred > 0 and statistics.median(took) > 0:
                    moves.append((side, pred / statistics.median(took)))
        if name in rounds:
            measured[name] = statistics.median(rounds[name])
            if c is not None:
                now[name] = c.seconds
    first = min(now, key=now.get)
    fastest = min(measured, key=measured.get)
    algos = {run["candidate"]: run["argv"][1] for run in runs}
    phases = {}  # (the rounds of every sweep together)
    argv_of = {run["candidate"]: tuple(run["argv"]) for run in runs}
    for name in (first, fastest) if misses and first != fastest else ():
        if (c := priced.get(argv_of[name])) is not None:
            recs = [r for run in runs if run["candidate"] == name for r in run["runs"]]
            phases[name] = phases_text(c, recs)
            if topology == "mesh" and links is None:
                phases[name] += _kernel_parts(c, profile, P, recs)
    best = recommend(cands, None)
    return {
        "first": first,
        "fastest": fastest,
        "ratio": measured[first] / measured[fastest],
        "ratios": ratios,
        "moves": moves,
        "rounds": rounds,
        "agreement": case_agreement(rounds.values()),
        "priced": (P, {k: (algos[k], now[k], measured[k]) for k in now}),
        "phases": phases,
        "unmeasured": best.seconds not in [c.seconds for c in map(priced.get, argvs) if c],
    }


def _kernel_parts(c, profile, P: int, recs: list[dict]) -> str:
    """The kernel's price by kind (bench.model.predict's phases: gemm, shift, bcast, barrier,
    ...) beside the GEMM-only loop each run timed in its job (``compute_seconds``, barrier to
    barrier: a GEMM phase and its closing barrier), in ms; on one node."""
    from algorithms import get
    from bench.model import predict, schedule

    pred = predict(schedule(get(c.algo), c.plan, 0, "float32"), profile, "float32", P, P=P)
    parts = ", ".join(
        f"{kind} {sec * 1e3:.1f}"
        for kind, sec in sorted(pred.phases.items(), key=lambda kv: -kv[1])
    )
    alone = [r["compute_seconds"] for r in recs if r.get("compute_seconds")]
    took = f"; GEMM-only loop {statistics.median(alone) * 1e3:.1f}" if alone else ""
    return f"\n{'':<38}kernel priced: {parts}{took}"


_loaded = cache(Profile.load)  # a profile read once per process


def _pooled(runs: list[dict]) -> dict[str, list[float]]:
    """Each candidate's rounds (seconds) to judge a case by: from one sweep its rounds; where
    the case was measured in several sweeps (records files, ``run["sweep"]``), the median of
    each sweep's rounds, for the candidates measured in at least half of those sweeps (one
    sweep's slow spell then decides nothing, and no candidate is judged on a sweep or two
    against others judged on many)."""
    by_name: dict[str, list[dict]] = {}
    for run in runs:
        by_name.setdefault(run["candidate"], []).append(run)
    sweeps = len({run.get("sweep", 0) for run in runs})
    if sweeps == 1:
        return {
            name: [r["seconds"] for run in rs for r in run["runs"]] for name, rs in by_name.items()
        }
    least = min((sweeps + 1) // 2, max(map(len, by_name.values())))
    return {
        name: [statistics.median(r["seconds"] for r in run["runs"]) for run in rs]
        for name, rs in by_name.items()
        if len(rs) >= least
    }


def _machine(argv: list[str]) -> tuple[str, str | None]:
    """(topology, emulated links) a stored run's `distmm run` arguments name (a mesh: "mesh",
    None), so that runs on an emulated cluster are priced as such."""
    named = dict(zip(argv, argv[1:], strict=False))
    return named.get("--topology", "mesh"), named.get("--emulate-links")


def _debiased(priced_now: list) -> str:
    """The first choices with each (algorithm, P)'s median pred/meas over these records divided
    out of its prices: fitted to the very runs it is judged on, the most that correcting the
    model's bias per algorithm and rank count could buy; what is left is the runs' noise."""
    ratios: dict[tuple, list[float]] = {}
    for P, cands in priced_now:
        for algo, pred, meas in cands.values():
            ratios.setdefault((algo, P), []).append(pred / meas)
    bias = {k: statistics.median(v) for k, v in ratios.items()}
    fastest = near = 0
    for P, cands in priced_now:
        first = min(cands, key=lambda c: cands[c][1] / bias[(cands[c][0], P)])
        best = min(c[2] for c in cands.values())
        fastest += cands[first][2] <= best
        near += cands[first][2] <= 1.10 * best
    n = len(priced_now)
    return (
        f"with each (algorithm, P)'s median pred/meas divided out (in sample): fastest in "
        f"{fastest} ({100 * fastest / n:.0f}%), within 10% in {near} ({100 * near / n:.0f}%)"
    )


def _judged_on_subsets(judged: list, k: int) -> str:
    """The first choices judged on every k of the rounds alone (each candidate's median over
    those rounds): the least, median and most hits, fastest and within 10%."""
    least = min(len(r) for _, rounds in judged for r in rounds.values())
    if not 0 < k <= least:
        return f"--judge-rounds {k}: the records have {least} rounds"
    scores = []
    for subset in itertools.combinations(range(least), k):
        fastest = near = 0
        for first, rounds in judged:
            took = {c: statistics.median(r[i] for i in subset) for c, r in rounds.items()}
            fastest += took[first] <= min(took.values())
            near += took[first] <= 1.10 * min(took.values())
        scores.append((fastest, near))
    hits, nears = (sorted(x) for x in zip(*scores, strict=True))
    return (
        f"judged on each {k} of the {least} rounds ({len(scores)} ways): first choice the "
        f"fastest in {hits[0]}-{hits[-1]} (median {statistics.median(hits):g}) of {len(judged)}"
        f", within 10% in {nears[0]}-{nears[-1]} (median {statistics.median(nears):g})"
    )


if __name__ == "__main__":
    sys.exit(main())
