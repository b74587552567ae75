"""The model against runs measured before: stored planner runs (scripts/replan.py), model sweeps
(scripts/model_accuracy.py --replay) and end-to-end moves (scripts/end_to_end.py --replay) of
the 16-core machines and the 2-core VMs in results/, priced again with the code as it is."""

import json
from pathlib import Path

import pandas as pd
from launch import distmm, script

ROOT = Path(__file__).resolve().parent.parent
DEVICE = ROOT / "results" / "device-h200-16c"


def _replan(profile: str, device=DEVICE, records=("plan_block.jsonl",)) -> str:
    args = ["--records", *(str(device / f) for f in records), "--profile", str(device / profile)]
    r = script("replan.py", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _median_error(text: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.startswith("runs "))
    return float(line.split("median |pred/meas - 1| ")[1].split("%")[0])


def _hits(text: str) -> tuple[int, int]:
    """(first choice the fastest, within 10% of it): the cases line of scripts/replan.py."""
    line = next(ln for ln in text.splitlines() if ln.startswith("cases "))
    fastest = int(line.split("the fastest in ")[1].split()[0])
    return fastest, int(line.split("within 10% in ")[1].split()[0])


def _sweeps_score(profile: str, *sweeps: tuple[str, int, int, float]) -> None:
    """Each planner sweep of results/vm-2c-zen3 (records, least fastest, least within 10%,
    most median error in percent) replayed under ``profile`` scores at least so, over 96 runs."""
    vm = ROOT / "results" / "vm-2c-zen3"
    for records, least, near, error in sweeps:
        out = _replan(profile, vm, (records,))
        fastest, within = _hits(out)
        assert fastest >= least and within >= near, (records, out)
        assert "runs 96:" in out and _median_error(out) < error, out


def _replay(vm: Path, table: str, profile: str, runs: int | None = None) -> tuple[str, float]:
    """scripts/model_accuracy.py --replay of a stored table under a profile: its output and the
    median |pred/meas - 1| it prints (over ``runs`` runs, where given)."""
    r = script("model_accuracy.py", "--replay", str(vm / table), "--profile", str(vm / profile))
    assert r.returncode == 0, r.stderr
    head = "runs: " if runs is None else f"runs: {runs};"
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(head))
    return r.stdout, float(line.split("= ")[1])


def _replay_moves(vm: Path, table: str, profile: str) -> tuple[str, float]:
    """scripts/end_to_end.py --replay of a stored table under a profile: its output and the
    median |pred/meas - 1| of the redistributions it prints, in percent."""
    r = script("end_to_end.py", "--replay", str(vm / table), "--profile", str(vm / profile))
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("redistribution pred"))
    return r.stdout, float(line.split("|ratio - 1| ")[1].split("%")[0])


def test_the_model_holds_on_the_16_core_machines_runs():
    """With GEMMs priced as every rank computing at once (gemm_shared) and the moves' loads
    as the model takes them, the 66 runs are predicted a median 12.1% off (38.7% at P = 16
    and 8 when they ran: kernels a third short, moves below the cores up to five times). The
    runs themselves repeat so: one round alone picks the fastest of the other two in 44 of 66
    trials, within 10% of it in 54 (bench.stats.round_agreement), what a planner scores read
    against."""
    out = _replan("profile_busy.json")
    assert "cases 22:" in out and _median_error(out) < 15.0
    assert "other rounds in 44 of 66 (67%), within 10% in 54 (82%)" in out


def test_the_model_holds_on_the_second_loans_runs():
    """A calibration at 16 ranks with speed probes and the planner from block at 4, 8 and 16
    ranks: 81 runs of 23 cases a median 8.1% off (8.9% before pieces were priced); runs of
    candidates the planner now leaves to their 2-D twin (summa25d 2x2x1, cannon25d 4x4x1)
    priced as themselves, none dropped. The moves in and out priced a median 1.34x and 1.28x
    what they took (1.40x and 1.39x before pieces: calibrate's moves from block-cyclic:64 had
    pulled the cost per byte up)."""
    records = ("plan_block_16_8.jsonl", "plan_block_8_4.jsonl")
    out = _replan("profile.json", ROOT / "results" / "device-h200-16c-2", records)
    assert "cases 23:" in out and "runs 81:" in out and _median_error(out) < 10.0
    line = next(ln for ln in out.splitlines() if ln.startswith("moves, median pred/meas: "))
    moves = dict(part.split()[:2] for part in line.split(": ")[1].split(", "))
    assert float(moves["in"]) < 1.37 and float(moves["out"]) < 1.33


def test_the_model_holds_on_the_2_core_vms_runs_at_2_to_16_ranks():
    """Issue 13's target on stored runs (results/vm-2c, scripts/model_accuracy.py --replay):
    every algorithm at P = 2-16 on three shapes, 99 runs of two sweeps with their own
    calibrations (`-n 2 --up-to 16`), predicted a median 5.0% and 6.3% off, none over 30%."""
    vm = ROOT / "results" / "vm-2c"
    for table, profile, most in (
        ("model_accuracy_up16.csv", "profile_up16.json", 0.06),
        ("model_accuracy_plan4.csv", "profile_plan4.json", 0.07),
    ):
        out, median = _replay(vm, table, profile, runs=99)
        assert median <= most
        assert "over 30%: 0 runs" in out


def test_the_moves_hold_on_the_2_core_vms_end_to_end_runs():
    """Issue 12's redistribution target on stored runs (results/vm-2c-xeon, scripts/end_to_end.py
    --replay): every algorithm from block-cyclic:64 and cols at P = 4, 8, 9, 16 (96 runs, 2
    to 8 ranks a core) priced with the calibration made just before them. Runs 7: 18.3% off
    (24.1% before each count above the cores was priced at its own level, fits.sharing_levels,
    chosen on these); runs 8, measured after: 11.4% (21.1% with the one fit alone)."""
    vm = ROOT / "results" / "vm-2c-xeon"
    for n, most in ((7, 20.0), (8, 15.0)):
        out, median = _replay_moves(vm, f"end_to_end_{n}.csv", f"profile_{n}.json")
        assert "96 runs of" in out
        assert median < most, n


def test_runs_on_an_emulated_cluster_are_replayed_on_it():
    """scripts/model_accuracy.py --replay prices each run on the machine its table names: 36
    runs on emulated 4 x 2 and 8 x 2 clusters over 1 GbE (results/vm-2c-amx/model_emu.csv,
    communication 66% of the time) come out a median 8.8% off as they ran (7.7% before stop
    60's walk let messages posted together move at once, which priced the worst runs of the
    other VMs' tables better and this one's 0.81-0.98 where they were 0.90-1.09; 8.6% before
    stop 76's busy factor took the GEMM rates' pace median-filtered), where priced on one node
    (the table's topology left out) they were 64% off."""
    vm = ROOT / "results" / "vm-2c-amx"
    _, median = _replay(vm, "model_emu.csv", "profile.json", runs=36)
    assert median <= 0.089


def test_the_moves_hold_when_calibrate_times_them_beyond_the_caches():
    """Issue 12's redistribution target on the runs of a 2-core VM with 480 MiB of cache
    (results/vm-2c-amx): calibrations that time every layout change at 16 MiB per rank and out
    of the caches at every count price two sets of 96 end-to-end runs 15.3-17.3% off (the
    stored profile, which left both out above the cores, 44-48%)."""
    vm = ROOT / "results" / "vm-2c-amx"
    for runs in ("end_to_end_s57a.csv", "end_to_end_s57b.csv"):
        for profile in ("profile_s57.json", "profile_s57_2.json"):
            assert _replay_moves(vm, runs, profile)[1] < 20.0, (runs, profile)


def test_the_moves_hold_on_an_amd_vm_too():
    """The same on another kind of 2-core VM (AMD EPYC, 32 MiB of L3; results/vm-2c): 96
    end-to-end runs priced 18.0% off by the calibration made before them (profile_s58.json),
    20.5-20.7% by two made after them, 53.9% by the stored profile from before calibrate timed
    its layout changes out of the caches."""
    vm = ROOT / "results" / "vm-2c"
    assert _replay_moves(vm, "end_to_end_s58a.csv", "profile_s58.json")[1] < 20.0


def test_the_model_holds_on_an_amd_vm_with_warm_repetitions():
    """Issue 13's targets on the AMD 2-core VM (results/vm-2c, stop 59): with repetitions that
    reuse their memory (bench.machine.keep_freed) and a calibration made so, 99 runs at P =
    2-16 a median 7.2% off (7.0% before stop 76's busy factor took the GEMM rates' pace
    median-filtered: this profile's 1024^3 is a little slower than its neighbours), only
    summa 3x4 at 12 ranks over 30%; 36 runs on an emulated
    cluster of 4 x 2 and 8 x 2 ranks on 1 GbE (communication 56% of the time) 7.1% off (6.2%
    before stop 60's walk let messages posted together move at once: Cannon 4x4 at 16 ranks
    on the tall-skinny shape 1.19 -> 0.93, t10 2x2x4 1.12 -> 0.94, summa25d 2x2x2 0.89 ->
    0.83), only the summa3d run that was memory over 30%."""
    vm = ROOT / "results" / "vm-2c"
    for table, profile, most, over in (
        ("model_accuracy_s59c.csv", "profile_s59b.json", 0.073, 2),
        ("model_emu_s59.csv", "profile_s59.json", 0.072, 1),
    ):
        out, median = _replay(vm, table, profile)
        assert median <= most
        assert f"over 30%: {over} runs" in out


def test_the_model_holds_on_the_amx_vm_with_holds_on_time():
    """Issue 13's first two targets on results/vm-2c-amx at stop 61, one `mpiexec -n 2 distmm
    calibrate --up-to 16` profile made while the VM's speed varied 2.0x: 99 runs at P = 2-16
    7.9% off, none over 30%; 36 runs on an emulated cluster of 4 x 2 and 8 x 2 ranks on 1 GbE
    (communication 63% of the time), with holds ending at their deadline (algorithms/levels.py),
    6.8% off, none over 30% (8.4% with holds that slept to it)."""
    vm = ROOT / "results" / "vm-2c-amx"
    for table, most in (("model_accuracy_s61.csv", 0.079), ("model_emu_s61b.csv", 0.068)):
        out, median = _replay(vm, table, "profile_s61.json")
        assert median <= most
        assert "over 30%: 0 runs" in out


def test_the_model_holds_on_an_avx2_amd_vm():
    """Issue 13's first two targets on a third kind of 2-core VM (AMD EPYC without AVX-512;
    results/vm-2c-zen3, stop 60), one `mpiexec -n 2 distmm calibrate --up-to 16` profile: 99
    runs at P = 2-16 a median 6.6% off, none over 30%; 36 runs on an emulated cluster of 4 x 2
    and 8 x 2 ranks on 1 GbE (communication 44% of the time) 5.2% off, none over 30% (6.5%
    with one, Cannon 4x4 at 1.36, before the walk let messages posted together move at once)."""
    vm = ROOT / "results" / "vm-2c-zen3"
    for table, most in (("model_accuracy.csv", 0.066), ("model_emu.csv", 0.052)):
        out, median = _replay(vm, table, "profile.json")
        assert median <= most
        assert "over 30%: 0 runs" in out


def test_the_model_holds_on_a_zen4_vm_whose_table_had_one_lucky_shape():
    """Issue 13's first target on a sixth kind of 2-core VM (results/vm-2c-zen4: Zen 4,
    AVX-512), whose GEMM table put 1024^3, the shape calibrate also times with every rank
    working, at 116 GFLOP/s and its neighbours at 93-106: compared with that one shape, the
    busy factor priced every GEMM 1.22 times long and 99 runs at P = 2-16 a median 20.9% off,
    17 over 30%; with its pace median-filtered over its neighbours (stop 76), 8.2%, 2 over 30%.
    The same runs with a second calibration, whose 1024^3 was not so lucky: 5.0%."""
    vm = ROOT / "results" / "vm-2c-zen4"
    out, median = _replay(vm, "model_accuracy.csv", "profile.json")
    assert median <= 0.085 and "over 30%: 2 runs" in out
    _, median = _replay(vm, "model_accuracy.csv", "profile_2.json")
    assert median <= 0.052


def test_the_model_and_the_moves_hold_on_an_ice_lake_vm():
    """Issues 13 and 12 on a fifth kind of 2-core VM (results/vm-2c-icx: Ice Lake, AVX-512, no
    AMX), with calibrate's GEMM tables timed again just before the runs (`distmm calibrate
    --refresh-gemm`): 36 runs on emulated 4 x 2 and 8 x 2 clusters over 1 GbE (communication
    57% of the time) a median 2.8% off, none over 30%; the redistributions of 96 end-to-end
    runs from block-cyclic:64 and cols at P = 4-16 a median 18.6% off."""
    vm = ROOT / "results" / "vm-2c-icx"
    out, median = _replay(vm, "model_emu.csv", "profile_refreshed.json", runs=36)
    assert median <= 0.035 and "over 30%: 0 runs" in out
    assert _replay_moves(vm, "end_to_end.csv", "profile_refreshed.json")[1] < 20.0


def test_the_emulated_planner_holds_on_the_avx2_amd_vm_at_stop_67():
    """Issue 13's emulated planner on results/vm-2c-zen3 at stop 67 (32 cases at 4-16 ranks,
    clusters of 2 a node on 1 GbE, from block layouts), priced again with the code as it is:
    the first choice measured fastest in 21 cases when run and within 10% in 30 (the runs' own
    repeatability 72% / 96%), the 96 runs a median 4.3% off, one over 30%. Since the profile's
    layout changes at 8 ranks, timed in a slow spell, are priced at their neighbours' level
    (bench.model.fits.steady_levels), 20: summa 2x4 against summa3d 2x2x2 on 512x512x8192,
    5.3% apart when measured, now ordered the other way."""
    vm = ROOT / "results" / "vm-2c-zen3"
    out = _replan("profile_s67.json", vm, ("plan_emu_s67.jsonl",))
    assert "cases 32: " in out
    fastest, within = _hits(out)
    assert fastest >= 20 and within >= 30
    assert "runs 96:" in out and _median_error(out) < 5.0


def test_a_slow_spell_in_calibrate_is_not_priced_at_its_count():
    """results/vm-2c-zen3/profile_s67.json timed its layout changes at 8 ranks in a slow spell
    (3.52x the fit, against 1.55 and 1.38 at 6 and 10), and priced every move of the planner
    sweep from block layouts at 8 ranks 2-3x what it took: its 96 runs 21.0% off, 23 over 30%.
    Priced at the neighbours' level (bench.model.fits.steady_levels): 17.7%, 7 over 30%, the
    first choice as often the fastest (25 of 32) and within 10% in 31."""
    vm = ROOT / "results" / "vm-2c-zen3"
    out = _replan("profile_s67.json", vm, ("plan_block_s67.jsonl",))
    runs = next(ln for ln in out.splitlines() if ln.startswith("runs 96: "))
    assert _median_error(out) < 19.0 and int(runs.split("%, ")[1].split()[0]) <= 10, runs
    assert "cases 32: " in out and _hits(out)[1] >= 31, out


def test_the_moves_hold_on_the_avx2_amd_vm_with_only_the_padding_zeroed():
    """Stop 69: a move into a block used before zeroed the whole block wherever the block has
    padding (at 9 ranks, the 3 x 3 grid's last row and column of 8192 x 1024 and 1024 x 512),
    a pass the model never priced, and the other ranks waited for it: the end-to-end runs at
    9 ranks took 1.4x their price (end_to_end_s69_9_before.csv, 29.8% off). Zeroing the
    padding alone (layouts.transfer.Transfer.padding), the 96 runs of end_to_end_s69.csv at
    4-16 ranks are 13.2% off under stop 68's calibration, those at 9 ranks 0.86x."""
    vm = ROOT / "results" / "vm-2c-zen3"
    out, error = _replay_moves(vm, "end_to_end_s69.csv", "profile_s68.json")
    assert error < 15.0, out
    assert _replay_moves(vm, "end_to_end_s69_9_after.csv", "profile_s68.json")[1] < 20.0


def test_the_planner_from_block_on_the_avx2_amd_vm_at_stop_69():
    """Issue 12's planner sweep of stop 69 (32 cases at 4-16 ranks from block layouts, 5
    rounds, a fresh calibration): the first choice measured fastest in 23 and within 10% in
    30, the 96 runs a median 7.9% off, none over 30%. With each (algorithm, P)'s median
    pred/meas divided out of the prices, fitted to these very runs (--debiased), 24 and 31:
    the model's remaining bias per algorithm is worth one case here."""
    vm = ROOT / "results" / "vm-2c-zen3"
    r = script(
        "replan.py",
        "--records",
        str(vm / "plan_block_s69.jsonl"),
        "--profile",
        str(vm / "profile_s69.json"),
        "--debiased",
    )
    assert r.returncode == 0, r.stderr
    fastest, within = _hits(r.stdout)
    assert fastest >= 22 and within >= 29, r.stdout
    assert "runs 96:" in r.stdout and _median_error(r.stdout) < 9.0
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("with each"))
    assert int(line.split("fastest in ")[1].split()[0]) >= fastest, line


def test_the_same_plans_measured_twice_on_the_avx2_amd_vm():
    """Stop 69's two planner sweeps run again hours later with the same profile and code
    (results/vm-2c-zen3, plan_*_s70): the same plans, but 6 of the emulated cluster's 32
    verdicts and 3 of the mesh's changed with the measurement alone (25 -> 23 and 23 -> 24
    fastest, 31 within 10% in both). The model as the code has it still scores them so."""
    _sweeps_score(
        "profile_s69.json",
        ("plan_emu_s70.jsonl", 22, 30, 9.0),
        ("plan_block_s70.jsonl", 23, 30, 9.0),
    )


def test_the_sweeps_of_a_quiet_spell_on_the_avx2_amd_vm():
    """Stop 71's planner sweeps with a calibration made that session (results/vm-2c-zen3,
    plan_*_s71, profile_s71.json): on the emulated cluster 25 of 32 fastest and 29 within 10%,
    its runs 3.3% off; from block on the mesh 22 and 27, 8.2% off, where the runs' own
    repeatability was 72% / 86% (moves in two modes: scripts/move_modes.py). The model as the
    code has it still scores them so."""
    _sweeps_score(
        "profile_s71.json",
        ("plan_emu_s71.jsonl", 24, 28, 5.0),
        ("plan_block_s71.jsonl", 21, 26, 9.0),
    )


def test_the_sweeps_with_fences_that_sleep_on_the_avx2_amd_vm():
    """Stop 72's planner sweeps, a direct move's fences asleep where ranks outnumber cores
    (results/vm-2c-zen3, plan_*_s72, profile_s72.json): on the emulated cluster 26 of 32
    fastest and 31 within 10%, its runs 4.0% off; from block on the mesh 22 and 29, 6.6% off,
    the runs' own repeatability 73% / 95%. The model as the code has it still scores them so."""
    _sweeps_score(
        "profile_s72.json",
        ("plan_emu_s72.jsonl", 25, 30, 5.0),
        ("plan_block_s72.jsonl", 21, 28, 7.5),
    )


def test_the_model_holds_on_the_avx2_amd_vm_again_eleven_stops_later():
    """Issue 13's first two targets on results/vm-2c-zen3 with stop 71's main and a calibration
    of its own (profile_s71.json): 99 runs at P = 2-16 a median 6.6% off, 2 over 30% (summa 3x4
    at 12 ranks, 1.53 and 1.31); 36 runs on the emulated clusters 3.5% off, none over 30%."""
    vm = ROOT / "results" / "vm-2c-zen3"
    out, median = _replay(vm, "model_accuracy_s71.csv", "profile_s71.json")
    assert median <= 0.067 and "over 30%: 2 runs" in out
    out, median = _replay(vm, "model_emu_s71.csv", "profile_s71.json", runs=36)
    assert median <= 0.036 and "over 30%: 0 runs" in out


def test_the_model_meets_issue_13s_first_targets_with_a_calibration_of_the_day():
    """Issue 13's first two targets on results/vm-2c-zen3 at stop 89, with a calibration made
    that session (`mpiexec -n 2 distmm calibrate --up-to 16`, profile_s89.json): 141 runs at
    P = 2-16 (every algorithm, three shapes) a median 6.5% off, none over 30% (the worst summa
    2x3 at 6 ranks, 1.27); 48 runs on the emulated clusters (4 x 2 and 8 x 2 ranks, 1 GbE)
    4.2% off, none over 30%."""
    vm = ROOT / "results" / "vm-2c-zen3"
    out, median = _replay(vm, "model_accuracy_s89.csv", "profile_s89.json", runs=141)
    assert median <= 0.065 and "over 30%: 0 runs" in out
    out, median = _replay(vm, "model_emu_s89.csv", "profile_s89.json", runs=48)
    assert median <= 0.042 and "over 30%: 0 runs" in out


def test_a_replay_sets_each_runs_gemms_beside_its_compute_only_loop(tmp_path):
    """scripts/model_accuracy.py's `compute pred/meas`: the GEMM phase `distmm predict` prices
    against the GEMM-only loop the run timed in its job (measured x (1 - comm share)), and the
    summary's lines on it. Two of stop 85's runs (results/vm-2c-zen3), one below the cores and
    one above them."""
    vm = ROOT / "results" / "vm-2c-zen3"
    profile = str(vm / "profile_s84_adding.json")
    table = pd.read_csv(vm / "model_accuracy_s85.csv", keep_default_na=False)
    runs = table[
        ((table["algo"] == "summa") & (table["P"] == 4) & (table["shape"] == "K-large"))
        | ((table["algo"] == "t10") & (table["P"] == 16) & (table["shape"] == "tall-skinny"))
    ]
    assert len(runs) == 2
    runs.to_csv(tmp_path / "two.csv", index=False)
    r = script("model_accuracy.py", "--replay", str(tmp_path / "two.csv"), "--profile", profile)
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0].split("  ")
    assert "compute pred/meas" in [h.strip() for h in header]
    shapes = {"K-large": "768,8192,768", "tall-skinny": "8192,1024,512"}
    flags = {"summa": "--grid", "t10": "--fop"}
    for _, run in runs.iterrows():
        grid = run["grid"].replace("x", ",")
        shape = shapes[run["shape"]]
        argv = ["predict", run["algo"], flags[run["algo"]], grid, "--shape", shape]
        p = distmm(*argv, "--P", str(run["P"]), "--profile", profile, "--json")
        assert p.returncode == 0, p.stderr
        gemm = json.loads(p.stdout)["predicted_phases"]["gemm"]
        expected = gemm / (run["measured_s"] * (1 - run["comm share"]))
        key = [run["algo"], str(run["P"]), run["shape"]]
        line = next(ln for ln in r.stdout.splitlines() if ln.split()[:3] == key)
        assert f"{expected:.3f}" in line.split(), (line, expected)
    assert "compute alone (the GEMM-only loop each run timed in its job" in r.stdout
    assert "the runs' pred/meas over their compute's" in r.stdout


def test_a_case_measured_in_several_sweeps_is_judged_on_their_medians():
    """scripts/replan.py given several sweeps of a case: each candidate its median over the
    sweeps' medians, those measured in fewer than half of the sweeps left out (before, each
    candidate kept the last file's timing: the first sweeps were silently dropped)."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from replan import _pooled

    def run(name: str, sweep: int, *seconds: float) -> dict:
        return {"candidate": name, "sweep": sweep, "runs": [{"seconds": s} for s in seconds]}

    one = _pooled([run("a", 0, 3.0, 1.0, 2.0), run("b", 0, 4.0)])
    assert one == {"a": [3.0, 1.0, 2.0], "b": [4.0]}
    slow_once = [run("a", i, t, t) for i, t in enumerate((1.0, 9.0, 1.2))]
    slow_once += [run("b", i, 1.1) for i in range(3)] + [run("c", 2, 0.5)]
    assert _pooled(slow_once) == {"a": [1.0, 9.0, 1.2], "b": [1.1, 1.1, 1.1]}


def test_the_planner_judged_on_the_avx2_amd_vms_sweeps_together():
    """The planner's sweeps on the Zen 3 VM, each case's candidates judged by their medians over
    the sweeps (scripts/replan.py). Ten from block layouts on one node (stops 60-86), with stop
    84's calibration: the first choice the fastest in 28 of 32 cases (88%), within 10% in 31; one
    sweep alone picks the others' fastest in 94% of trials (a sweep's rounds alone: 70-86%).
    All fourteen on an emulated cluster (1 GbE, 2 ranks a node; stops 67-90): 27 (84%) and 32
    (100%) under stop 84's calibration and stop 90's alike, one sweep picking the others' fastest
    in 91% (replan_pooled_s90.txt). Issue 12's and 13's targets are 80% and 95%."""
    vm = ROOT / "results" / "vm-2c-zen3"
    stops = (67, 68, 69, 70, 71, 72, 73, 84, 86)
    records = ["plan_block.jsonl", *(f"plan_block_s{s}.jsonl" for s in stops)]
    out = _replan("profile_s84_adding.json", vm, records)
    assert "cases 32: " in out and "the rounds below are sweeps" in out
    fastest, within = _hits(out)
    assert fastest >= 28 and within >= 31, out.splitlines()[-4:]
    emulated = [f"plan_emu_s{s}.jsonl" for s in (*stops, 87, 88, 89, "89b", 90)]
    for profile in ("profile_s84_adding.json", "profile_s90.json"):
        fastest, within = _hits(_replan(profile, vm, emulated))
        assert fastest >= 27 and within >= 32, profile


def test_model_sweeps_replayed_together_are_judged_on_their_medians():
    """scripts/model_accuracy.py --replay of several tables: each run by its median over the
    sweeps that measured it (a table pooled with itself reads as the table alone). The Zen 3
    VM's five model sweeps (stops 71-86, every algorithm at P = 2-16 on three shapes) under stop
    71's calibration: 141 runs a median 6.1% off, one over 30% (summa 3x4 on the tall-skinny
    shape at 12 ranks, 1.31); their GEMM-only loops a median 9.5% from the GEMM phase."""
    vm = ROOT / "results" / "vm-2c-zen3"
    profile = str(vm / "profile_s71.json")
    twice = [str(vm / "model_accuracy_s84.csv")] * 2
    alone, _ = _replay(vm, "model_accuracy_s84.csv", "profile_s84_adding.json", runs=141)
    r = script(
        "model_accuracy.py", "--replay", *twice, "--profile", str(vm / "profile_s84_adding.json")
    )
    assert r.returncode == 0, r.stderr
    summary = [ln for ln in alone.splitlines() if ln.startswith(("runs: ", "over 30%"))]
    assert summary == [ln for ln in r.stdout.splitlines() if ln.startswith(("runs: ", "over 30%"))]
    tables = [str(vm / f"model_accuracy_s{s}.csv") for s in (71, 72, 84, 85, 86)]
    r = script("model_accuracy.py", "--replay", *tables, "--profile", profile)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("runs: 141;"))
    assert float(line.split("= ")[1]) < 0.07
    over = next(ln for ln in r.stdout.splitlines() if ln.startswith("over 30%: "))
    assert int(over.split()[2]) <= 1 and "5 sweeps: " in r.stdout


def test_a_replays_misses_are_explained_phase_by_phase():
    """scripts/replan.py --misses: under each case whose first choice is not the fastest, both
    candidates' phases priced now and measured, and their kernels' price by kind beside the
    GEMM-only loop the runs timed (stop 92's sweep from block, its own profile: the miss at 16
    ranks on 1024^3 is tesseract 1x1x16's kernel priced below what it took, Cannon 4x4's
    above, its shifts priced dear)."""
    vm = ROOT / "results" / "vm-2c-zen3"
    args = ["--records", str(vm / "plan_block_s92.jsonl"), "--profile"]
    r = script("replan.py", *args, str(vm / "profile_s92.json"), "--misses")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    cases = [i for i, ln in enumerate(lines) if ln.startswith("P=")]
    misses = [i for i in cases if not lines[i].endswith(" 1.000")]
    assert misses and len(misses) < len(cases)
    for i in misses:
        first, fastest = lines[i][22:56].strip(), lines[i][56:90].strip()
        below = lines[i + 1 : i + 5]
        for line, name in zip(below[::2], (first, fastest), strict=True):
            assert line.startswith(f"    {name} "), (lines[i], line)
            priced, measured = (side.split(" / ") for side in line[38:].split(" | "))
            assert len(priced) == len(measured) == 3  # in, kernel, out
            assert all(float(x) >= 0 for x in (*priced, *measured))
        for line in below[1::2]:
            parts = line.split("kernel priced: ")[1]
            assert "gemm " in parts and "; GEMM-only loop " in parts, line
    for i in (i for i in cases if i not in misses):
        assert i + 1 == len(lines) or not lines[i + 1].startswith("    ")
    cannon = lines[lines.index(next(ln for ln in lines if ln.startswith("P=16 1024x1024x1024"))) :]
    assert any(ln.strip().startswith("kernel priced: shift") for ln in cannon[:5]), cannon[:5]
