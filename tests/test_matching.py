"""The relabelling's bipartite matchings (layouts.matching): maximum, valid, on any pairs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from layouts.matching import max_matching, max_weight_matching


def _check_maximum(rows, cols, P, out) -> None:
    """``out`` matches rows to columns they pair with, no column twice, as many as scipy's
    Hopcroft-Karp finds (it ends on these small graphs)."""
    matched = np.flatnonzero(out >= 0)
    pairs = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert all((int(r), int(out[r])) in pairs for r in matched)
    assert np.unique(out[matched]).size == matched.size
    graph = coo_matrix((np.ones(rows.size), (rows, cols)), shape=(P, P)).tocsr()
    assert matched.size == (maximum_bipartite_matching(graph, perm_type="column") >= 0).sum()


@pytest.fixture(params=["small", "cut", "twins", "alone"])
def twins(request, monkeypatch):
    """Every way: in Python as for few pairs (or begun so, its step budget spent at once), or
    by a flow with twins looked for on every graph, or never."""
    import layouts.matching as matching

    small = request.param in ("small", "cut")
    monkeypatch.setattr(matching, "_SMALL_PAIRS", 1 << 62 if small else -1)
    monkeypatch.setattr(matching, "_SMALL_STEPS", 0 if request.param == "cut" else 1 << 62)
    monkeypatch.setattr(matching, "_TWINS_FROM", 0 if request.param == "twins" else 1 << 62)
    return request.param


@pytest.fixture(params=["dense", "cut", "sparse"])
def dense(request, monkeypatch):
    """max_weight_matching every way: a dense assignment here (few ranks; or begun so, its step
    budget spent at once), or SciPy's sparse one."""
    import layouts.matching as matching

    monkeypatch.setattr(matching, "_SMALL_RANKS", 0 if request.param == "sparse" else 1 << 62)
    monkeypatch.setattr(matching, "_DENSE_STEPS", 0 if request.param == "cut" else 1 << 62)
    return request.param


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("P", [1, 40, 64])
def test_max_matching_is_a_maximum_matching(seed, P, twins):
    """On random pairs (some twice), some rows over few columns, so some rows must stay
    unmatched."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, P, 300)
    cols = rng.integers(0, -(-P // 3), 300) * 3 % P  # a third of the columns
    _check_maximum(rows, cols, P, max_matching(rows, cols, P))


@pytest.mark.parametrize("seed", range(6))
def test_twins_match_as_many(seed, twins):
    """Ranks with the same partners (twins) flow as one group: on graphs made of groups of
    twin rows joined to groups of twin columns (all to all), groups of unequal sizes, some
    ranks in no pair, and a few single pairs between them that no group shares, the matching is
    still maximum and valid."""
    rng = np.random.default_rng(seed)
    P = 96
    row_group = rng.integers(-1, 7, P)  # -1: in no group
    col_group = rng.integers(-1, 5, P)
    joined = rng.random((7, 5)) < 0.35
    r, c = np.nonzero(
        (row_group[:, None] >= 0)
        & (col_group[None, :] >= 0)
        & joined[row_group[:, None], col_group[None, :]]
    )
    extra = rng.integers(0, P, (2, seed * 3))  # breaks some twins apart
    rows, cols = np.concatenate([r, extra[0]]), np.concatenate([c, extra[1]])
    _check_maximum(rows, cols, P, max_matching(rows, cols, P))


def test_a_hash_collision_falls_back_to_every_rank_alone(monkeypatch):
    """Were two ranks of different partners taken for twins (forced here: every rank of the
    same number of partners one group), the groups' matching pairs ranks that do not pair, and
    the flow runs again without groups: still maximum and valid."""
    import layouts.matching as matching

    def careless(a, b, P):
        degree = np.bincount(a, minlength=P)
        ranks = np.flatnonzero(degree)
        order = np.argsort(degree[ranks], kind="stable")
        new = np.append(True, np.diff(degree[ranks][order]) != 0)
        group = np.empty(ranks.size, np.int64)
        group[order] = np.cumsum(new) - 1
        of = np.full(P, -1, np.int64)
        of[ranks] = group
        calls.append(P)
        return of, ranks[order], np.bincount(group)

    calls = []
    monkeypatch.setattr(matching, "_twins", careless)
    monkeypatch.setattr(matching, "_TWINS_FROM", 0)
    monkeypatch.setattr(matching, "_SMALL_PAIRS", -1)
    rows, cols = np.array([0, 1, 2, 2]), np.array([1, 0, 2, 3])  # 0, 1 one partner, not the same
    grouped = matching._by_twins(rows, cols, 4)
    assert grouped[0] == 0 and grouped[1] == 1  # the groups' answer pairs 0 and 1 wrongly
    calls.clear()
    _check_maximum(rows, cols, 4, max_matching(rows, cols, 4))
    assert calls == [4, 4]  # grouped once, then alone


def test_max_matching_of_no_pairs():
    assert max_matching(np.array([], np.int64), np.array([], np.int64), 3).tolist() == [-1] * 3


def test_max_weight_matching_on_few_of_many_ranks(dense):
    """Its graph is over the ranks its pairs name (a residual names few of P): the weight it
    keeps is linear_sum_assignment's on the dense matrix, its pairs are pairs given, each rank
    used once."""
    rng = np.random.default_rng(8)
    P = 64
    for _ in range(10):
        jobs = rng.choice(P, 9, replace=False)
        natives = rng.choice(P, 6, replace=False)
        V = np.zeros((P, P), np.int64)
        V[np.ix_(jobs, natives)] = rng.integers(0, 9, (9, 6)) * (rng.random((9, 6)) < 0.5)
        job, native = np.nonzero(V)
        got_job, got_native = max_weight_matching(job, native, V[job, native])
        assert len(set(got_job.tolist())) == got_job.size
        assert len(set(got_native.tolist())) == got_native.size
        assert (V[got_job, got_native] > 0).all()
        rows, cols = linear_sum_assignment(V, maximize=True)
        assert V[got_job, got_native].sum() == V[rows, cols].sum()


def test_max_weight_matching_lists_the_spares_first(monkeypatch):
    """Its graph lists first, in every row, the column of the perfect matching of spares, so
    the Hopcroft-Karp check scipy runs before its assignment matches every row in its first
    greedy pass (no augmenting path to search, whatever the pairs)."""
    import scipy.sparse.csgraph as csgraph
    from scipy.sparse import csr_array

    import layouts.matching as matching

    real, seen = csgraph.min_weight_full_bipartite_matching, []

    def record(graph, maximize):
        seen.append(graph)
        return real(graph, maximize=maximize)

    monkeypatch.setattr(csgraph, "min_weight_full_bipartite_matching", record)
    monkeypatch.setattr(matching, "_SMALL_RANKS", 0)
    rng = np.random.default_rng(2)
    key = np.unique(rng.integers(0, 30, 200) * 20 + rng.integers(0, 20, 200))
    max_weight_matching(key // 20, key % 20, rng.integers(1, 9, key.size))
    (graph,) = seen
    assert isinstance(graph, csr_array)
    first = graph.indices[graph.indptr[:-1]]
    assert sorted(first.tolist()) == list(range(graph.shape[0]))  # a perfect matching


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 9), (9, 5), (30, 30), (64, 40)])
def test_dense_assignment_is_maximum(shape):
    """The Hungarian method here (layouts.matching._assignment) keeps as much weight as SciPy's
    linear_sum_assignment, every row on its own column, on matrices with many ties."""
    from layouts.matching import _assignment

    rng = np.random.default_rng(sum(shape))
    for _ in range(5):
        weight = rng.integers(0, 4, shape).astype(float)
        if shape[0] > shape[1]:
            rows, cols = _assignment(weight.T), np.arange(shape[1])
        else:
            rows, cols = np.arange(shape[0]), _assignment(weight)
        assert np.unique(rows).size == rows.size and np.unique(cols).size == cols.size
        best = linear_sum_assignment(weight, maximize=True)
        assert weight[rows, cols].sum() == weight[best].sum()


def test_small_matchings_need_no_scipy(profile_file):
    """A plan at a few ranks relabels without importing SciPy (its import cost more than the
    plan's matchings, on every rank of a run from the user's layouts)."""
    code = (
        "import sys; from bench.cli import main; "
        f"main(['plan', '--shape', '300,520,410', '--P', '9', '--layouts', 'cols', "
        f"'--profile', '{profile_file}']); "
        "assert not [m for m in sys.modules if m.startswith('scipy')], 'scipy imported'"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
