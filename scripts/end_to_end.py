"""End-to-end runs from the user's layouts against the kernel and the model (issue 12), as tables.

    .venv/bin/python scripts/end_to_end.py [--profile results/profile.json] [--ranks 4,8,9,16]
        [--inputs block-cyclic:64,cols] [--shapes square,tall-skinny] [--repeat 3]
        [--out results/end_to_end.csv]

Calibrates first (``mpiexec -n <cores> distmm calibrate``) unless --profile names an existing
profile. For every algorithm at every rank count it admits, every input layout (A, B and C all
in it) and every shape it runs ``distmm run --layouts IN --json --profile`` and prints:
- verified: C checked in the user's layout;
- e2e/kernel: end-to-end median over the multiplication's median;
- bytes: whether every rank's bytes sent in each redistribution phase equal the model's counts
  (layouts/endpoints.move_counts, the same relabelling);
- redistribution predicted / measured (in + out; each phase apart, and end to end), with the
  median |ratio - 1| overall and by P;
- throughput: the model's price of a uniform all-to-all of the same volume (every rank sending
  the busiest rank's bytes, spread evenly) over the measured redistribution time (above 1 the
  redistribution beat a uniform all-to-all of its peak volume); with a profile that timed
  layout changes, that price comes from them, packing and unpacking included, so this says
  whether the moves run as fast as calibrate's did. Against MPI's own all-to-all, with no model
  between: scripts/redistribution_throughput.py. At the rank count the profile
  was made at, ``vs_a2a`` also sets the measured redistribution against the all-to-all
  calibrate timed there (the profile's table, interpolated), which no model stands between.
Then one relabelling case: SUMMA's own layouts written on the transposed mesh move 0 bytes.

With ``--replay CSV`` nothing runs: the redistributions of the runs a table holds are priced
again with --profile (and the model as the code now has it), and their medians printed.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from bench.endtoend import end_to_end  # noqa: E402
from bench.files import save_csv_atomic  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.machine import cores  # noqa: E402
from bench.model import Profile, plan_moves, price_moves, setup_seconds, transfer_seconds  # noqa: E402
from layouts.endpoints import user_layouts  # noqa: E402

SHAPES = {"square": (3072, 3072, 3072), "tall-skinny": (8192, 1024, 512)}
PHASES = ("redistribute_in", "redistribute_out")


def launch(P: int, argv: list[str], timeout: int = 900) -> dict | None:
    record, why = Launcher.find().run_json(P, argv, timeout, cwd=ROOT)
    if record is None:
        print(f"  failed: {' '.join(argv)}: {why}", file=sys.stderr)
    return record


def model_bytes(algo: str, shape, P: int, spec: str, itemsize: int) -> dict[str, list[int]]:
    """{phase: bytes each job rank sends other ranks} by the model's counts."""
    plan = get(algo).plan(tuple(shape), P, overlap=True)
    return end_to_end(dict.fromkeys("ABC", spec), plan, itemsize).bytes_sent(itemsize)


def uniform_seconds(peak_bytes: int, P: int, profile: Profile, rpn: int) -> float:
    """The calibrated all-to-all in which every rank sends ``peak_bytes`` spread evenly."""
    if peak_bytes == 0 or P == 1:
        return 0.0
    each = peak_bytes / (P - 1)
    counts = np.full((P, P), each) - np.diag(np.full(P, each))
    return transfer_seconds(counts, 1, profile, rpn)


def timed_alltoall(profile_path: Path):
    """(ranks, seconds(bytes per rank)): the all-to-all calibrate timed in the launched job,
    interpolated in log-log between its sizes."""
    data = json.loads(profile_path.read_text())
    table = np.array([row[:2] for row in data.get("collectives", {}).get("alltoall", [])])
    if table.size == 0:
        return None, None
    n, t = np.log(table[:, 0]), np.log(table[:, 1])
    return data["machine"]["ranks"], lambda nbytes: float(np.exp(np.interp(np.log(nbytes), n, t)))


def row(r: dict, algo: str, name: str, spec: str, profile: Profile, timed=(None, None)) -> dict:
    P, itemsize = r["P"], np.dtype(r["dtype"]).itemsize
    counted = {p: r["phases"][p]["bytes_sent_per_rank"] for p in PHASES}
    measured = sum(r["phases"][p]["seconds"] for p in PHASES)
    predicted = sum(r[f"predicted_{p}_seconds"] for p in PHASES)
    peak = max(sum(counted[p][k] for p in PHASES) for k in range(P))
    uniform = sum(uniform_seconds(max(counted[p]), P, profile, r["ranks_per_node"]) for p in PHASES)
    ranks, alltoall = timed
    vs_a2a = float("nan")
    if P == ranks and measured:  # each rank sends the busiest's bytes: P/(P-1) of them in all
        peaks = [max(counted[p]) * P / (P - 1) for p in PHASES if max(counted[p])]
        vs_a2a = sum(alltoall(n) for n in peaks) / measured
    return {
        "algo": algo,
        "P": P,
        "shape": name,
        "input": spec,
        "verified": r["verified"],
        "kernel_s": r["multiply_seconds"],
        "e2e_s": r["seconds"],
        "e2e/kernel": r["seconds"] / r["multiply_seconds"],
        "redist_s": measured,
        "redist_pred_s": predicted,
        **{f"{p[len('redistribute_') :]}_s": r["phases"][p]["seconds"] for p in PHASES},
        "pred/meas": _ratio(predicted, measured),
        **{
            f"{p[len('redistribute_') :]}_pred/meas": _ratio(
                r[f"predicted_{p}_seconds"], r["phases"][p]["seconds"]
            )
            for p in PHASES
        },
        "e2e_pred/meas": _ratio(r["predicted_seconds"], r["seconds"]),
        "bytes_equal": counted == model_bytes(algo, r["shape"], P, spec, itemsize),
        "redist_MiB_peak": peak / 2**20,
        "throughput": _ratio(uniform, measured),
        "vs_a2a": vs_a2a,
        "relabel_saved_MiB": r["relabel"]["bytes_saved"] / 2**20,
    }


def _ratio(value: float, measured: float) -> float:
    """``value`` over a measured time, NaN where nothing was measured."""
    return value / measured if measured else float("nan")


def relabel_case(P: int) -> str:
    plan = get("summa").plan((1024, 1024, 1024), P, overlap=True)
    p, q = plan.mesh.shape
    argv = run_argv("summa", plan.shape, repeat=1, as_json=True)
    for n in "ABC":
        text = str(getattr(plan, n)).replace("_x", "_b").replace("_y", "_a")
        argv += [f"--layout-{n.lower()}", f"{text}@a={q},b={p}"]
    r = launch(P, argv)
    if r is None:
        return "relabelling case failed"
    moved = sum(sum(r["phases"][ph]["bytes_sent_per_rank"]) for ph in PHASES)
    return (
        f"relabelling: SUMMA's native layouts on the transposed {q}x{p} mesh at P={P}: "
        f"{moved} bytes moved (in order it would move {r['relabel']['bytes_before']} bytes; "
        f"ranks {r['relabel']['ranks']}), verified {r['verified']}"
    )


def replay(path: str, profile: Profile) -> pd.DataFrame:
    """A stored table's runs with their redistributions (in + out) priced again: each run
    float32 on one node (ranks per node = P) with the algorithm's default grid and the
    relabelling, as this script runs them."""
    table = pd.read_csv(path)
    priced = []
    for r in table.itertuples():
        module, shape = get(r.algo), _shape(r.shape)
        if shape is None:
            sys.exit(f"{path}: shape {r.shape!r} is not one of {', '.join(SHAPES)} nor MxKxN")
        plan = module.plan(shape, r.P, overlap=True)
        users = user_layouts(dict.fromkeys("ABC", r.input), shape, r.P)
        price = price_moves(plan_moves(users, plan), r.P, profile, 4, r.P)
        price = price.with_setup(setup_seconds(module, plan, profile, "float32", r.P))
        priced.append(price.redistribute_in + price.redistribute_out)
    return table.assign(redist_pred_s=priced, **{"pred/meas": priced / table["redist_s"]})


def _shape(name: str) -> tuple[int, int, int] | None:
    """A table's shape: one of SHAPES by name, or M x K x N as --shape writes it."""
    if name in SHAPES:
        return SHAPES[name]
    sizes = str(name).split("x")
    return tuple(map(int, sizes)) if len(sizes) == 3 and all(map(str.isdigit, sizes)) else None


def redistribution_summary(table: pd.DataFrame) -> None:
    errors = (table["pred/meas"] - 1).abs().dropna()
    print(
        f"redistribution predicted/measured: median |ratio - 1| "
        f"{100 * statistics.median(errors):.1f}%, worst {100 * errors.max():.1f}%"
    )
    print("median predicted / measured by P and by input:")
    print(table.groupby("P")["pred/meas"].median().round(2).to_frame().T.to_string())
    print(table.groupby("input")["pred/meas"].median().round(2).to_frame().T.to_string())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="results/profile.json")
    p.add_argument("--ranks", default="4,8,9,16")
    p.add_argument("--algos", default=",".join(ALGORITHMS))
    p.add_argument("--inputs", default="block-cyclic:64,cols")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--shape", help="one M,K,N instead of --shapes (a quick look)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default="results/end_to_end.csv")
    p.add_argument("--replay", metavar="CSV", help="price a stored table's runs again; run none")
    args = p.parse_args()
    profile_path = Path(args.profile).resolve()  # the runs start in ROOT
    if args.replay:
        if not profile_path.exists():
            sys.exit(f"--replay needs an existing --profile ({profile_path} not found)")
        table = replay(args.replay, Profile.load(profile_path))
        print(f"{len(table)} runs of {args.replay} priced with {args.profile}")
        redistribution_summary(table)
        return
    if not profile_path.exists():
        print(f"calibrating on {cores()} ranks -> {profile_path}", file=sys.stderr, flush=True)
        failed = Launcher.find().calibrate(cores(), profile_path, 900, cwd=ROOT)
        if failed:
            sys.exit(failed)
    profile = Profile.load(profile_path)
    timed = timed_alltoall(profile_path)
    shapes = (
        {args.shape.replace(",", "x"): tuple(int(x) for x in args.shape.split(","))}
        if args.shape
        else {n: SHAPES[n] for n in args.shapes.split(",")}
    )
    rows = []
    for P in (int(x) for x in args.ranks.split(",")):
        for algo in args.algos.split(","):
            if not get(algo).grids(P):
                continue
            for name, shape in shapes.items():
                for spec in args.inputs.split(","):
                    print(f"P={P} {algo} {name} {spec}", file=sys.stderr, flush=True)
                    argv = run_argv(
                        algo, shape, repeat=args.repeat, profile=str(profile_path), as_json=True
                    )
                    r = launch(P, [*argv, "--layouts", spec])
                    if r is not None:
                        rows.append(row(r, algo, name, spec, profile, timed))
    table = pd.DataFrame(rows)
    save_csv_atomic(args.out, table)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.round(3).to_string(index=False))
    if table.empty:
        sys.exit("no run succeeded")
    errors = (table["pred/meas"] - 1).abs().dropna()
    print(
        f"\n{len(table)} runs: verified {int(table['verified'].sum())}/{len(table)}; "
        f"bytes equal to the model on every rank {int(table['bytes_equal'].sum())}/{len(table)}"
    )
    redistribution_summary(table)
    by_p = table.assign(
        redistribution=errors,
        end_to_end=(table["e2e_pred/meas"] - 1).abs(),
    ).groupby("P")[["redistribution", "end_to_end"]]
    print("median |predicted / measured - 1| by P (%):")
    print((100 * by_p.median()).round(1).T.to_string())
    print(
        f"throughput against the model's price of an all-to-all of the same volume: median "
        f"{table['throughput'].median():.2f}, min {table['throughput'].min():.2f}, "
        f">= 0.8 in {int((table['throughput'] >= 0.8).sum())}/{len(table)}"
    )
    if table["vs_a2a"].notna().any():
        print(
            f"at P = {timed[0]}, against the all-to-all calibrate timed there: median "
            f"{table['vs_a2a'].median():.2f}, min {table['vs_a2a'].min():.2f}"
        )
    print("end to end / kernel, median per algorithm and input:")
    print(table.pivot_table(index="algo", columns="input", values="e2e/kernel").round(2))
    print(relabel_case(max(int(x) for x in args.ranks.split(",") if int(x) > 1)))


if __name__ == "__main__":
    main()
