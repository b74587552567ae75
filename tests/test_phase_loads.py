"""A phase's per-rank loads summed per side once and looked up per rank order
(bench/model/phase_loads.py) equal those of its pairs mapped to that order and summed afresh,
and the model's price of a run's moves equals the one pricing every mapped pair; the packed
summing of pairs (layouts.counting.summed) equals np.unique's, and the largest per group
(layouts.counting.group_max) each group's max."""

import json

import numpy as np
import pytest
from conftest import PROFILE

from algorithms import get
from bench.model import Profile, plan_moves, price_moves
from bench.model.phase_loads import PhasePairs
from bench.model.redistribution import _busiest, _per_rank, pairs_seconds, phase_end
from layouts.counting import group_max, piece_counts, summed, summed_pairs
from layouts.endpoints import move_overlaps, user_layouts


def _unique_sums(keys, counts):
    key, inverse = np.unique(keys, return_inverse=True)
    return key, np.bincount(inverse, counts, minlength=key.size).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_summed_equals_unique(seed):
    rng = np.random.default_rng(seed)
    runs = [np.sort(rng.integers(0, 5000, rng.integers(1, 300))) for _ in range(rng.integers(1, 4))]
    for keys in (rng.integers(0, 50, 400), np.concatenate(runs), np.arange(7)[::-1]):
        counts = rng.integers(0, 1 << 20, keys.size)
        got, want = summed(keys, counts), _unique_sums(keys, counts)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    keys = rng.integers(0, 1 << 40, 60) // 2  # a key and a count do not fit one int64
    counts = rng.integers(0, 1 << 30, keys.size)
    got, want = summed(keys, counts), _unique_sums(keys, counts)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    empty = summed(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty[0].size == 0 and empty[1].size == 0


@pytest.mark.parametrize("seed", range(4))
def test_group_max_is_each_groups_max(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    for high in (1 << 20, 1 << 62):
        groups, values = rng.integers(0, n, 300), rng.integers(0, high, 300)
        want = [max(values[groups == g], default=0) for g in range(n)]
        assert group_max(groups, values, n).tolist() == want
    assert np.array_equal(group_max(np.zeros(0, np.int64), np.zeros(0, np.int64), 3), [0, 0, 0])


def _overlaps(P, n, rng):
    """overlap_pairs-like (s, d, count, needed): distinct pairs sorted by s * P + d."""
    keys = np.unique(rng.integers(0, P * P, n))
    return keys // P, keys % P, rng.integers(1, 1000, keys.size), None


@pytest.mark.parametrize("into", [True, False])
@pytest.mark.parametrize("P,moves", [(1, 1), (5, 1), (12, 2), (40, 3)])
def test_per_rank_equals_the_mapped_pairs(P, moves, into):
    rng = np.random.default_rng(P * 10 + moves)
    group = [_overlaps(P, 3 * P, rng) for _ in range(moves)]
    phase = PhasePairs.of(group, into, P)
    for ranks in (np.arange(P), rng.permutation(P)):  # native rank x on job rank ranks[x]
        keys, counts = [], []
        for s, d, c, _ in group:
            src, dst = (s, ranks[d]) if into else (ranks[s], d)
            keys.append(src * P + dst)
            counts.append(c)
        src, dst, count = summed_pairs(keys, counts, P)
        want = _per_rank(src, dst, count, P, src != dst)
        got = phase.per_rank(ranks)
        for x, y in zip(got, want, strict=True):
            assert np.array_equal(np.asarray(x, np.int64), np.rint(y).astype(np.int64))


CASES = [
    ("summa", 6, "block-cyclic:16", (100, 70, 90)),
    ("cannon", 9, "cols", (96, 64, 80)),
    ("t10", 8, "rows", (64, 48, 80)),
    ("summa3d", 8, "block", (70, 50, 60)),
    ("tesseract", 8, "block-cyclic:8", (64, 64, 64)),
]


@pytest.fixture(params=["timed", "pieces", "formula"])
def profile(request, tmp_path):
    """Layout changes timed at each count (priced by their coefficients, with or without a
    cost per piece copied), or not (formulas)."""
    data = dict(PROFILE)
    if request.param != "formula":
        a2av = {"start": 4e-5, "message": 2e-5, "byte": 3e-10, "copy": 1e-10, "timed": []}
        if request.param == "pieces":
            a2av["piece"] = 3e-8
        p2p = {"alpha": 2e-6, "beta": 1e-10, "alpha_large": 5e-6, "beta_large": 1e-10}
        data["counts"] = [
            {"ranks": g, **p2p, "collective_factor": {}, "alltoallv": a2av} for g in (1, 2)
        ]
    f = tmp_path / "profile.json"
    f.write_text(json.dumps(data))
    return Profile.load(f)


def _pieces(moves, pi, P: int) -> np.ndarray:
    """Pieces each job rank copies (layouts.counting.piece_counts), native rank x on pi[x]."""
    out = np.zeros(P, np.int64)
    for m in moves:
        sent, got = piece_counts(m.src, m.src_mesh, m.dst, m.dst_mesh)
        job, native = (sent, got) if m.into else (got, sent)
        out += job
        np.add.at(out, pi, native)
    return out


@pytest.mark.parametrize("relabel", [True, False])
@pytest.mark.parametrize("algo,P,layouts,shape", CASES)
def test_price_equals_pricing_every_mapped_pair(algo, P, layouts, shape, relabel, profile):
    users = user_layouts(dict.fromkeys("ABC", layouts), shape, P)
    module = get(algo)
    for grid in module.grids(P)[:3]:
        plan = module.plan(shape, P, **{module.grid_option.name: tuple(grid)})
        moves = plan_moves(users, plan)
        overlaps = move_overlaps(moves)
        got = price_moves(moves, P, profile, 4, P, relabel, overlaps=overlaps)
        pi = np.arange(P) if got.ranks is None else np.asarray(got.ranks)
        keys, counts, words = {True: [], False: []}, {True: [], False: []}, 0
        for m, (s, d, c, _) in zip(moves, overlaps, strict=True):
            src, dst = (s, pi[d]) if m.into else (pi[s], d)
            keys[m.into].append(src * P + dst)
            counts[m.into].append(c)
            off = src != dst
            words += int(_busiest(src[off], dst[off], c[off], P)[1].max(initial=0))
        seconds = {}
        for into in (True, False):
            seconds[into] = 0.0
            if keys[into]:
                src, dst, count = summed_pairs(keys[into], counts[into], P)
                pieces = _pieces([m for m in moves if m.into == into], pi, P)
                seconds[into] = pairs_seconds(src, dst, count, P, profile, 4, P, pieces=pieces)
        assert got.words == words
        end, held = phase_end(P, profile, P)  # a phase's moves priced so hold its barrier
        ends = [0.0 if held and seconds[into] > 0 else end for into in (True, False)]
        assert got.redistribute_in == pytest.approx(seconds[True] + ends[0], rel=1e-12)
        assert got.redistribute_out == pytest.approx(seconds[False], rel=1e-12)
        assert got.closing == ends[1]
