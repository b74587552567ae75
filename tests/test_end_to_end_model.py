"""End-to-end pricing (serial): the calibrated all-to-all, redistribution in `distmm predict`
and `distmm plan` from the user's layouts, relabelling, and the words/bound column."""

import json
import math

import numpy as np
import pytest
from conftest import PROFILE, every_grid, pieces_profile
from launch import distmm, distmm_mpi

from algorithms import get
from bench.model import Profile, move_seconds, price_moves, transfer_seconds
from bench.model.bound import memory_independent_bound, words_bound
from bench.model.fits import sharing_scale
from layouts.endpoints import relabelling

SWAPPED = "((2_c, 32), (2_r, 32))@r=2,c=2"  # 2 x 2 blocks, block (i, j) on rank (j, i)


def _profile(tmp_path, **factor) -> Profile:
    f = tmp_path / "profile.json"
    f.write_text(json.dumps({**PROFILE, "collective_factor": factor}))
    return Profile.load(f)


@pytest.mark.parametrize("per_pair", [16, 1 << 16])  # below and above the eager limit
def test_uniform_redistribution_costs_the_calibrated_alltoall(tmp_path, per_pair):
    prof = _profile(tmp_path, alltoall=1.7)
    g, itemsize = 6, 4
    counts = np.full((g, g), per_pair, np.int64)
    network = prof.collective("alltoall", g * per_pair * itemsize, g)
    packing = 2 * g * per_pair * itemsize / prof.copy_bandwidth  # pack all sent, unpack all got
    want = (network + packing) * prof.slowdown(3)
    assert transfer_seconds(counts, itemsize, prof, 3) == pytest.approx(want, rel=1e-12)
    assert network > 0


def test_alltoall_factor_read_from_the_profile(tmp_path):
    counts = np.full((4, 4), 1 << 14, np.int64)
    plain = transfer_seconds(counts, 4, _profile(tmp_path), 1)  # no key: factor 1
    doubled = transfer_seconds(counts, 4, _profile(tmp_path, alltoall=2.0), 1)
    packing = 2 * 4 * (1 << 14) * 4 / _profile(tmp_path).copy_bandwidth
    assert doubled - packing == pytest.approx(2 * (plain - packing))


@pytest.mark.parametrize("pieces", [False, True])
def test_sparse_pricing_matches_the_house_counts(profile_file, tmp_path, pieces):
    prof = pieces_profile(profile_file, tmp_path) if pieces else Profile.load(profile_file)
    for P, spec, shape in ((6, "block-cyclic:16", (100, 70, 90)), (8, "cols", (96, 64, 80))):
        for name, g, mv in every_grid(P, spec, shape):
            price = price_moves(mv, P, prof, 4, P)
            dense = move_seconds(mv, price.ranks, prof, 4, P)
            assert price.redistribute_in == pytest.approx(dense["redistribute_in"], rel=1e-12)
            assert price.redistribute_out == pytest.approx(dense["redistribute_out"], rel=1e-12)
            assert price.closing == dense["closing_barrier"]
            assert price.bytes_saved == _dense_relabelling(mv, P, 4).bytes_saved, (name, g)


def _dense_relabelling(all_moves, P: int, itemsize: int, groups=()):
    """The reference: layouts.relabel.relabel on the P x P volumes kept in place."""
    from layouts.counting import overlap_counts
    from layouts.relabel import relabel

    kept = np.zeros((P, P), np.int64)  # [job rank, native mesh rank]
    needed = np.zeros(P, np.int64)
    for m in all_moves:
        H, need = overlap_counts(m.src, m.src_mesh, m.dst, m.dst_mesh)
        kept += H if m.into else H.T  # out: H[native s, user t], kept when s runs on t
        needed += need
    return relabel(kept, needed, itemsize, groups)


def _predict(profile_file, *extra):
    base = ("predict", "summa", "--shape", "64,64,64", "--grid", "2,2")
    return distmm(*base, "--profile", str(profile_file), "--json", *extra)


def test_predict_end_to_end(profile_file):
    recs = {}
    for layouts in ("native", "cols"):
        r = _predict(profile_file, "--layouts", layouts)
        assert r.returncode == 0, r.stderr
        recs[layouts] = json.loads(r.stdout)
    native, cols = recs["native"], recs["cols"]
    assert native["predicted_seconds"] == native["predicted_multiply_seconds"]
    assert native["predicted_redistribute_in_seconds"] == 0
    assert cols["predicted_multiply_seconds"] == native["predicted_multiply_seconds"]
    assert cols["predicted_redistribute_in_seconds"] > 0
    assert cols["predicted_redistribute_out_seconds"] > 0
    # the barrier closing an end-to-end repetition after the moves out (one also ends the
    # phase in, priced with it; the kernel's ends the multiplication)
    assert cols["predicted_closing_barrier_seconds"] > 0
    assert cols["predicted_seconds"] == pytest.approx(
        cols["predicted_multiply_seconds"]
        + cols["predicted_redistribute_in_seconds"]
        + cols["predicted_redistribute_out_seconds"]
        + cols["predicted_closing_barrier_seconds"]
    )
    r = distmm("predict", "summa", "--shape", "64,64,64", "--grid", "2,2", "--profile",
               str(profile_file), "--layouts", "block")  # fmt: skip
    assert r.returncode == 0 and "end-to-end" in r.stdout and "redistribute in" in r.stdout


@pytest.mark.timeout(120)
def test_a_run_predicts_what_predict_does(profile_file):
    """`distmm run --profile` prices its moves as `predict` and `plan` do (from the sparse
    overlaps, with the order the run used: worked out on rank 0 and broadcast)."""
    args = ("summa", "--shape", "48,40,56", "--layouts", "cols", "--profile", str(profile_file))
    r = distmm_mpi(4, "run", *args, "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)
    r = distmm("predict", *args, "--grid", "2,2", "--ranks-per-node", "4", "--json")
    assert r.returncode == 0, r.stderr
    alone = json.loads(r.stdout)
    keys = [k for k in alone if k.startswith("predicted_") and k.endswith("_seconds")]
    assert len(keys) == 5 and run["predicted_redistribute_in_seconds"] > 0
    for k in keys:
        assert run[k] == pytest.approx(alone[k], rel=1e-12), k


def test_relabelling_a_permuted_native_layout_moves_nothing(profile_file):
    r = _predict(profile_file, "--layouts", SWAPPED)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    barrier = rec["predicted_closing_barrier_seconds"]  # the phase in ends with one too
    assert barrier > 0 and rec["predicted_redistribute_in_seconds"] == barrier
    assert rec["predicted_redistribute_out_seconds"] == 0
    assert rec["relabel_bytes_saved"] > 0
    r = _predict(profile_file, "--layouts", SWAPPED, "--no-relabel")
    rec = json.loads(r.stdout)
    assert rec["predicted_redistribute_in_seconds"] > barrier and rec["relabel_bytes_saved"] == 0


def test_predict_says_an_order_saving_too_little_was_not_matched(profile_file):
    """From rows into SUMMA 1x3 no order saves more than 0.4% of the bytes moved in order
    (under layouts.endpoints.WORTH_MATCHING): `predict` keeps the order laid, as `run` does,
    and says how much another could save at most (text and JSON)."""
    args = ("predict", "summa", "--shape", "96,64,80", "--P", "3", "--layouts", "rows")
    r = distmm(*args, "--profile", str(profile_file))
    assert r.returncode == 0, r.stderr
    assert "(not relabelled: no order saves more than 208 B)" in r.stdout
    rec = json.loads(distmm(*args, "--profile", str(profile_file), "--json").stdout)
    assert rec["relabel_saved_at_most"] == 208 and rec["relabel_bytes_saved"] == 0
    rec = json.loads(_predict(profile_file, "--layouts", SWAPPED).stdout)
    assert rec["relabel_saved_at_most"] is None and rec["relabel_bytes_saved"] > 0


@pytest.mark.parametrize(
    "extra",
    [
        ("--layouts", "diagonal"),
        ("--layout-b", "((3_r, 22), (64))@r=3"),
    ],
)
def test_bad_layouts_one_line(profile_file, extra):
    for cmd in (
        ("predict", "summa", "--grid", "2,2"),
        ("plan", "--P", "4"),
    ):
        r = distmm(*cmd, "--shape", "64,64,64", "--profile", str(profile_file), *extra)
        assert r.returncode == 2, (cmd, extra, r.stdout)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _plan(profile_file, *extra):
    r = distmm("plan", "--shape", "2048,2048,2048", "--P", "8", "--profile", str(profile_file),
               *extra)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r


def test_plan_ranks_end_to_end(profile_file):
    native = json.loads(_plan(profile_file, "--layouts", "native", "--json").stdout)
    block = json.loads(_plan(profile_file, "--json").stdout)  # block is plan's default
    assert block["layouts"] == "block" and native["layouts"] == "native"
    for c in native["candidates"]:
        assert c["predicted_seconds"] == c["predicted_multiply_seconds"]
    best_n, best_b = native["recommended"], block["recommended"]
    assert best_b["predicted_seconds"] >= best_b["predicted_multiply_seconds"]
    assert any(  # some candidate pays for moving the blocks
        c["predicted_seconds"] > c["predicted_multiply_seconds"] for c in block["candidates"]
    )
    assert "--layouts block" in best_b["command"] and "--layouts" not in best_n["command"]
    exact = [c["predicted_seconds"] for c in block["candidates"] if c["predicted_seconds"]]
    assert exact == sorted(exact) and len(exact) >= 15
    for c in block["candidates"]:  # never priced ones are no better than every priced one
        assert c["predicted_seconds"] or c["predicted_seconds_at_least"] >= exact[14]
    text = _plan(profile_file).stdout
    assert "words/bound" in text and "e2e [ms]" in text and "kernel [ms]" in text
    assert "3 (MKN/P)^(2/3)" in text
    row = text.splitlines()[3].split()  # the first candidate: a ratio column of >= 1
    assert float(row[-2 if row[-1] == "*" else -1]) >= 1.0


def test_words_bounds():
    n, P = 8192, 4096
    square = memory_independent_bound((n, n, n), P)
    assert square == pytest.approx(3 * (n**3 / P) ** (2 / 3) - 3 * n * n / P)
    # the 1-D / 2-D / 3-D cases meet at their boundaries (d1/d2 = 16, d1 d2/d3^2 = 64)
    shape = (8192, 512, 128)
    for P in (16, 64):
        lo, hi = (memory_independent_bound(shape, P * f) for f in (1 - 1e-9, 1 + 1e-9))
        assert lo == pytest.approx(hi, rel=1e-6)
    assert words_bound((n, n, n), 1, 1e9) == 0
    two_d = words_bound((n, n, n), 64, 3 * n * n / 64)  # a 2-D algorithm's memory
    assert two_d >= n * n / math.sqrt(64) / (2 * math.sqrt(6)) - 3 * n * n / 64


def test_sparse_relabelling_on_a_cluster_matches_the_dense_one():
    """With ranks on nodes both relabellings reach the same elements between nodes and kept."""
    from layouts.endpoints import move_counts
    from topology.hierarchy import cluster_mesh, subtrees_of

    def cost(mv, ranks, nodes):
        counts = sum(move_counts(m, ranks) for m in mv)
        return int(counts[nodes[:, None] != nodes[None, :]].sum()), int(np.trace(counts))

    for P, spec, shape, tree in (
        (8, "block-cyclic:16", (100, 70, 90), cluster_mesh(2, 4)),
        (8, "cols", (96, 64, 80), cluster_mesh(4, 2, "round-robin")),
        (6, "rows", (60, 66, 72), cluster_mesh(3, 2)),
    ):
        (nodes,) = subtrees_of(tree)
        for name, g, mv in every_grid(P, spec, shape):
            sparse = relabelling(mv, P, 4, [nodes])
            dense = _dense_relabelling(mv, P, 4, [nodes])
            assert cost(mv, sparse.ranks, nodes) == cost(mv, dense.ranks, nodes), (name, g)
            assert sparse.bytes_after == dense.bytes_after


def _measured(g, costs, cores=2):
    """A count entry whose layout changes took exactly start + message x M + byte x B + copy
    x C + piece x N, each grown as the ranks share the cores (bench.model.fits.sharing_scale:
    messages with the ranks per core, the rest with its square)."""
    scaled = [k * s for k, s in zip(costs, sharing_scale(g / cores), strict=True)]
    rows = [
        [m, b, c, n] for m in (1, g - 1) for b in (1e5, 4e6) for c in (2e5, 9e6) for n in (0, 5e4)
    ]
    rows = [[*r, scaled[0] + sum(k * x for k, x in zip(scaled[1:], r, strict=True))] for r in rows]
    return {"ranks": g, "efficiency": 1.0, "alltoallv": {"timed": rows}, "yielding": True}


def test_measured_layout_changes_price_redistributions(tmp_path):
    from bench.model.fits import fit_alltoallv
    from bench.model.redistribution import loads

    costs = (1e-4, 3e-5, 2e-10, 1e-10, 4e-8)
    rows = _measured(9, costs, cores=9)["alltoallv"]["timed"]
    assert list(fit_alltoallv(rows).values()) == pytest.approx(costs)
    # rows timed before pieces were counted fit without them
    old = [[*r[:3], r[4] - costs[4] * r[3]] for r in rows]
    assert list(fit_alltoallv(old).values()) == pytest.approx([*costs[:4], 0.0])
    # as fitted at 2 by a calibrate that counted no pieces
    two = {"start": 5e-5, "message": 1e-5, "byte": 1e-10, "copy": 5e-11, "piece": 0.0}
    p2p = {"alpha": 2e-6, "beta": 1e-10, "alpha_large": 5e-6, "beta_large": 1e-10}
    counts = [{"ranks": 2, **p2p, "collective_factor": {}, "alltoallv": {**two, "timed": []}}]
    counts += [_measured(g, costs) for g in (4, 8)]
    f = tmp_path / "measured.json"
    f.write_text(json.dumps({**PROFILE, "counts": counts}))
    prof = Profile.load(f)
    assert prof.at(2).alltoallv == two
    # beyond the cores, one fit over the counts measured there, grown with g / cores (messages)
    # and its square (the rest) up to the largest (8), and as g past it
    for g in (3, 8, 16):
        s, r = min(g, 8) / 2, max(g / 8, 1.0)
        want = [c * s**k * r for c, k in zip(costs, (2, 1, 2, 2, 2), strict=True)]
        assert list(prof.at(g).alltoallv.values()) == pytest.approx(want)
    # a uniform exchange: every rank's messages, bytes sent, and bytes packed and unpacked
    g, each, itemsize = 8, 1000, 4
    uniform = np.full((g, g), each, np.int64)
    src, dst = np.nonzero(uniform)
    assert loads(src, dst, uniform[src, dst], g, itemsize, 4.0) == (
        g - 1,
        (g - 1) * each * itemsize,
        2 * g * each * itemsize,
        0.0,
    )
    sent, copied = (g - 1) * each * itemsize, 2 * g * each * itemsize
    s = g / 2
    want = (costs[0] + costs[2] * sent + costs[3] * copied) * s * s + costs[1] * (g - 1) * s
    assert transfer_seconds(uniform, itemsize, prof, g) == pytest.approx(want)
    # and 1000 pieces copied on every rank
    pieces = np.full(g, 1000)
    with_pieces = transfer_seconds(uniform, itemsize, prof, g, pieces=pieces)
    assert with_pieces == pytest.approx(want + costs[4] * 1000 * s * s)
    # one rank sending to one other: that rank alone on a core, not slowed by the idle ones
    lone = np.zeros((g, g), np.int64)
    lone[0, 1] = 1 << 20
    assert loads([0], [1], [1 << 20], g, 4, 4.0) == (0.25, 1 << 20, 1 << 20, 0.0)
    want = (costs[0] + (costs[2] + costs[3]) * (1 << 20)) * s * s + costs[1] * 0.25 * s
    assert transfer_seconds(lone, 4, prof, g) == pytest.approx(want)
    # a profile with no count above the cores (`-n 2` on 2 cores, no --up-to): the largest
    # count's coefficients, grown as g / cores (once priced as if every rank had its own core)
    f.write_text(json.dumps({**PROFILE, "counts": counts[:1]}))
    for g in (4, 16):
        assert Profile.load(f).at(g).alltoallv == pytest.approx(
            {k: v * g / 2 for k, v in two.items()}
        )


def test_each_count_above_the_cores_priced_at_its_own_level(tmp_path):
    """Counts above the cores measured at different speeds (4 at 0.8x the law, 8 at 1.5x):
    one fit over both gives how the terms grow, each count's median row priced as it took."""
    costs = (1e-4, 3e-5, 2e-10, 1e-10, 4e-8)
    counts = {}
    for g, level in ((4, 0.8), (8, 1.5)):
        counts[g] = _measured(g, costs)
        for row in counts[g]["alltoallv"]["timed"]:
            row[-1] *= level
    f = tmp_path / "levels.json"
    f.write_text(json.dumps({**PROFILE, "counts": list(counts.values())}))
    prof = Profile.load(f)

    def ratios(g: int) -> list[float]:
        c = prof.at(g).alltoallv
        rows = counts[g]["alltoallv"]["timed"]
        return [r[-1] / np.dot([c[k] for k in c], [1.0, *r[:-1]]) for r in rows]

    for g in (4, 8):
        assert np.median(ratios(g)) == pytest.approx(1.0)
    # the one fit's terms (grown as fits.sharing_scale) times a level: the counts' levels
    # 1.5 / 0.8 apart, linear between them, the largest's past it (the terms grown as g)
    level = {
        g: np.array(list(prof.at(g).alltoallv.values())) / sharing_scale(g / 2) for g in (4, 6, 8)
    }
    assert level[8] / level[4] == pytest.approx(np.full(5, 1.5 / 0.8), rel=0.01)
    assert level[6] == pytest.approx((level[4] + level[8]) / 2)
    assert list(prof.at(16).alltoallv.values()) == pytest.approx(2 * level[8] * sharing_scale(4))


def test_a_count_measured_in_a_spell_is_priced_as_its_neighbours(tmp_path):
    """Counts 3-9 above 2 cores, the odd ones 1.6x the even ones (they share the cores
    unevenly) and 6 timed in a slow spell (3x): 6 is priced at the nearer of 4 and 8, the odd
    counts' own level stays theirs, and so do the counts at the ends (3, 4, 8, 9), whatever
    they measured."""
    from bench.model.fits import sharing_moves, steady_levels

    costs = (1e-4, 3e-5, 2e-10, 1e-10, 4e-8)
    want = {3: 1.6, 4: 1.0, 5: 1.6, 6: 3.0, 7: 1.6, 8: 1.1, 9: 5.0}
    counts = []
    for g, level in want.items():
        counts.append(_measured(g, costs))
        for row in counts[-1]["alltoallv"]["timed"]:
            row[-1] *= level
    unit, gs, levels, measured = sharing_moves(counts, 2)
    assert gs == list(want)
    ratio = np.array(levels) / levels[1]  # against 4's
    assert ratio == pytest.approx([1.6, 1.0, 1.6, 1.1, 1.6, 1.1, 5.0], rel=0.01)
    assert np.array(measured) / measured[1] == pytest.approx(list(want.values()), rel=0.01)
    f = tmp_path / "spell.json"
    f.write_text(json.dumps({**PROFILE, "counts": counts}))
    prof = Profile.load(f)
    assert prof.at(6).alltoallv["start"] / sharing_scale(3)[0] == pytest.approx(
        prof.at(8).alltoallv["start"] / sharing_scale(4)[0]
    )
    # within a factor of fits.SPELL (1.75) of the nearer neighbour: kept as measured
    assert steady_levels([4, 6, 8], [1.0, 2.0, 1.2], 2) == [1.0, 2.0, 1.2]
    assert steady_levels([4, 6, 8], [1.0, 0.6, 1.2], 2) == [1.0, 0.6, 1.2]
    assert steady_levels([4, 6, 8], [1.0, 0.5, 1.2], 2) == [1.0, 1.0, 1.2]
    assert steady_levels([4, 6, 8], [1.0, 2.2, 1.2], 2) == [1.0, 1.2, 1.2]


def test_plan_table_columns_never_run_together():
    from bench.plan_view import candidate_table
    from bench.planner import Candidate

    plan = get("t10").plan((8192, 8192, 8192), 8192, fop=(16, 32, 16))
    c = Candidate("t10", {"fop": (16, 32, 16), "pace": 1}, True, plan, seconds=964.0, kernel=600.0)
    c.bound, c.words = 1.0, 2
    row = candidate_table([c]).splitlines()[1].split()
    assert row[6:8] == ["600000.000", "964000.000"]  # kernel and e2e [ms]


def test_plan_into_a_closed_pipe_stops_quietly(profile_file):
    """`distmm plan ... | head -1`: no traceback when the reader has left."""
    import subprocess
    import sys

    argv = ["plan", "--shape", "2048,2048,2048", "--P", "8", "--profile", str(profile_file)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # the reader leaves before the table is written
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and b"Traceback" not in err and b"BrokenPipe" not in err, err
