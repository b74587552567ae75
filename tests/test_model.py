"""The cost model without MPI: profiles, formulas, predictions at large P, and the commands."""

import json
import math
import time

import numpy as np
import pytest
from launch import distmm, distmm_mpi

from algorithms import ALGORITHMS, get
from algorithms.events import COMM_KINDS
from bench.calibration_overlap import POSTED
from bench.model import Profile, ProfileError, bytes_per_rank, predict, schedule, stated_cost
from bench.model.steps import Steps
from bench.trace import load_rank_events


def test_profile_errors(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        Profile.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="not readable JSON"):
        Profile.load(bad)
    bad.write_text(json.dumps({"p2p": {}}))
    with pytest.raises(ProfileError, match="lacks"):
        Profile.load(bad)
    # layout changes timed in rows another version's calibrate wrote: one line, not a traceback
    from conftest import PROFILE

    count = {"ranks": 2, "alltoallv": {"timed": [[1, 2e5, 4e5, 100, 7, 1e-4]]}}
    bad.write_text(json.dumps({**PROFILE, "counts": [count]}))
    with pytest.raises(ProfileError, match="at 2 ranks timed in rows of 4 or 5 numbers"):
        Profile.load(bad)


def test_a_profile_timed_on_an_unsteady_machine_says_so(profile_file):
    """calibrate samples the machine's speed through its run (bench.calibration.speed_probe);
    where the slowest sample is UNSTEADY times the fastest, predict and plan say that their
    figures carry that noise, and say nothing where it held still or was not sampled."""
    from bench.calibration import UNSTEADY, steadiness_text

    assert "warning" not in steadiness_text([1e-3, 1.1e-3])
    assert "varied 2.0x" in steadiness_text([1e-3, 2e-3, 1.5e-3])
    args = ("--shape", "512,512,512", "--profile", str(profile_file))
    data = json.loads(profile_file.read_text())
    for probes, noted in (None, False), ([1e-3, 1.05e-3], False), ([1e-3, UNSTEADY * 1e-3], True):
        if probes:
            data["machine"]["steadiness"] = {"gemm_n": 256, "seconds": probes}
        profile_file.write_text(json.dumps(data))
        for cmd in (("predict", "summa", *args, "--P", "4"), ("plan", *args, "--P", "4")):
            r = distmm(*cmd)
            assert r.returncode == 0, r.stderr
            assert ("in speed while it was calibrated" in r.stdout) == noted, cmd


def test_a_run_names_a_profile_made_on_another_cpu(profile_file):
    """calibrate records the CPU and its BLAS kernels; `distmm run --profile` says where they
    are not this machine's (its predictions are for that one), and nothing where they are or
    where an older profile does not say."""
    from bench.calibration import cpu_facts, other_machine_note

    here = cpu_facts()
    assert here["cpu_model"] and "num_threads" not in here["blas"]
    assert other_machine_note(here) is None and other_machine_note({}) is None
    avx512 = {**here, "blas": {**here["blas"], "architecture": "SkylakeX-elsewhere"}}
    assert "SkylakeX-elsewhere kernels" in other_machine_note(avx512)
    data = json.loads(profile_file.read_text())
    args = ("run", "summa", "--shape", "32,32,32", "--repeat", "1", "--profile", str(profile_file))
    for machine, noted in (here, False), (avx512, True):
        data["machine"].update(machine)
        profile_file.write_text(json.dumps(data))
        r = distmm_mpi(2, *args)
        assert r.returncode == 0, r.stderr
        assert ("the profile was made on" in r.stderr) == noted


def test_counts_timed_in_a_slow_spell_are_measured_again():
    """A rank count whose speed probes (before and after it) were 1.25x the fastest or more is
    measured again, unless more than a third were: then the machine swings all the time."""
    from bench.calibration_counts import to_measure_again

    steady = [[1.0, 1.02]] * 6
    assert to_measure_again(steady) == []
    assert to_measure_again(steady[:4] + [[1.0, 1.3], [1.6, 1.0]]) == [4, 5]
    assert to_measure_again(steady[:3] + [[1.0, 1.3], [1.6, 1.0], [1.4, 1.5]]) == []
    assert to_measure_again([]) == []


def test_gemm_shapes_timed_in_a_slow_spell_keep_the_usual_speed():
    """Each GEMM shape is timed beside a reference GEMM and scaled by the references' median
    over its own (bench.calibration_gemm.steady_times): a spell that slows the first shape of
    every pass (where the median over passes cannot help) or one shape of one pass leaves the
    table as the machine's usual speed (the references' median) gives it."""
    from bench.calibration_gemm import steady_times

    usual = np.array([1.0, 2.0, 4.0, 8.0])  # 4 shapes' seconds
    ref = 0.5
    slow = np.ones((3, 4))  # 3 passes
    slow[:, 0] = 2.5  # the first shape of every pass
    slow[1, 3] = 3.0  # and the last of one pass
    found = steady_times(usual * slow, ref * slow)
    assert np.allclose(found, usual)
    assert not np.allclose(np.median(usual * slow, axis=0), usual)  # the median over passes
    # a machine that held still: the times as timed
    assert np.allclose(steady_times(np.tile(usual, (3, 1)), np.full((3, 4), ref)), usual)


def _count(g, alpha, factor, yielding=False):
    return {
        "ranks": g,
        "alpha": alpha,
        "beta": 1e-10,
        "alpha_large": 2 * alpha,
        "beta_large": 1e-10,
        "collective_factor": {"bcast": factor},
        "efficiency": 1.0,
        "yielding": yielding,
    }


def test_profile_at_a_rank_count_uses_what_was_measured_there(tmp_path):
    from conftest import PROFILE

    f = tmp_path / "p.json"
    data = {**PROFILE, "oversubscription": [[1, 1], [4, 0.8]]}
    counts = [_count(8, 1e-4, 3.0), _count(2, 2e-6, 1.0), _count(12, 1e-3, 9.0, yielding=True)]
    f.write_text(json.dumps({**data, "counts": counts}))
    prof = Profile.load(f)
    at2, at5, at8 = prof.at(2), prof.at(5), prof.at(8)
    assert (at2.alpha, at2.collective_factor["bcast"], at2.comm_scale) == (2e-6, 1.0, 1.0)
    assert at5.alpha == pytest.approx((2e-6 + 1e-4) / 2) and at5.comm_scale == 1.0
    assert at5.collective_factor["bcast"] == pytest.approx(2.0)
    assert (at8.alpha, at8.comm_scale) == (1e-4, 1.0)
    # beyond the counts that fit the cores: the launched job's parameters, slowed as GEMMs are
    at12 = prof.at(12)
    assert at12.alpha == prof.alpha and at12.comm_scale == prof.slowdown(12)
    assert at12.collective_factor == prof.collective_factor
    assert prof.at(1).alpha == 2e-6 and at2.at(2) is at2
    with pytest.raises(ValueError):
        at2.at(4)
    # measured at the count: a collective is its formula with that count's parameters, unslowed
    ev = schedule(get("summa"), get("summa").plan((512,) * 3, 8, grid=(2, 4)), 0, "float32")
    pred = predict(ev, prof, "float32", 8)
    by_hand = predict(ev, Profile.load(f).at(8), "float32", 8)
    assert pred.seconds == by_hand.seconds
    # a profile from before counts: messages slowed as GEMMs are
    legacy = Profile.load(_write(tmp_path, data))
    assert legacy.at(8).comm_scale == legacy.slowdown(8) > 1 and legacy.at(8).alpha == legacy.alpha


def test_collectives_above_the_cores_fitted_over_every_count(tmp_path):
    """Each collective timed on g > cores ranks at exactly its formula with (alpha, beta) x
    g / cores: the fit recovers them and a run of P ranks pays them x P / cores, also past the
    largest count measured; GEMMs keep their own slowdown."""
    from conftest import PROFILE

    from topology.costs import collective_seconds

    unit = {
        "bcast": (3e-5, 2e-10),
        "allgather": (1e-5, 5e-10),
        "alltoall": (4e-5, 1e-9),
        "barrier": (5e-5, 0.0),
    }

    def timed(g):
        return {
            kind: [
                [n, collective_seconds(kind, n, g, a, b) * g / 2] for n in (4096, 1 << 18, 1 << 21)
            ]
            for kind, (a, b) in unit.items()
        }

    counts = [_count(2, 2e-6, 1.0)]
    counts += [
        {"ranks": g, "efficiency": 1.0, "yielding": True, "collectives": timed(g)}
        for g in (3, 6, 9)
    ]
    f = tmp_path / "p.json"
    f.write_text(json.dumps({**PROFILE, "collective_factor": {"bcast": 9.0}, "counts": counts}))
    prof = Profile.load(f)
    for kind, ab in prof.sliced_fit().items():
        assert ab == pytest.approx(unit[kind])
    assert prof.at(2).sliced is None and prof.at(2).alpha == 2e-6  # fits the cores: as measured
    for P in (4, 9, 32):
        at = prof.at(P)
        assert at.comm_scale == P / 2
        n, g = 1 << 20, 4
        want = collective_seconds("bcast", n, g, *unit["bcast"]) * P / 2
        assert at.collective("bcast", n, g) * at.comm_scale == pytest.approx(want)
        assert at.byte_seconds() == pytest.approx(1e-9 * P / 2)
    # a run's prediction ends with the barrier that closes its timed region, priced alike
    summa = get("summa")
    ev = schedule(summa, summa.plan((256, 256, 256), 9), 0, "float32")
    closed = predict(ev, prof, "float32", 9, P=9)
    barrier = collective_seconds("barrier", 0, 9, *unit["barrier"]) * 9 / 2
    assert closed.phases["barrier"] == pytest.approx(barrier)
    assert closed.seconds == pytest.approx(predict(ev, prof, "float32", 9).seconds + barrier)
    # a kind not timed there keeps the launched job's formula and factor
    assert prof.at(4).collective("allreduce", 1 << 20, 4) == prof.collective(
        "allreduce", 1 << 20, 4
    )


def test_collectives_on_groups_are_priced_from_their_timings_on_a_grid(tmp_path):
    """Above the cores, a collective on fewer ranks than the node's is priced with the fit to
    its timings on the rows then the columns of a grid (every row at once), one on all of them
    with the fit to its timings on the whole job; a kind not timed on a grid keeps the latter."""
    from conftest import PROFILE

    from bench.model.fits import fit_collectives
    from topology.costs import collective_seconds

    whole, grouped = {"bcast": (3e-5, 2e-10), "shift": (1e-4, 5e-10)}, {"bcast": (9e-5, 6e-10)}

    def timed(g, unit, grid=None):
        sizes = grid or (g,)
        return {
            kind: [
                [n, sum(collective_seconds(kind, n, s, a, b) for s in sizes) * g / 2]
                for n in (4096, 1 << 18, 1 << 21)
            ]
            for kind, (a, b) in unit.items()
        }

    counts = [
        {"ranks": g, "efficiency": 1.0, "yielding": True, "collectives": timed(g, whole)}
        | ({"grid": list(grid), "grid_collectives": timed(g, grouped, grid)} if grid else {})
        for g, grid in ((3, None), (4, (2, 2)), (6, (2, 3)), (9, (3, 3)))
    ]
    assert fit_collectives(counts, 2, grid=True)["bcast"] == pytest.approx(grouped["bcast"])
    f = tmp_path / "p.json"
    f.write_text(json.dumps({**PROFILE, "counts": [_count(2, 2e-6, 1.0), *counts]}))
    at = Profile.load(f).at(16)
    n = 1 << 20
    for kind, g, (a, b) in (
        ("bcast", 4, grouped["bcast"]),
        ("bcast", 16, whole["bcast"]),
        ("shift", 4, whole["shift"]),
    ):
        assert at.collective(kind, n, g) == pytest.approx(collective_seconds(kind, n, g, a, b))
    assert Profile.load(f).at(2).grouped is None  # the ranks fit the cores: as measured


def test_above_the_cores_a_collective_costs_less_after_less_computation(tmp_path):
    """A profile whose counts above the cores timed the collectives after long and short GEMMs
    fits each loop's alphas and betas; a collective ``step`` seconds after computation costs
    the short fit's price (the long one's if less) plus the rest of the long one's in
    proportion to log(step / short step) / log(long step / short step), within the two steps.
    The walk takes each message's step from the GEMMs before it; before any, the long price.
    A profile without the short timings prices as before."""
    from conftest import PROFILE

    from bench.model.steps import StepLaw
    from topology.costs import collective_seconds

    long_fit = {"bcast": (3e-4, 2e-10), "shift": (1e-3, 5e-10)}
    short_fit = {"bcast": (3e-5, 2e-10), "shift": (1e-4, 5e-10)}

    def timed(g, unit):
        return {
            kind: [
                [n, collective_seconds(kind, n, g, a, b) * g / 2] for n in (4096, 1 << 18, 1 << 21)
            ]
            for kind, (a, b) in unit.items()
        }

    def count(g, short=True):  # steps per rank per core: 0.0625 ms and 16 ms
        c = {"ranks": g, "efficiency": 1.0, "yielding": True, "collectives": timed(g, long_fit)}
        if short:
            c |= {"step": 16e-3 * g / 2, "short": {"step": 16e-3 / 256 * g / 2}}
            c["short"]["collectives"] = timed(g, short_fit)
        return c

    counts = [count(g) for g in (3, 4, 6, 8)]
    law = StepLaw.fit(counts, 2)
    assert law.grouped == {} and law.ranks == (3, 4, 6, 8)
    for kind, ab in law.sliced.items():
        assert ab == pytest.approx(short_fit[kind])
    steps = law.at(12, 2)  # 6 ranks per core
    assert (steps.short, steps.long) == pytest.approx((0.375e-3, 96e-3))
    n, g = 1 << 20, 12
    lo, hi = (collective_seconds("bcast", n, g, *f["bcast"]) for f in (short_fit, long_fit))
    for step, want in (
        (None, hi),
        (1.0, hi),
        (96e-3, hi),
        (0.0, lo),
        (0.375e-3, lo),
        (6e-3, (lo + hi) / 2),
    ):
        assert steps.price("bcast", n, g, hi, False, step) == pytest.approx(want), step
    assert steps.price("bcast", n, g, lo / 2, False, 0.0) == lo / 2  # the long price if less
    assert steps.price("allgather", n, g, hi, False, 0.0) == hi  # not timed after short GEMMs
    f = tmp_path / "p.json"
    f.write_text(json.dumps({**PROFILE, "counts": [_count(2, 2e-6, 1.0), *counts]}))
    at = Profile.load(f).at(12)
    assert at.collective("bcast", n, g) == pytest.approx(hi)
    assert at.collective("bcast", n, g, 6e-3) == pytest.approx((lo + hi) / 2)
    # summa on 12 ranks: broadcasts after its own steps priced below the long step's
    summa = get("summa")
    ev = schedule(summa, summa.plan((512, 2048, 512), 12, grid=(3, 4)), 0, "float32")
    walked = predict(ev, Profile.load(f), "float32", 12)
    old = tmp_path / "old.json"
    plain = [_count(2, 2e-6, 1.0), *(count(g, False) for g in (3, 4, 6, 8))]
    old.write_text(json.dumps({**PROFILE, "counts": plain}))
    before = predict(ev, Profile.load(old), "float32", 12)
    assert Profile.load(old).at(12).steps is None
    assert before.phases["gemm"] == pytest.approx(walked.phases["gemm"])
    # 12 panels: the first two posted before any GEMM (the long price), then each after one
    step = walked.phases["gemm"] / 12
    share = [
        at.collective("bcast", e.nbytes, e.group, step) / at.collective("bcast", e.nbytes, e.group)
        for e in ev[:2]
    ]
    assert all(0.1 < x < 0.9 for x in share)
    first, rest = (
        before.phases["bcast"] / 12,
        sum(at.collective("bcast", e.nbytes, e.group, step) * at.comm_scale for e in ev[:2]),
    )
    assert walked.phases["bcast"] == pytest.approx(2 * first + 10 * rest)


def test_a_collective_timed_in_a_slow_spell_does_not_pull_its_fit():
    """One timing far off the others' fit (the machine busy elsewhere for a moment) is
    dropped and the rest fitted again: the exact parameters come back."""
    from bench.model.fits import fit_collectives
    from topology.costs import collective_seconds

    alpha, beta = 3e-4, 2e-10

    def count(g, slow=1.0):
        rows = [
            [n, collective_seconds("shift", n, g, alpha, beta) * g / 2]
            for n in (4096, 1 << 18, 1 << 21)
        ]
        rows[-1][1] *= slow
        return {"ranks": g, "collectives": {"shift": rows}}

    counts = [count(g) for g in range(3, 15)] + [count(15, slow=10.0), count(16)]
    assert fit_collectives(counts, 2)["shift"] == pytest.approx((alpha, beta))
    counts[-2] = count(15)  # none off: the first fit stands
    assert fit_collectives(counts, 2)["shift"] == pytest.approx((alpha, beta))


def test_time_slicing_is_one_efficiency_for_every_count():
    """The median of the efficiencies measured above the cores, at most 1, for every count: a
    single count's value swings with the scheduler."""
    noisy = Profile(
        1e-6,
        1e-10,
        1e-6,
        1e-10,
        cores=2,
        shared_efficiency=((1, 1), (1.5, 0.8), (2, 1.4), (3, 0.9)),
    )
    assert noisy.efficiency() == 0.9
    assert noisy.slowdown(2) == 1.0 and noisy.slowdown(4) == pytest.approx(2 / 0.9)
    assert noisy.slowdown(6) == pytest.approx(3 / 0.9)
    faster = Profile(1e-6, 1e-10, 1e-6, 1e-10, cores=2, shared_efficiency=((1, 1), (4, 1.3)))
    assert faster.slowdown(8) == 4.0  # never faster than one rank per core
    assert Profile(1e-6, 1e-10, 1e-6, 1e-10, cores=2).slowdown(8) == 4.0  # not measured: perfect


def test_time_slicing_is_taken_against_the_profiles_own_gemm_rates(tmp_path):
    """Where calibrate kept the GEMM it timed with every rank working, the efficiency is this
    profile's time for that GEMM x ranks per core / the time measured: a rank's GEMM is then
    priced at what was measured, whichever job timed the rates."""
    from conftest import PROFILE

    def count(g, seconds):  # a 512^3 GEMM costs 0.0025 s at the profile's rate
        return {"ranks": g, "efficiency": 0.5, "gemm_shared": [512, seconds], "yielding": True}

    data = {
        **PROFILE,
        "oversubscription": [[1.0, 1.0], [2.0, 0.5], [3.0, 0.5]],
        "counts": [count(4, 0.0025 * 2 / 0.8), count(6, 0.0025 * 3 / 0.9), count(8, 0.02)],
    }
    prof = Profile.load(_write(tmp_path, data))
    assert prof.efficiency() == pytest.approx(0.8)  # the median of 0.8, 0.9 and 0.5
    assert prof.gemm_seconds(512, 512, 512, "float32") * prof.slowdown(4) == pytest.approx(
        0.0025 * 2 / 0.8
    )
    assert prof.at(8).slowdown(8) == prof.slowdown(8)  # kept where the counts are dropped
    for c in data["counts"]:
        del c["gemm_shared"]  # older profiles: the efficiency calibrate stored
    assert Profile.load(_write(tmp_path, data)).efficiency() == 0.5


def test_gemms_below_the_cores_are_priced_with_the_blas_threads_a_rank_has(tmp_path):
    """A run of g ranks on c cores gives each rank c // g BLAS threads (bench.machine): its
    GEMMs are priced at the share of the one-thread time calibrate measured with that many
    threads, linear in t between the counts measured; at or above the cores, one thread. A
    profile from before calibrate measured threads prices one thread everywhere."""
    from conftest import PROFILE

    from bench.model.gemm_rates import Threading

    one = [[m, 512, n, 2e-11 * m * 512 * n] for m in (256, 1024) for n in (256, 1024)]

    def rows(share_small, share_large):  # the share at m = 256 and at m = 1024
        return [[m, k, n, s * (share_small if m == 256 else share_large)] for m, k, n, s in one]

    data = {
        **PROFILE,
        "machine": {"cores": 8},
        "gemm": {"float32": one},
        "gemm_threads": {"8": rows(0.5, 0.2), "2": rows(0.9, 0.6)},
    }
    prof = Profile.load(_write(tmp_path, data))
    base = prof.gemm_seconds(1024, 512, 1024, "float32")
    assert prof.at(1).threads == 8 and prof.at(4).threads == 2 and prof.at(9).threads == 1
    assert prof.at(1).gemm_seconds(1024, 512, 1024, "float32") == pytest.approx(0.2 * base)
    assert prof.at(4).gemm_seconds(1024, 512, 1024, "float32") == pytest.approx(0.6 * base)
    assert prof.at(8).gemm_seconds(1024, 512, 1024, "float32") == base
    assert prof.at(16).gemm_seconds(1024, 512, 1024, "float32") == base
    # 4 threads (2 ranks) were not measured here: between 2 and 8 threads, linear in t
    share = prof.threading().share(4, (256, 512, 256))
    assert share == pytest.approx(0.9 + (0.5 - 0.9) * 2 / 6)
    for rpn in (1, 2, 3, 4, 8):  # the planner's bound: no GEMM priced below the least rate
        at = prof.at(rpn)
        for m, k, n in [(256, 512, 256), (700, 512, 300), (1024, 512, 1024), (99, 9, 5000)]:
            assert at.gemm_seconds(m, k, n, "float32") >= at.least_seconds_per_flop("float32") * (
                2 * m * k * n
            ) * (1 - 1e-12)
    del data["gemm_threads"]
    old = Profile.load(_write(tmp_path, data))
    assert old.at(1).gemm_seconds(1024, 512, 1024, "float32") == base
    assert Threading().share(8, (64, 64, 64)) == 1.0
    data["gemm_threads"] = {"2": [[64, 64, 64, 1e-5]]}  # not a shape of the one-thread grid
    with pytest.raises(ProfileError, match="not on the one-thread grid"):
        Profile.load(_write(tmp_path, data)).at(1).gemm_seconds(64, 64, 64, "float32")


def test_gemms_below_the_cores_are_priced_as_every_rank_computing_at_once(tmp_path):
    """Up to the cores calibrate times, at each count, a GEMM every rank does at once with the
    BLAS threads a run of that many gives it ("gemm_shared", bench.calibration.busy_gemm):
    the profile at g prices every GEMM at that time over its own price of the same GEMM at g
    (linear between counts, the nearest count's outside them), and the planner's bound stays
    below every price. Above the cores time slicing prices them (slowdown), and profiles
    without those timings price the rates as they are."""
    from conftest import PROFILE

    one = [[m, 512, n, 2e-11 * m * 512 * n] for m in (256, 1024) for n in (256, 1024)]
    halved = [[m, k, n, s / 2] for m, k, n, s in one]  # 2 threads: half the one-thread time
    n, price = 1024, 2e-11 * 1024 * 512 * 1024 * 2  # 1024^3 at the grid's rate (k clamped)

    def count(g, ratio, threads):
        return {**_count(g, 2e-6, 1.0), "gemm_shared": [n, ratio * price / threads]}

    data = {
        **PROFILE,
        "machine": {"cores": 4},
        "gemm": {"float32": one},
        "gemm_threads": {"2": halved, "4": [[m, k, n, s / 4] for m, k, n, s in one]},
        "counts": [count(2, 0.9, 2), count(3, 1.2, 1), count(4, 1.5, 1)],
    }
    prof = Profile.load(_write(tmp_path, data))
    assert prof.gemm_seconds(n, n, n, "float32") == pytest.approx(price)
    assert [prof.busy_at(g) for g in (1, 2, 3, 4, 8)] == pytest.approx([0.9, 0.9, 1.2, 1.5, 1.0])
    base = prof.gemm_seconds(700, 300, 900, "float32")
    assert prof.at(4).gemm_seconds(700, 300, 900, "float32") == pytest.approx(1.5 * base)
    assert prof.at(2).gemm_seconds(700, 300, 900, "float32") == pytest.approx(0.9 * base / 2)
    assert prof.at(8).gemm_seconds(700, 300, 900, "float32") == pytest.approx(base)
    for rpn in (1, 2, 3, 4):
        at = prof.at(rpn)
        for m, k, nn in [(256, 512, 256), (700, 300, 900), (99, 9, 5000)]:
            assert at.gemm_seconds(m, k, nn, "float32") >= at.least_seconds_per_flop("float32") * (
                2 * m * k * nn
            ) * (1 - 1e-12)
    # what a run of 4 ranks is predicted to take grows with it
    plan = get("summa").plan((512,) * 3, 4, grid=(2, 2))
    ev = schedule(get("summa"), plan, 0, "float32")
    fast = predict(ev, Profile.load(_write(tmp_path, {**data, "counts": []})), "float32", 4)
    slow = predict(ev, prof, "float32", 4)
    assert slow.phases["gemm"] == pytest.approx(1.5 * fast.phases["gemm"])
    for c in data["counts"]:
        del c["gemm_shared"]
    assert Profile.load(_write(tmp_path, data)).busy_at(4) == 1.0


def test_gemms_at_once_are_compared_with_the_rates_typical_pace_not_one_shape(tmp_path):
    """The GEMM calibrate times with every rank working is compared with the rates' pace at
    its shape median-filtered over the shapes a grid step away: a table whose one point there
    ran 16% fast (results/vm-2c-zen4) does not price every GEMM 16% long, below the cores
    (busy_at) or above them (the time-slicing efficiency); a pace on a trend is kept."""
    from conftest import PROFILE

    grid = (320, 1024, 3072)
    lucky = {(1024, 1024, 1024): 1 / 1.16}
    one = [
        [m, k, n, 1e-11 * m * k * n * lucky.get((m, k, n), 1.0)]
        for m in grid
        for k in grid
        for n in grid
    ]
    typical = 1e-11 * 1024**3  # 1024^3 at its neighbours' pace
    data = {
        **PROFILE,
        "machine": {"cores": 2},
        "gemm": {"float32": one},
        "counts": [
            {**_count(2, 2e-6, 1.0), "gemm_shared": [1024, 1.05 * typical]},
            {**_count(4, 2e-6, 1.0), "gemm_shared": [1024, 2 * typical / 0.8]},
        ],
    }
    prof = Profile.load(_write(tmp_path, data))
    assert prof.gemm_seconds(1024, 1024, 1024, "float32") == pytest.approx(typical / 1.16)
    assert prof.busy_at(2) == pytest.approx(1.05)
    assert prof.efficiency() == pytest.approx(0.8)
    assert prof.at(2).gemm_seconds(3072, 320, 1024, "float32") == pytest.approx(
        1.05 * prof.gemm_seconds(3072, 320, 1024, "float32")
    )
    # rates rising with m: 1024^3 lies between its neighbours, and is compared as it is
    rising = [[m, k, n, 1e-11 * m * k * n * (1024 / m) ** 0.2] for m, k, n, _ in one]
    prof = Profile.load(_write(tmp_path, {**data, "gemm": {"float32": rising}}))
    assert prof.busy_at(2) == pytest.approx(1.05)


def test_layout_changes_are_refitted_without_moves_that_moved_nothing(tmp_path):
    """A count's layout-change coefficients come from its timed moves: those that sent
    nothing are left out (the model and the runs take them for free), and in profiles from
    before calibrate recorded its per_core, a count below the cores has its rows' loads taken
    back from the cores / g times theirs they were recorded at. Rows timed before pieces were
    counted fit without them (piece 0)."""
    from conftest import PROFILE

    from bench.model.fits import A2AV_TERMS

    costs = (1e-5, 2e-6, 1e-10, 5e-11)
    rows = [[m, b, c] for m in (1, 3) for b in (1e5, 4e6) for c in (2e5, 9e6)]
    timed = [[*r, costs[0] + sum(k * x for k, x in zip(costs[1:], r, strict=True))] for r in rows]
    noop = [[0, 0, 9e6, 1e-5], [0, 0, 4e7, 1e-5]]  # kept as they were: microseconds

    def count(g, rows, **extra):
        fitted = dict(zip(A2AV_TERMS[:4], (0.0, 0.0, 0.0, 1e-14), strict=True))  # as stored
        return {**_count(g, 2e-6, 1.0), "alltoallv": {**fitted, "timed": rows, **extra}}

    data = {**PROFILE, "machine": {"cores": 8}}
    data["counts"] = [count(4, timed + noop, per_core=1.0)]
    assert list(Profile.load(_write(tmp_path, data)).at(4).alltoallv.values()) == pytest.approx(
        [*costs, 0.0]
    )
    # an older profile: the loads at 4 of 8 cores were recorded twice as large
    data["counts"] = [count(4, [[2 * x for x in r[:3]] + [r[3]] for r in timed + noop])]
    assert list(Profile.load(_write(tmp_path, data)).at(4).alltoallv.values()) == pytest.approx(
        [*costs, 0.0]
    )
    data["counts"] = [count(4, timed[:3], per_core=1.0)]  # too few to refit: as stored
    assert Profile.load(_write(tmp_path, data)).at(4).alltoallv["copy"] == 1e-14
    # rows with pieces take one more to refit: four are too few for five terms
    n = (0, 300, 100, 700, 200, 0, 500, 100)  # not a sum of the other loads' parts
    pieces = [[*r[:3], k, r[3] + 4e-8 * k] for k, r in zip(n, timed, strict=True)]
    data["counts"] = [count(4, pieces[:4], per_core=1.0)]
    assert Profile.load(_write(tmp_path, data)).at(4).alltoallv["copy"] == 1e-14
    data["counts"] = [count(4, pieces, per_core=1.0)]
    got = Profile.load(_write(tmp_path, data)).at(4).alltoallv
    assert list(got.values()) == pytest.approx([*costs, 4e-8])
    # above the cores (one fit over those counts, times g / cores) the same rows are left out
    sharing = {**count(16, [[*r[:3], 2 * r[3]] for r in timed + noop]), "yielding": True}
    data["counts"] = [count(4, timed, per_core=1.0), sharing]
    got = Profile.load(_write(tmp_path, data)).at(16).alltoallv
    assert list(got.values()) == pytest.approx([*(2 * c for c in costs), 0.0])


def _write(tmp_path, data):
    f = tmp_path / "legacy.json"
    f.write_text(json.dumps(data))
    return f


def test_cannon_bytes_per_rank_are_the_textbook_count(profile_file):
    module = get("cannon")
    plan = module.plan((96, 96, 96), 9)
    # p - 1 shifts of an A block and a B block, 32 x 32 float32 each
    assert bytes_per_rank(module, plan) == [2 * 2 * 32 * 32 * 4] * 9


def test_overlap_hides_communication_only_with_spare_cores(profile_file):
    prof = Profile.load(profile_file)
    module = get("cannon")
    plan = module.plan((2048, 2048, 2048), 4)
    events = schedule(module, plan)
    alone = predict(events, prof, "float32", ranks_per_node=1)
    crowded = predict(events, prof, "float32", ranks_per_node=4)
    gemm = alone.phases["gemm"]
    assert alone.seconds == pytest.approx(gemm, rel=0.05)  # shifts hidden behind GEMMs
    assert crowded.seconds > 2 * alone.seconds  # 4 ranks on 2 cores: half a core each, no hiding
    blocking = predict(
        schedule(module, module.plan((2048,) * 3, 4, overlap=False)), prof, "float32", 1
    )
    assert blocking.seconds > alone.seconds


def test_overlapped_messages_cost_the_rank_what_calibrate_measured_them_to(tmp_path):
    """Where the ranks fit the cores, an overlapped message occupies the rank for the part of
    its price calibrate measured a rank paying for one posted before a polled GEMM ("exposed"
    per count and kind, bench/calibration_overlap.py; linear between counts, the nearest
    outside them): 0 hides it (profiles from before it was measured), 1 prices it as blocking,
    more than 1 dearer than blocking. Above the cores without a measured part (this profile has
    no counts there), in full."""
    from conftest import PROFILE

    def count(g, shift, bcast):
        return {**_count(g, 2e-6, 1.0), "exposed": {"shift": shift, "bcast": bcast}}

    def profile(counts):
        return Profile.load(
            _write(tmp_path, {**PROFILE, "machine": {"cores": 4}, "counts": counts})
        )

    prof = profile([count(2, 0.5, 1.0), count(4, 1.5, 1.2)])
    assert prof.at(2).exposed == {"shift": 0.5, "bcast": 1.0}
    assert prof.at(3).exposed == pytest.approx({"shift": 1.0, "bcast": 1.1})
    assert prof.at(1).exposed == prof.at(2).exposed and prof.at(8).exposed == {}
    cannon = get("cannon")
    on, off = (schedule(cannon, cannon.plan((1024,) * 3, 4, overlap=o)) for o in (True, False))
    hidden = profile([_count(g, 2e-6, 1.0) for g in (2, 4)])
    gemm = predict(on, hidden, "float32", 4).phases["gemm"]
    shifts = predict(off, hidden, "float32", 4).seconds - gemm  # every shift, blocking
    assert predict(on, hidden, "float32", 4).seconds < gemm + 0.05 * shifts  # hidden
    assert predict(on, prof, "float32", 4).seconds == pytest.approx(gemm + 1.5 * shifts)
    assert predict(on, profile([count(4, 1.0, 1.0)]), "float32", 4).seconds == pytest.approx(
        predict(off, prof, "float32", 4).seconds
    )
    assert predict(on, prof, "float32", 8).seconds == pytest.approx(
        predict(off, prof, "float32", 8).seconds
    )


def test_above_the_cores_a_posted_message_costs_the_part_calibrate_measured(tmp_path):
    """Above the cores calibrate times a message posted before a polled GEMM against the same
    one blocking after it ("exposed" of those counts, bench/calibration_overlap.exposure_above):
    the walk charges the rank that part of an overlapped message's price, linear between two
    counts, from three on a line in log(ranks) fitted by Theil-Sen, the nearest count's outside
    them; a kind not measured there costs it in full."""
    from conftest import PROFILE

    from topology.costs import collective_seconds

    def count(g, exposed):
        timed = {
            kind: [
                [n, collective_seconds(kind, n, g, 1e-3, 5e-10) * g / 2] for n in (4096, 1 << 20)
            ]
            for kind in ("shift", "bcast")
        }
        return {"ranks": g, "efficiency": 1.0, "yielding": True, "collectives": timed} | (
            {"exposed": exposed} if exposed else {}
        )

    def profile(*counts):
        f = tmp_path / "p.json"
        f.write_text(json.dumps({**PROFILE, "counts": [_count(2, 2e-6, 1.0), *counts]}))
        return Profile.load(f)

    measured = profile(count(4, {"shift": 1.2}), count(8, {"shift": 0.4}))
    assert measured.at(6).exposed == pytest.approx({"shift": 0.8})
    assert measured.at(16).exposed == pytest.approx({"shift": 0.4})
    # from three counts on, a line in log(ranks) by Theil-Sen: one count off it changes nothing
    line = {g: 1 - 0.25 * math.log2(g / 4) for g in (4, 6, 8, 12, 16)}
    off = profile(*(count(g, {"shift": 2.0 if g == 12 else f}) for g, f in line.items()))
    assert off.at(12).exposed["shift"] == pytest.approx(line[12])
    assert off.at(16).exposed["shift"] == off.at(64).exposed["shift"] == pytest.approx(0.5)
    twice = profile(*(count(g, {"shift": f}) for g, f in [(4, 1.0), (4, 0.8), (8, 0.6)]))
    assert 0.6 <= twice.at(6).exposed["shift"] <= 1.0  # a count measured twice: no 0 / 0
    unmeasured = profile(count(4, None), count(8, None))
    assert unmeasured.at(8).exposed == {}
    cannon = get("cannon")
    on, off = (schedule(cannon, cannon.plan((1024,) * 3, 16, overlap=o)) for o in (True, False))
    gemm = predict(off, unmeasured, "float32", 16).phases["gemm"]
    shifts = predict(off, unmeasured, "float32", 16).seconds - gemm
    assert predict(on, unmeasured, "float32", 16).seconds == pytest.approx(gemm + shifts)
    walked = predict(on, measured, "float32", 16)
    assert walked.phases["gemm"] == pytest.approx(gemm)
    # the rank pays 0.4 of each shift, and waits where the channel is still busy at the wait
    assert gemm + 0.4 * shifts < walked.seconds < gemm + 0.95 * shifts
    whole = profile(count(4, {"shift": 1.0}), count(8, {"shift": 1.0}))
    assert predict(on, whole, "float32", 16).seconds == pytest.approx(gemm + shifts)
    # timed after short GEMMs too: a message's part goes from the short loop's to the long
    # one's as its price does, by log(step)
    steps = Steps(1e-3, 16e-3, {}, {}, {"shift": 1.0})
    for step, want in ((None, 0.4), (0.0, 1.0), (1e-3, 1.0), (4e-3, 0.7), (16e-3, 0.4), (1, 0.4)):
        assert steps.exposed_part("shift", 0.4, step) == pytest.approx(want), step
    assert steps.exposed_part("bcast", 0.5, 1e-3) == 0.5  # not timed after short GEMMs

    def stepped(g, long, short):
        c = count(g, {"shift": long})
        c |= {"step": 16e-3 * g / 2, "short": {"step": 1e-3 * g / 2, "exposed": {"shift": short}}}
        return c | {"short": c["short"] | {"collectives": c["collectives"]}}

    both = profile(stepped(4, 0.4, 1.0), stepped(8, 0.4, 0.8))
    assert both.at(6).steps.exposed == pytest.approx({"shift": 0.9})
    assert both.at(6).exposed == pytest.approx({"shift": 0.4})


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_predict_thousands_of_ranks_fast(name, profile_file):
    P = {
        "summa3d": 4096,
        "cannon": 4096,
        "tesseract": 4096,
        "summa25d": 4096,
        "cannon25d": 4096,
    }.get(name, 4096)
    module = get(name)
    start = time.perf_counter()
    plan = module.plan((32768, 32768, 32768), P)
    pred = predict(schedule(module, plan), Profile.load(profile_file), "float32", 1)
    assert time.perf_counter() - start < 1.0
    assert pred.seconds > 0 and pred.flops > 0


def test_stated_2p5d_formula_is_flagged(profile_file):
    stated = stated_cost("summa25d", (4096,) * 3, 32, (4, 4, 2), Profile.load(profile_file), 4)
    assert "suspect" in stated["note"]


def test_predict_command(profile_file):
    r = distmm(
        "predict",
        "summa",
        "--shape",
        "4096,4096,4096",
        "--P",
        "1024",
        "--profile",
        str(profile_file),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["P"] == 1024 and rec["grid"] == [32, 32] and rec["predicted_seconds"] > 0
    r = distmm("predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", "nope.json")
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_calibrate_trace_analyze(tmp_path):
    from bench.calibration_gemm import ADDED_BYTES
    from bench.machine import blas_threads, cores

    prof = tmp_path / "profile.json"
    r = distmm_mpi(2, "calibrate", "--quick", "--out", str(prof), timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Latency [us]" in r.stdout and "GFLOP/s" in r.stdout
    data = json.loads(prof.read_text())
    assert data["machine"]["ranks"] == 2 and data["p2p"]["large"]["beta"] > 0
    assert data["collectives"]["alltoall"] and data["collective_factor"]["alltoall"] > 0
    assert "# alltoall on 2 ranks" in r.stdout
    assert sorted(data["reduce_bandwidth"]) == ["float32", "float64"]
    assert all(bw > 1e8 for bw in data["reduce_bandwidth"].values())
    assert "# local reduction (MPI's SUM" in r.stdout
    # the adding pass of a GEMM's accumulation, from the L2 cache to memory (calibration_gemm)
    assert [[b for b, _ in rows] for rows in data["adding"].values()] == [list(ADDED_BYTES)] * 2
    assert all(t > 0 for rows in data["adding"].values() for _, t in rows)
    # the machine's speed sampled before, at each count and after: spread printed and kept
    probes = data["machine"]["steadiness"]["seconds"]
    assert len(probes) >= 4 and all(t > 0 for t in probes) and "# steadiness: " in r.stdout
    # GEMMs with every count of BLAS threads a run gives a rank on this node
    threads = {blas_threads(cores(), g) for g in range(1, cores() + 1)} - {1}
    assert set(data["gemm_threads"]) == {str(t) for t in threads}
    assert all(row[3] > 0 for rows in data["gemm_threads"].values() for row in rows)
    (count,) = data["counts"]  # every rank count up to the job's: here 2
    assert count["ranks"] == 2 and count["efficiency"] > 0
    # the layout changes that price redistributions, timed at the count: one row per move
    moves = count["alltoallv"]  # cols -> block on 1 x 2 moves nothing: left out
    assert len(moves["timed"]) == 2 and all(r[-1] > 0 and r[1] > 0 for r in moves["timed"])
    assert set(moves) == {"start", "message", "byte", "copy", "piece", "timed", "per_core"}
    assert count["gemm_shared"][1] > 0
    assert min(moves[k] for k in ("start", "message", "byte", "copy")) >= 0
    loaded = Profile.load(prof)  # a count that fits the cores is priced with its own alpha
    if count["yielding"]:  # more ranks than cores: time slicing and the collectives timed
        assert "alpha" not in count and loaded.at(2).alpha == loaded.alpha
        assert all(t > 0 for rows in count["collectives"].values() for _, t in rows)
        assert loaded.sliced_fit().keys() == count["collectives"].keys()
    else:
        assert count["alpha"] > 0 and count["collective_factor"]["bcast"] > 0
        assert loaded.at(2).alpha == count["alpha"]
        assert loaded.at(2).exposed == count["exposed"]
        assert set(count["exposed"]) == set(POSTED)
        assert count["collective_factor"].keys() == set(COMM_KINDS)  # timed out of the caches
    traces = tmp_path / "trace"
    r = distmm_mpi(
        4,
        "run",
        "cannon",
        "--shape",
        "1024,1024,1024",  # blocks of 512 rows: each GEMM in two chunks, polled between
        "--trace",
        str(traces),
        "--profile",
        str(prof),
        "--repeat",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["predicted_seconds"] > 0 and "gemm" in rec["predicted_phases"]
    assert sorted(p.name for p in traces.glob("rank*.json")) == [f"rank{i}.json" for i in range(4)]
    combined = json.loads((traces / "combined.json").read_text())["traceEvents"]
    assert {e["pid"] for e in combined} == {0, 1, 2, 3}
    # the polls between a GEMM's chunks are spans of the shifts they progress, not of the GEMM
    spans = [e for e in load_rank_events(traces)[0] if e.get("ph") == "X"]
    on_rank = [e for e in spans if e["args"]["lane"] == 0]
    polls = [e for e in on_rank if e["args"].get("poll")]
    gemms = [e for e in on_rank if e["name"] == "gemm"]
    assert polls and {e["name"] for e in polls} == {"shift"} and len(gemms) > len(polls)
    for g in gemms:
        assert not any(g["ts"] < e["ts"] + e["dur"] and e["ts"] < g["ts"] + g["dur"] for e in polls)
    r = distmm("analyze", str(traces), "--json")
    assert r.returncode == 0, r.stderr
    phases = json.loads(r.stdout)["phases"]
    assert phases["gemm"]["measured"] > 0 and phases["total"]["predicted"] > 0
    assert (traces / "spans.csv").exists()
    r = distmm("analyze", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "not a directory" in r.stderr
    (traces / "rank2.json").unlink()  # per phase the slowest rank: not without rank 2
    r = distmm("analyze", str(traces))
    assert r.returncode == 2 and "lacks the traces of rank(s) 2 of the 4" in r.stderr


def test_calibrate_up_to_measures_the_larger_counts_in_a_job_of_its_own(tmp_path):
    """`mpiexec -n 1 distmm calibrate --up-to 3`: counts 2 and 3 measured as a job of 3 would,
    those above the cores with the collectives timed there; with fewer ranks launched than
    cores, the GEMMs timed in that job too, with every core busy."""
    from bench.machine import blas_threads, cores

    prof = tmp_path / "profile.json"
    r = distmm_mpi(1, "calibrate", "--quick", "--up-to", "3", "--out", str(prof), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if cores() > 1:
        assert "GEMMs and rank counts 2 to 3: in a job of 3 ranks" in r.stdout
        busy = min(3, cores())
        assert f"one core per rank, {busy} ranks at once (in the job of 3)" in r.stdout
        # the layout changes at 3 ranks on 2 cores: priced at their own level (fits.sharing_levels)
        assert (f"layout changes above the {cores()} cores" in r.stdout) == (cores() == 2)
        # ... and its collectives after short GEMMs beside the long ones (bench/model/steps.py)
        assert ("after 128^3 GEMMs, not 512^3" in r.stdout) == (cores() == 2)
    else:
        assert "rank counts 2 to 3: in a job of 3 ranks" in r.stdout
    data = json.loads(prof.read_text())
    threads = {str(blas_threads(cores(), g)) for g in range(1, cores() + 1)} - {"1"}
    assert data["gemm"]["float32"] and set(data["gemm_threads"]) == threads
    counts = data["counts"]
    assert [c["ranks"] for c in counts] == [2, 3]
    # the machine's speed before and after each count (and again for one measured twice)
    assert all(len(c["probes"]) == 2 for c in counts)
    assert len(data["machine"]["steadiness"]["seconds"]) >= 5  # each sample once
    for c in counts:
        assert ("collectives" in c) == (c["ranks"] > cores()) and c["efficiency"] > 0
        assert c["gemm_shared"][0] == 512 and c["gemm_shared"][1] > 0  # every count
        assert c["alltoallv"]["per_core"] == max(c["ranks"] / cores(), 1.0)
        # a message posted before a GEMM: what the rank pays of it (above the cores, against
        # one blocking after it; a kind whose blocking one added nothing there is left out)
        kinds = set(c["exposed"])
        assert kinds == set(POSTED) if c["ranks"] <= cores() else kinds <= set(POSTED)
        assert all(0 <= f <= 3 for f in c["exposed"].values())
        assert c["ranks"] <= cores() or "barrier" in c["collectives"]
        assert ("alpha" in c) == (c["ranks"] <= cores())
        if c["ranks"] > cores():  # ... and again after shorter GEMMs (bench/model/steps.py)
            short = c["short"]
            assert short["gemm"] == 128 and 0 < short["step"] < c["step"]
            assert short["collectives"].keys() == c["collectives"].keys()
    r = distmm_mpi(1, "calibrate", "--quick", "--up-to", "0", "--out", str(prof))
    assert r.returncode == 2 and "--up-to 0" in r.stderr


def test_refreshed_gemm_tables_keep_what_calibrate_measured_as_ratios(tmp_path):
    """`calibrate --refresh-gemm`: the new tables replace the old, each count's GEMM timed with
    every rank working is scaled alike, so the time-slicing efficiency and the busy factor stay
    as measured and the GEMMs' price follows the new tables."""
    from conftest import PROFILE

    from bench.calibration_refresh import refreshed

    counts = [
        {"ranks": 2, "efficiency": 1.0, "gemm_shared": [512, 0.0025 * 1.2], "yielding": False},
        {"ranks": 4, "efficiency": 0.5, "gemm_shared": [512, 0.0025 * 2 / 0.8], "yielding": True},
    ]
    data = {**PROFILE, "counts": counts}
    slower = {dtype: [[*r[:3], 2 * r[3]] for r in rows] for dtype, rows in PROFILE["gemm"].items()}
    new, ratio = refreshed(data, {"gemm": slower, "gemm_threads": {}})
    assert ratio == 2.0 and new["gemm"] == slower and "gemm_refreshed" in new["machine"]
    assert new["p2p"] == data["p2p"] and data["counts"] is counts  # the rest kept, input intact
    before, after = Profile.load(_write(tmp_path, data)), Profile.load(_write(tmp_path, new))
    assert after.efficiency() == pytest.approx(before.efficiency()) == pytest.approx(0.8)
    assert after.busy_at(2) == pytest.approx(before.busy_at(2)) == pytest.approx(1.2)
    assert after.gemm_seconds(512, 512, 512, "float32") == pytest.approx(0.005)


def test_calibrate_refresh_gemm_rewrites_only_the_gemm_tables(tmp_path):
    from conftest import PROFILE

    from bench.machine import cores

    old = tmp_path / "old.json"
    old.write_text(json.dumps({**PROFILE, "machine": {"cores": cores(), "ranks": 2}}))
    new = tmp_path / "new.json"
    r = distmm_mpi(2, "calibrate", "--quick", "--refresh-gemm", str(old), "--out", str(new))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the new tables' float32 times over the old: median" in r.stdout
    data = json.loads(new.read_text())
    assert data["p2p"] == PROFILE["p2p"] and data["machine"]["ranks"] == 2
    assert len(data["gemm"]["float32"]) == 27 and all(row[3] > 0 for row in data["gemm"]["float32"])
    assert Profile.load(new).gemm_seconds(512, 512, 512, "float32") > 0
    assert json.loads(old.read_text())["gemm"] == PROFILE["gemm"]  # --out elsewhere: kept
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**PROFILE, "machine": {"cores": cores() + 1}}))
    r = distmm_mpi(2, "calibrate", "--quick", "--refresh-gemm", str(other), timeout=60)
    assert r.returncode == 2 and "calibrate it afresh" in r.stderr
