"""scripts/overlap_panels.py: SUMMA with and without overlap at several panel widths."""

import json

from launch import SCRIPTS, script


def test_overlap_panels_runs_each_width_both_ways(profile_file, tmp_path):
    records = tmp_path / "runs.jsonl"
    done = script(
        "overlap_panels.py",
        *("--profile", str(profile_file), "--shape", "256,128,64", "--ranks", "2,4"),
        *("--panels", "1,2", "--rounds", "1", "--repeat", "1", "--records", str(records)),
        *("--timeout", "120"),
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [ln.split() for ln in done.stdout.splitlines()[2:] if not ln.startswith("overlap ")]
    # 1 x 2 and 2 x 2 grids: lcm 2 panels of 64 columns, then 4 of 32, each on and off
    assert [r[:4] for r in rows] == [
        [P, grid, width, overlap]
        for P, grid in (("2", "1x2"), ("4", "2x2"))
        for width in ("64", "32")
        for overlap in ("on", "off")
    ]
    runs = [json.loads(ln) for ln in records.read_text().splitlines()]
    assert len(runs) == 8 and all(r["verified"] for r in runs)
    assert [r["params"]["panel"] for r in runs[:4]] == [64, 64, 32, 32]
    assert [r["overlap"] for r in runs[:2]] == [True, False]
    for r in rows:
        measured, predicted, ratio = map(float, r[4:7])
        assert measured > 0 and predicted > 0
        assert abs(ratio - predicted / measured) < 0.01 * ratio + 0.01  # rounded as printed


def test_overlap_panels_names_a_missing_profile(tmp_path):
    done = script("overlap_panels.py", "--profile", str(tmp_path / "none.json"))
    assert done.returncode != 0
    assert "profile" in done.stderr and "does not exist" in done.stderr


def test_overlap_panels_replays_the_stored_ice_lake_runs():
    """results/vm-2c-icx/summa_panels.jsonl (stop 64): SUMMA on 8192x1024x512 at P = 4-16,
    three panel widths each, on and off, priced again. Without overlap the model holds (a
    median 12.9% off); with it the runs took 1.26-1.81 times less above the cores (P >= 6)
    while the walk prices both the same there (overlap on: a median 1.38 times measured)."""
    vm = SCRIPTS.parent / "results" / "vm-2c-icx"
    done = script(
        "overlap_panels.py",
        *(
            "--replay",
            str(vm / "summa_panels.jsonl"),
            "--profile",
            str(vm / "profile_refreshed2.json"),
        ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = {ln.split(":")[0]: ln for ln in done.stdout.splitlines() if ln.startswith("overlap ")}
    assert set(summary) == {"overlap on", "overlap off"}
    assert all("15 cases" in ln for ln in summary.values())
    assert float(summary["overlap off"].split("|pred/meas - 1| ")[1].rstrip("%")) < 15.0
