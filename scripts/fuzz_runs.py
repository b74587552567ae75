"""Random end-to-end runs, each checked: does every product come out right, whatever is asked?

    .venv/bin/python scripts/fuzz_runs.py [--runs 100] [--seed 1] [--ranks 1,2,3,4,5,6,8,9,12,16]
        [--timeout 180]

Each run draws a rank count, an algorithm admitting it, one of its grids (T10: an F_op), on some
a panel width (1 to K) or T10 pace, a shape (sizes from 1 up, most not dividing the grid),
overlap on or off, float32 or float64, and for each of A, B and C a layout: native, rows, cols,
block, block-cyclic:NB, an SBP text or a TensorLayout (1-D, 2-D or cyclic, padded as a PadLayout
where the sizes do not divide) on a mesh of its own; on some, a cluster topology (emulated links
or not) or the MN-Core tree at 16 ranks. It runs ``distmm run ... --verify exact --json`` under
the mpiexec beside the interpreter and counts the run good where the product was verified in the
user's layouts and every rank sent in each redistribution phase the bytes the model counts for
it (layouts.endpoints.move_counts, with the run's rank order: on a topology, relabelled from the
default binding) and in the multiplication the bytes of the symbolic schedule the model prices
(bench.model.schedule, the same loop over placeholder blocks); refused where every
rank said why in one line and exited 2 (a grid or layout the shape cannot take); bad otherwise
(a wrong product or byte count, a crash, a hang past --timeout, a refusal of several lines).
Prints each bad run's command, to run again by hand, and exits 1 if there was one.
"""

import argparse
import json
import random
import shlex
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from bench.endtoend import end_to_end  # noqa: E402
from bench.job_output import last_json, said_lines  # noqa: E402
from bench.launch import Launcher  # noqa: E402
from bench.model.schedule import bytes_per_rank  # noqa: E402
from topology.tree import default_binding, parse_topology  # noqa: E402

SIZES = (1, 2, 3, 5, 7, 16, 17, 31, 64, 97, 100, 128, 129, 200, 257)


def parameters(rng: random.Random, algo: str, shape, P: int, grid) -> list[str]:
    """Now and then an algorithm's own parameter: a panel width from 1 to K (cut to the widest
    the run takes), or one of the paces T10 admits for the F_op."""
    if rng.random() >= 0.4:
        return []
    options = {o.name: o for o in get(algo).options}
    if "panel" in options:
        return ["--panel", str(rng.randint(1, shape[1]))]
    if "pace" in options:
        plan = get(algo).plan(shape, P, fop=grid)
        return ["--pace", str(rng.choice(options["pace"].candidates(plan)))]
    return []


def factor_pairs(P: int) -> list[tuple[int, int]]:
    return [(a, P // a) for a in range(1, P + 1) if P % a == 0]


def matrix_layout(rng: random.Random, P: int, rows: int, cols: int) -> str:
    """A layout spec for a rows x cols matrix on P ranks, as a user could write it."""
    kind = rng.random()
    if kind < 0.35:
        return rng.choice(["native", "rows", "cols", "block"])
    if kind < 0.5:
        return f"block-cyclic:{rng.choice([1, 2, 3, 8, 13, 64])}"
    a, b = rng.choice(factor_pairs(P))
    if kind < 0.7:
        c = rng.choice(["S(0)", "S(1)", "B"])
        return f"[r={rng.choice(['S(0)', 'S(1)'])}, c={c}]@r={a},c={b}"
    ra, cb = -(-rows // a), -(-cols // b)
    pad = f"({rows},{cols})/" if (ra * a, cb * b) != (rows, cols) else ""
    if rng.random() < 0.5:  # blocks
        return f"{pad}(({a}_r, {ra}), ({b}_c, {cb}))@r={a},c={b}"
    return f"{pad}(({ra}, {a}_r), ({cb}, {b}_c))@r={a},c={b}"  # cyclic


def draw(rng: random.Random, ranks: list[int]) -> tuple[int, list[str]]:
    """(P, `distmm run` arguments) of one random run."""
    P = rng.choice(ranks)
    algo = rng.choice([a for a in ALGORITHMS if list(get(a).grids(P))])
    chosen = rng.choice(list(get(algo).grids(P)))
    M, K, N = (rng.choice(SIZES) for _ in range(3))
    argv = ["run", algo, "--shape", f"{M},{K},{N}", "--fop" if algo == "t10" else "--grid"]
    argv += [",".join(map(str, chosen)), *parameters(rng, algo, (M, K, N), P, chosen)]
    for name, (rows, cols) in zip("abc", ((M, K), (K, N), (M, N)), strict=True):
        spec = matrix_layout(rng, P, rows, cols)
        if spec != "native":
            argv += [f"--layout-{name}", spec]
    where = rng.random()
    if where < 0.2 and P >= 4 and P % 2 == 0:
        argv += ["--topology", f"cluster:{P // 2},2"]
        argv += ["--emulate-links", "100gbe"] if rng.random() < 0.5 else []
    elif where < 0.3 and P == 16:
        argv += ["--topology", "mncore:2,2,2,2"]
    argv += ["--no-overlap"] if rng.random() < 0.3 else []
    argv += ["--dtype", "float64"] if rng.random() < 0.3 else []
    argv += ["--no-relabel"] if rng.random() < 0.2 else []
    return P, [*argv, "--verify", "exact", "--repeat", "1", "--warmup", "0", "--json"]


def verdict(state: str, rc: int | None, out: str, err: str, argv=()) -> str:
    """good, refused or what was bad about one run (of ``argv``: its bytes checked)."""
    if state != "done":
        return f"bad: {state}"
    if rc == 2:
        said = set(said_lines(err))  # (the ranks' lines, not the launcher's notices)
        return "refused" if len(said) == 1 and "Traceback" not in err else "bad: refused unclearly"
    record = last_json(out)
    if rc != 0 or record is None:
        return f"bad: exit {rc}"
    if record.get("verified") is not True:
        return "bad: product not verified"
    if argv and record.get("phases"):
        want, got = moved(argv), sent(record)
        if want["multiply"] != got["multiply"]:
            return "bad: the kernel's bytes are not its schedule's"
        if want != got:
            return "bad: bytes moved are not the model's"
    return "good"


def moved(argv: list[str]) -> dict[str, list[int]]:
    """{phase: the bytes each job rank sends others}: in the redistributions by the model's
    counts, in the multiplication by its symbolic schedule (bench.model.schedule: the events
    the algorithm's loop issues over placeholder blocks), native mesh rank d on job rank
    ``ranks[d]``, the run's order."""
    algo, flag = argv[1], "--fop" if argv[1] == "t10" else "--grid"
    shape = tuple(int(x) for x in argv[argv.index("--shape") + 1].split(","))
    grid = tuple(int(x) for x in argv[argv.index(flag) + 1].split(","))
    module = get(algo)
    options = {module.options[0].name: grid, "overlap": "--no-overlap" not in argv}
    for name in ("panel", "pace"):
        if f"--{name}" in argv:
            options[name] = int(argv[argv.index(f"--{name}") + 1])
    plan = module.plan(shape, int(np.prod(grid)), **options)
    specs = {
        n.upper(): argv[i + 1] for i, a in enumerate(argv) for n in "abc" if a == f"--layout-{n}"
    }
    itemsize = 8 if "float64" in argv else 4
    tree = binding = None
    if "--topology" in argv:  # laid on the machine as the run lays it, relabelled from there
        tree = parse_topology(argv[argv.index("--topology") + 1])
        binding = default_binding(plan.mesh, tree)
    e2e = end_to_end(specs, plan, itemsize, "--no-relabel" not in argv, tree, binding)
    kernel = [0] * plan.P
    for d, sent_d in enumerate(bytes_per_rank(module, plan, f"float{8 * itemsize}")):
        kernel[e2e.ranks[d]] = sent_d
    return {**e2e.bytes_sent(itemsize), "multiply": kernel}


def sent(record: dict) -> dict[str, list[int]]:
    """{phase: the bytes each rank counted sending}, from a run's record."""
    return {p: ph["bytes_sent_per_rank"] for p, ph in record["phases"].items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ranks", default="1,2,3,4,5,6,8,9,12,16")
    p.add_argument("--timeout", type=float, default=180)
    args = p.parse_args()
    rng = random.Random(args.seed)
    ranks = [int(x) for x in args.ranks.split(",")]
    launcher = Launcher.find()
    counts = {"good": 0, "refused": 0, "bad": 0}
    for i in range(args.runs):
        P, argv = draw(rng, ranks)
        state, rc, out, err = launcher.run(P, argv, args.timeout, cwd=ROOT)
        said = verdict(state, rc, out, err, argv)
        counts[said.split(":")[0]] += 1
        line = f"{i + 1:4d} {said:<10} mpiexec -n {P} distmm {shlex.join(argv)}"
        if said == "refused":
            line += f"\n     {said_lines(err)[0]}"
        elif said.startswith("bad"):
            line += "\n     " + "\n     ".join(err.strip().splitlines()[-5:])
        print(line, flush=True)
    print(json.dumps({"seed": args.seed, **counts}))
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
