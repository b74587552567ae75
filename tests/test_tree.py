"""The emulated MN-Core tree: topology parsing, bindings, bound layouts, links, the model."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from algorithms import ALGORITHMS, get
from algorithms.plan import PlanError
from layouts import bind_layout, generate_block, global_matrix, held_indices, owner, parse_layout
from topology import MeshError
from topology.tree import BOARD, LEVELS, bindings, default_binding, parse_binding, parse_topology

SMALL = ("mncore:2,2,2,2", "mncore:2,2,2,1")


def test_parse_topology():
    assert parse_topology("mesh") is None
    board = parse_topology("mncore")
    assert board.names == LEVELS and board.shape == BOARD and board.size == 8192
    assert parse_topology("mncore:2,2,2,2").size == 16
    for bad in ("mncore:2,2", "mncore:2,2,0,2", "mncore:a,b,c,d", "torus"):
        with pytest.raises(MeshError):
            parse_topology(bad)


def _plans(P):
    for name in ALGORITHMS:
        module = get(name)
        for grid in module.grids(P)[:3]:
            try:
                kw = {"fop": grid} if name == "t10" else {"grid": grid}
                yield name, module.plan((24, 16, 32), P, **kw)
            except PlanError:
                continue


def test_bindings_and_parse():
    tree = parse_topology("mncore:2,2,2,2")
    plan = get("cannon").plan((8, 8, 8), 16)
    found = bindings(plan.mesh, tree)
    assert str(found[0]) == "x=L2B+L1B,y=MAB+PE" == str(default_binding(plan.mesh, tree))
    assert len(found) == 6  # choose 2 of 4 levels for x
    b = parse_binding("y=L2B+L1B,x=MAB+PE", plan.mesh, tree)
    assert str(b) == "x=MAB+PE,y=L2B+L1B"
    with pytest.raises(MeshError):
        parse_binding("x=L2B,y=L1B+MAB+PE", plan.mesh, tree)
    with pytest.raises(MeshError):
        parse_binding("x=L2B+L2B,y=MAB+PE", plan.mesh, tree)
    # a refusal quotes the binding as written, and names what is wrong with it
    for text, words in (
        ("x=a=b", "binding 'x=a=b': write axis=LEVEL+LEVEL"),
        ("x=,y=L2B+L1B+MAB+PE", "binding 'x=,y=L2B+L1B+MAB+PE': axis x has size 4"),
        ("z=MAB+PE,y=L2B+L1B", "'z' is not an axis of the mesh (x=4,y=4)"),
        ("x=L2B+L1B,x=MAB+PE", "names axis 'x' twice"),
    ):
        with pytest.raises(MeshError, match=re.escape(words)):
            parse_binding(text, plan.mesh, tree)


@pytest.mark.parametrize("topo", SMALL)
def test_bound_layouts_hold_the_same(topo):
    tree = parse_topology(topo)
    seen = 0
    for name, plan in _plans(tree.size):
        for b in bindings(plan.mesh, tree):
            for lay in (plan.A, plan.B, plan.C):
                bound = bind_layout(lay, b, tree)
                assert parse_layout(str(bound)) == bound, (name, b, str(bound))
                assert set(bound.levels) <= set(LEVELS)
                for r in range(tree.size):
                    tc = tree.coords(r)
                    ac = b.algo_coords(tc, tree)
                    assert b.tree_coords(ac, tree) == tc
                    for step in range(max(1, lay.time_size)):
                        got = held_indices(bound, tc, step)
                        want = held_indices(lay, ac, step)
                        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (
                            name,
                            str(b),
                            str(lay),
                            str(bound),
                            r,
                            step,
                        )
            seen += 1
    assert seen > 5


def test_seed_example_on_the_board():
    board = parse_topology("mncore")
    lay = parse_layout("((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))")
    assert lay.padded_shape == (1024, 512) and lay.block_shape == (8, 8)
    rng = np.random.default_rng(0)
    ref = global_matrix((1024, 512), 5)
    for r in rng.choice(board.size, 40, replace=False):
        c = board.coords(int(r))
        block = generate_block(lay, c, 5)
        rows, cols = held_indices(lay, c)
        assert np.array_equal(block, ref[np.ix_(rows, cols)])
        assert set(rows // 8 % 8) == {c["L1B"]} and set(rows // 64) == {c["L2B"]}
        assert set(cols % 4) == {c["PE"]} and set(cols // 32) == {c["MAB"]}
        i, j = int(rows[3]), int(cols[5])
        assert board.rank(owner(lay, (i, j))) == int(r)


def test_links_and_crossing_levels():
    from topology.links import LinkModel, crossing_level, members_by_level

    tree = parse_topology("mncore:2,2,2,2")
    assert crossing_level(tree, 0, 0) is None
    assert crossing_level(tree, 0, 1) == "PE" and crossing_level(tree, 1, 2) == "MAB"
    assert crossing_level(tree, 3, 4) == "L1B" and crossing_level(tree, 7, 8) == "L2B"
    assert members_by_level(tree, ["MAB", "L2B"]) == {"L2B": 2, "MAB": 1}
    assert members_by_level(tree, LEVELS) == {"L2B": 8, "L1B": 4, "MAB": 2, "PE": 1}
    emu = LinkModel.load("mncore-emu", tree)
    assert [emu.share(lv) for lv in LEVELS] == [8, 4, 2, 1]
    a, bw, _ = emu.params("L2B")
    assert emu.message("L2B", 1000) == pytest.approx(a + 1000 * 8 / bw)
    assert emu.message(None, 1000) == 0
    board = LinkModel.load("mncore", parse_topology("mncore"))
    assert board.share("L2B") == 512 / 8 and board.share("PE") == 1
    costs = [board.message(lv, 1 << 20) for lv in LEVELS]
    assert costs == sorted(costs, reverse=True)  # L2B slowest ... PE fastest
    with pytest.raises(MeshError):
        LinkModel.load("nope", tree)


def test_links_from_file(tmp_path):
    from topology.links import LinkModel

    f = tmp_path / "links.json"
    f.write_text(json.dumps({lv: {"alpha": 1e-6, "bandwidth": 1e9, "lanes": 2} for lv in LEVELS}))
    lm = LinkModel.load(str(f), parse_topology("mncore:2,2,2,2"))
    assert lm.params("MAB") == (1e-6, 1e9, 2) and lm.share("L2B") == 4
    f.write_text(json.dumps({"PE": {"alpha": 1}}))
    with pytest.raises(MeshError):
        LinkModel.load(str(f), parse_topology("mncore:2,2,2,2"))


def test_schedule_levels_on_the_tree():
    from bench.model import level_bytes, schedule

    tree = parse_topology("mncore:2,2,2,2")
    module = get("cannon")
    plan = module.plan((64, 64, 64), 16)
    b = default_binding(plan.mesh, tree)  # x=L2B+L1B, y=MAB+PE
    for rank in range(16):
        events = schedule(module, plan, rank, np.float32, b, tree)
        shifts = [e for e in events if e.kind == "shift"]
        assert shifts and all(
            e.phase_level == ("MAB" if e.axes == ("y",) else "L2B") for e in shifts
        )
        assert sum(level_bytes(events).values()) == sum(e.sent for e in events)
    # rank 0 shifts back by one: to coordinate 3 of each ring, across the ring's top level
    events = schedule(module, plan, 0, np.float32, b, tree)
    assert {e.level for e in events if e.kind == "shift"} == {"L2B", "MAB"}
    # collectives: summa's broadcasts attribute the root's bytes to the levels they cross
    summa = get("summa")
    plan = summa.plan((64, 64, 64), 16)
    events = schedule(summa, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
    roots = [e for e in events if e.kind == "bcast" and e.sent]
    assert roots and all(
        dict(e.level_bytes)
        == {
            lv: e.nbytes * n
            for lv, n in ({"L2B": 2, "L1B": 1} if e.axes == ("x",) else {"MAB": 2, "PE": 1}).items()
        }
        for e in roots
    )


def test_predict_prefers_cheaper_levels(profile_file):
    from bench.model import Profile, predict, schedule
    from topology.links import LinkModel

    prof = Profile.load(profile_file)
    tree = parse_topology("mncore:2,2,2,2")
    links = LinkModel.load("mncore-emu", tree)
    module = get("tesseract")
    plan = module.plan((256, 256, 256), 16)
    secs = {
        str(b): predict(
            schedule(module, plan, 0, "float32", b, tree), prof, "float32", 16, links=links
        ).seconds
        for b in bindings(plan.mesh, tree)
    }
    assert min(secs, key=secs.get) == "x=PE,y=MAB,z=L2B+L1B"
    assert max(secs.values()) > 2 * min(secs.values())


def test_predict_cli_on_the_board(profile_file):
    import time

    from launch import distmm

    t0 = time.perf_counter()
    r = distmm(
        "predict",
        "tesseract",
        "--shape",
        "8192,8192,8192",
        "--topology",
        "mncore",
        "--bind",
        "all",
        "--links",
        "mncore",
        "--profile",
        str(profile_file),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["P"] == 8192 and len(rec["bindings"]) >= 2
    assert all(b["seconds_to_evaluate"] < 3 for b in rec["bindings"])
    assert rec["bindings"][0]["predicted_seconds"] <= rec["bindings"][-1]["predicted_seconds"]
    assert "_L2B" in rec["bindings"][0]["layouts"]["B"]
    assert time.perf_counter() - t0 < 30
    r = distmm(
        "predict",
        "summa25d",
        "--shape",
        "64,64,64",
        "--topology",
        "mncore",
        "--links",
        "mncore",
        "--profile",
        str(profile_file),
    )
    assert r.returncode == 2 and "cannot be bound" in r.stderr
