"""End-to-end runs on the MN-Core tree: the relabelling moves whole subtrees (the cluster's rule
one level deeper), so the kernel's messages cross the levels the tree binding gave them."""

import itertools
import json

import numpy as np
import pytest
from launch import distmm

from algorithms import get
from bench.endtoend import end_to_end, placed_binding
from layouts.endpoints import move_counts
from layouts.relabel import relabel, relabel_pairs
from topology.hierarchy import subtrees_of
from topology.links import LinkModel
from topology.tree import RankOrder, bindings, parse_topology

TREE = parse_topology("mncore:2,2,2,2")


def _crossing(tree, ranks) -> np.ndarray:
    """[d, e]: the index of the outermost level ranks[d] and ranks[e] differ at (-1: none)."""
    ranks = np.asarray(ranks)
    n = ranks.size
    levels = LinkModel.load("flat", tree).pair_levels(np.repeat(ranks, n), np.tile(ranks, n))
    return levels.reshape(n, n)


def _kept_by_level(V, groups, ranks):
    ranks = np.asarray(ranks)
    inside = [int(V[g[:, None] == g[ranks][None, :]].sum()) for g in groups]
    return (*inside, int(V[ranks, np.arange(len(ranks))].sum()))


def _outermost_first(counts) -> tuple[int, ...]:
    """Elements a move sends across the tree's outermost level, across it or the next, ...,
    between ranks at all (job rank = tree rank)."""
    level = _crossing(TREE, range(TREE.size))
    return tuple(int(counts[(level >= 0) & (level <= i)].sum()) for i in range(len(TREE.names)))


def test_subtrees_of_each_level_that_constrains_the_order():
    mncore = subtrees_of(TREE)
    assert [g.tolist() for g in mncore] == [
        [0] * 8 + [1] * 8,
        [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4,
        [r // 2 for r in range(16)],
    ]
    assert [g.tolist() for g in subtrees_of(parse_topology("mncore:1,1,2,2"))] == [[0, 0, 1, 1]]
    assert [g.tolist() for g in subtrees_of(parse_topology("cluster:2,2:round-robin"))] == [
        [0, 1, 0, 1]
    ]
    assert subtrees_of(parse_topology("mncore:1,1,4,1")) == []  # MABs of one PE each
    assert subtrees_of(None) == []


def test_binding_tree_ranks_are_where_each_mesh_rank_runs():
    plan = get("summa3d").plan((8, 8, 8), 8)
    tree = parse_topology("mncore:2,2,2,1")
    for b in bindings(plan.mesh, tree):
        want = [tree.rank(b.tree_coords(plan.mesh.coords(d), tree)) for d in range(8)]
        assert b.tree_ranks(plan.mesh, tree).tolist() == want, str(b)


@pytest.mark.parametrize("seed", range(6))
def test_tree_relabelling_moves_whole_subtrees(seed):
    """On a 2,2,2,2 tree, dense and sparse: every mesh rank pair crosses the level it crossed
    (the order is an automorphism of the tree), the outermost level keeps the most of any
    such order, the result is no worse level by level than the identity, and the sparse one
    keeps what the dense one does at every level."""
    rng = np.random.default_rng(seed)
    groups = subtrees_of(TREE)
    V = rng.integers(1, 1000, (16, 16)) * (rng.random((16, 16)) < 0.3)
    dense = relabel(V, groups=groups)
    job, native = np.nonzero(V)
    sparse = relabel_pairs(job, native, V[job, native], int(V.sum()), 16, 1, groups)
    identity = _kept_by_level(V, groups, range(16))
    for r in (dense, sparse):
        assert sorted(r.ranks) == list(range(16))
        assert (_crossing(TREE, r.ranks) == _crossing(TREE, range(16))).all()
        assert _kept_by_level(V, groups, r.ranks) >= identity
        assert r.bytes_after == int(V.sum()) - _kept_by_level(V, groups, r.ranks)[-1]
    top = groups[0]
    best = max(int(V[top[:, None] == (top[None, :] ^ flip)].sum()) for flip in (0, 1))
    assert _kept_by_level(V, groups, dense.ranks)[0] == best
    assert _kept_by_level(V, groups, sparse.ranks) == _kept_by_level(V, groups, dense.ranks)


def test_an_order_blind_to_the_tree_would_split_its_subtrees():
    """The plain relabelling (most kept on each rank) is free to break the tree's structure,
    and on some of these overlaps it does; the tree's never does."""
    rng = np.random.default_rng(3)
    splits = 0
    for _ in range(10):
        V = rng.integers(1, 9, (16, 16)) * (rng.random((16, 16)) < 0.2)
        plain = relabel(V)
        splits += not (_crossing(TREE, plain.ranks) == _crossing(TREE, range(16))).all()
    assert splits > 0


@pytest.mark.parametrize(
    "algo, grid, spec",
    [
        ("tesseract", (2, 2, 4), "block-cyclic:8"),
        ("cannon25d", (4, 4, 1), "cols"),
        ("summa", (4, 4), "rows"),
        ("t10", (2, 2, 4), "block"),
    ],
)
def test_end_to_end_on_the_tree_starts_from_the_binding(algo, grid, spec, profile_file):
    """For every binding: the mesh starts where the binding lays it (bytes_before is that
    order's), the chosen order keeps every mesh rank pair's crossing level and moves no more
    across the outermost levels (fewer there first: it may move more bytes in all, inside
    nodes), and the RankOrder the run builds its mesh with runs mesh rank d on job rank
    ranks[d], mesh rank 0's kernel predicted as under the binding, level by level."""
    from bench.model import Profile, predict, schedule

    profile, links = Profile.load(profile_file), LinkModel.load("mncore-emu", TREE)

    def kernel(binding):  # mesh rank 0's, on the PE it runs on
        pe = int(binding.tree_ranks(plan.mesh, TREE)[0])
        events = schedule(get(algo), plan, pe, "float32", binding, TREE)
        pred = predict(events, profile, "float32", 16, links=links)
        return pred.seconds, pred.level_bytes

    opts = {} if grid is None else ({"fop": grid} if algo == "t10" else {"grid": grid})
    plan = get(algo).plan((128, 96, 80), 16, **opts)
    saved = 0
    for b in bindings(plan.mesh, TREE):
        start = b.tree_ranks(plan.mesh, TREE)
        e2e = end_to_end(dict.fromkeys("ABC", spec), plan, 4, True, TREE, b)
        assert (_crossing(TREE, e2e.ranks) == _crossing(TREE, start)).all(), str(b)
        moved = sum(move_counts(m, e2e.ranks) for m in e2e.moves)
        before = sum(move_counts(m, tuple(start.tolist())) for m in e2e.moves)
        assert _outermost_first(moved) <= _outermost_first(before), str(b)
        assert e2e.relabelling.bytes_after == int(moved.sum() - np.trace(moved)) * 4
        assert e2e.relabelling.bytes_before == int(before.sum() - np.trace(before)) * 4
        saved += e2e.relabelling.bytes_saved
        order = placed_binding(plan.mesh, e2e)
        assert isinstance(order, RankOrder)
        assert [order.tree_rank(d) for d in range(16)] == list(e2e.ranks)
        assert kernel(order) == kernel(b), str(b)
        off = end_to_end(dict.fromkeys("ABC", spec), plan, 4, False, TREE, b)
        assert off.ranks == tuple(start.tolist()) and off.relabelling.bytes_saved == 0
    if algo == "tesseract":
        assert saved > 0  # block-cyclic pieces: some binding gains from moving subtrees


def test_every_automorphism_of_a_small_tree_is_allowed():
    """The subtree rule on mncore:1,2,2,2 allows exactly the tree's automorphisms (2^7 of the
    8! orders), each keeping every pair's crossing level."""
    tree = parse_topology("mncore:1,2,2,2")
    groups = subtrees_of(tree)
    ident = _crossing(tree, range(8))
    autos = [p for p in itertools.permutations(range(8)) if (_crossing(tree, p) == ident).all()]
    assert len(autos) == 2**7
    for p in autos:  # moving whole subtrees: each level's nodes map onto nodes
        p = np.asarray(p)
        for g in groups:
            assert len({(a, b) for a, b in zip(g, g[p], strict=True)}) == g.max() + 1


def test_predict_and_plan_on_the_tree_from_user_layouts(profile_file):
    """`predict --bind all` and `plan` on the tree price each binding end to end: the kernel
    as before, plus the moves from the layouts given, from where that binding lays the mesh."""
    tree = ("--topology", "mncore:1,1,2,2", "--links", "mncore-emu")
    base = ("--shape", "64,48,32", "--profile", str(profile_file), *tree)
    r = distmm("predict", "summa", "--P", "4", *base, "--bind", "all", "--json",
               "--layouts", "cols")  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["bindings"]
    assert len(rows) > 1
    for row in rows:
        moves = row["predicted_redistribute_in_seconds"] + row["predicted_redistribute_out_seconds"]
        assert moves > 0
        assert row["predicted_seconds"] == pytest.approx(
            row["predicted_multiply_seconds"] + moves + row["predicted_closing_barrier_seconds"]
        )
    native = distmm("predict", "summa", "--P", "4", *base, "--bind", "all", "--json")
    kernels = {b["binding"]: b["predicted_seconds"] for b in json.loads(native.stdout)["bindings"]}
    assert {b["binding"]: b["predicted_multiply_seconds"] for b in rows} == kernels
    r = distmm("plan", "--P", "4", *base, "--layouts", "cols", "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["candidates"][0]
    assert best["binding"] and best["predicted_seconds"] > best["predicted_multiply_seconds"]
    assert "--layouts cols --topology mncore:1,1,2,2 --bind" in best["command"]
