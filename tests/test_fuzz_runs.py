"""scripts/fuzz_runs.py: its random runs are ones a user could ask for, and it judges them right."""

import json
import random
import sys
from pathlib import Path

import pytest
from launch import script

from layouts.endpoints import user_layouts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from fuzz_runs import draw, moved, verdict


def test_every_drawn_layout_is_one_the_run_accepts():
    rng = random.Random(0)
    specs = set()
    for _ in range(300):
        P, argv = draw(rng, [1, 2, 3, 4, 6, 8, 9, 12, 16])
        shape = tuple(int(x) for x in argv[argv.index("--shape") + 1].split(","))
        given = {
            name.upper(): argv[i + 1]
            for i, flag in enumerate(argv)
            for name in "abc"
            if flag == f"--layout-{name}"
        }
        specs |= {s.split("@")[0].split("/")[-1][:2] for s in given.values()}
        user_layouts(given, shape, P)  # a LayoutError or MeshError fails the test
    # every kind drawn: names, block-cyclic, SBP, TensorLayouts (blocks and cyclic)
    assert {"ro", "co", "bl", "[r", "(("} <= specs


def test_a_run_is_good_only_verified_and_refused_only_in_one_line():
    ok = json.dumps({"verified": True})
    assert verdict("done", 0, f"table\n{ok}\n", "") == "good"
    assert verdict("done", 0, json.dumps({"verified": False}), "") == "bad: product not verified"
    assert verdict("done", 0, "no record", "") == "bad: exit 0"
    assert verdict("done", 2, "", "distmm run: error: x\n" * 4) == "refused"  # one line a rank
    assert verdict("done", 2, "", "error: x\nTraceback (most recent call last):\n") != "refused"
    assert verdict("done", 1, "", "boom") == "bad: exit 1"
    assert verdict("timeout", None, "", "") == "bad: timeout"


def test_a_run_moving_other_bytes_than_the_models_is_bad():
    argv = ["run", "summa", "--shape", "8,6,4", "--grid", "2,2", "--layout-a", "cols"]
    want = moved(argv)  # A's 2, 2, 2 and 0 (padding) columns into SUMMA's 2 x 2 blocks
    assert want["redistribute_in"] == [32, 48, 32, 0] and not any(want["redistribute_out"])
    # in the kernel each rank broadcasts its 4 x 3 block of A and its 3 x 2 block of B to the
    # one other rank of its row and column, whatever the panel width
    assert want["multiply"] == [72] * 4 == moved([*argv, "--panel", "1"])["multiply"]
    phases = {p: {"bytes_sent_per_rank": v} for p, v in want.items()}
    record = {"verified": True, "phases": phases}
    assert verdict("done", 0, json.dumps(record), "", argv) == "good"
    phases["multiply"]["bytes_sent_per_rank"] = [72, 72, 72, 76]
    assert verdict("done", 0, json.dumps(record), "", argv).startswith("bad: the kernel")
    phases["multiply"]["bytes_sent_per_rank"] = [72] * 4
    phases["redistribute_in"]["bytes_sent_per_rank"] = [32, 48, 32, 4]
    assert verdict("done", 0, json.dumps(record), "", argv).startswith("bad: bytes")


def test_parameters_drawn_are_ones_the_algorithms_take():
    """Panel widths from 1 to K and T10 paces among the F_op's (the plan refuses others)."""
    from algorithms import get

    rng, drawn = random.Random(1), set()
    for _ in range(300):
        P, argv = draw(rng, [1, 2, 4, 6, 8, 12, 16])
        algo, flags = argv[1], {f for f in argv if f in ("--panel", "--pace")}
        drawn |= flags
        shape = tuple(int(x) for x in argv[argv.index("--shape") + 1].split(","))
        grid = tuple(int(x) for x in argv[5].split(","))  # after --grid or --fop
        options = {get(algo).options[0].name: grid}
        options |= {f[2:]: int(argv[argv.index(f) + 1]) for f in flags}
        get(algo).plan(shape, P, **options)  # a bad parameter raises
    assert drawn == {"--panel", "--pace"}


@pytest.mark.timeout(240)
def test_a_few_random_runs_come_out_right():
    r = script("fuzz_runs.py", "--runs", "4", "--seed", "3", "--ranks", "1,2,4", timeout=220)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["bad"] == 0 and counts["good"] + counts["refused"] == 4
