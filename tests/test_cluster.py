"""Clusters as machine hierarchies: parsing, placement, crossing levels, network presets."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import get
from topology import MeshError
from topology.hierarchy import levels_of
from topology.links import LinkModel, crossing_level
from topology.networks import NETWORKS
from topology.tree import RankOrder, bindings, default_binding, parse_binding, parse_topology


def test_parse_cluster():
    block = parse_topology("cluster:4,2")
    assert block.axes == (("node", 4), ("local", 2)) and block.size == 8
    assert parse_topology("cluster:4,2:block") == block
    rr = parse_topology("cluster:4,2:round-robin")
    assert rr.axes == (("local", 2), ("node", 4)) and levels_of(rr) == ("node", "local")
    for bad in ("cluster:4", "cluster:4,0", "cluster:a,b", "cluster:4,2:scatter"):
        with pytest.raises(MeshError):
            parse_topology(bad)


def test_placement_decides_the_crossing_level():
    block, rr = parse_topology("cluster:4,2"), parse_topology("cluster:4,2:round-robin")
    assert crossing_level(block, 0, 1) == "local" and crossing_level(block, 1, 2) == "node"
    assert crossing_level(rr, 0, 1) == "node" and crossing_level(rr, 0, 4) == "local"
    assert crossing_level(block, 3, 3) is None


def test_rank_order_is_the_clusters_placement():
    tree = parse_topology("cluster:4,2")
    plan = get("summa").plan((64, 64, 64), 8, grid=(2, 4))
    (b,) = bindings(plan.mesh, tree)
    assert isinstance(b, RankOrder) and str(b) == "ranks"
    assert default_binding(plan.mesh, tree) == b == parse_binding("ranks", plan.mesh, tree)
    with pytest.raises(MeshError):
        parse_binding("x=node,y=local", plan.mesh, tree)
    for r in range(8):
        coords = plan.mesh.coords(r)
        assert b.tree_coords(coords, tree) == tree.coords(r)
        assert b.algo_coords(tree.coords(r), tree) == coords


def test_schedule_levels_on_a_cluster():
    from bench.model import level_bytes, schedule

    summa = get("summa")
    plan = summa.plan((64, 64, 64), 8, grid=(2, 4))  # rank = 4x + y; node = rank // 2
    for topo, y_levels in (("cluster:4,2", {"node": 2, "local": 1}), ("cluster:8,1", None)):
        tree = parse_topology(topo)
        b = default_binding(plan.mesh, tree)
        events = schedule(summa, plan, 0, np.float32, b, tree)
        roots = [e for e in events if e.kind == "bcast" and e.sent]
        assert roots and all(e.phase_level == "node" for e in roots)
        for e in roots:
            if e.axes == ("y",) and y_levels:
                assert dict(e.level_bytes) == {lv: e.nbytes * n for lv, n in y_levels.items()}
        assert sum(level_bytes(events).values()) == sum(e.sent for e in events)
    # two ranks per node, one node per row of 2: a row's broadcast stays inside its node
    tree = parse_topology("cluster:4,2")
    plan = summa.plan((64, 64, 64), 8, grid=(4, 2))
    events = schedule(summa, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
    assert {e.phase_level for e in events if e.kind == "bcast" and e.axes == ("y",)} == {"local"}


def test_network_presets():
    tree = parse_topology("cluster:4,2")
    for name, (alpha, bw, lanes) in NETWORKS.items():
        lm = LinkModel.load(name, tree)
        assert lm.params("node") == (alpha, bw, lanes) and lm.params("local") is None
        assert lm.share("node") == 2 and lm.models("node") and not lm.models("local")
        assert lm.message("node", 10**6) == pytest.approx(alpha + 10**6 * 2 / bw)
        assert lm.message("local", 10**6) == 0  # not emulated; the model uses the profile
    fast = [LinkModel.load(n, tree).message("node", 1 << 24) for n in NETWORKS]
    assert fast == sorted(fast, reverse=True)  # 1GbE slowest ... NDR fastest
    with pytest.raises(MeshError):
        LinkModel.load("mncore", tree)  # an MN-Core preset has no network
    with pytest.raises(MeshError):
        LinkModel.load("ib-hdr", parse_topology("mncore:2,2,2,2"))


def test_network_from_file(tmp_path):
    f = tmp_path / "net.json"
    f.write_text('{"node": {"alpha": 3e-6, "bandwidth": 5e9, "lanes": 2}}')
    lm = LinkModel.load(str(f), parse_topology("cluster:2,4"))
    assert lm.params("node") == (3e-6, 5e9, 2) and lm.share("node") == 2
    assert lm.params("local") is None


def _profile(tmp_path, alpha: float, name: str):
    """The conftest profile with this point-to-point latency (an oversubscribed machine's)."""
    import json

    from conftest import PROFILE

    data = json.loads(json.dumps(PROFILE))
    data["machine"]["ranks"] = 8
    for fit in data["p2p"].values():
        fit["alpha"] = alpha
    data["collective_factor"] = {"bcast": 3.0}
    f = tmp_path / name
    f.write_text(json.dumps(data))
    return f


def test_one_rank_per_node_holds_nothing_of_the_calibration_links(tmp_path):
    from bench.model import Profile, predict, schedule

    fast = Profile.load(_profile(tmp_path, 2e-6, "fast.json"))
    slow = Profile.load(_profile(tmp_path, 110e-6, "slow.json"))
    summa = get("summa")
    plan = summa.plan((4096, 4096, 4096), 16, grid=(4, 4))
    for topo, same in (("cluster:16,1", True), ("cluster:4,4", False)):
        tree = parse_topology(topo)
        links = LinkModel.load("ib-hdr", tree)
        events = schedule(summa, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
        rpn = int(topo.split(",")[1])
        a, b = (predict(events, p, "float32", rpn, links=links).seconds for p in (fast, slow))
        assert (a == b) is same  # inside a node (4 per node) the profile's links do count


def test_a_reduction_across_nodes_is_combined_by_the_nodes_cores(tmp_path):
    """The network moves a reduce-scatter's bytes; the ranks' cores sum them at the profile's
    measured rate (gamma), slowed as computation is where ranks share cores. Without the rate
    (an older profile) and on emulated links (the sums really happen here) nothing is added."""
    import json
    from dataclasses import replace

    from bench.cluster import sources
    from bench.model import Profile, combine_seconds, predict, schedule
    from topology.costs import collective_seconds

    assert collective_seconds("reduce_scatter", 1 << 20, 4, 0.0, 1e-10, gamma=1e-9) == (
        pytest.approx(0.75 * (1 << 20) * (1e-10 + 1e-9))
    )
    plain, combined = (
        collective_seconds("allreduce", 1 << 20, 4, 0.0, 1e-10, gamma=g) for g in (0, 1e-9)
    )
    assert plain + 0.75 * (1 << 20) * 1e-9 == pytest.approx(combined)
    assert collective_seconds("allgather", 1 << 20, 4, 0.0, 1e-10, gamma=1e-9) == (
        collective_seconds("allgather", 1 << 20, 4, 0.0, 1e-10)
    )
    without = Profile.load(_profile(tmp_path, 2e-6, "old.json"))
    data = json.loads((tmp_path / "old.json").read_text())
    data["reduce_bandwidth"] = {"float32": 2e9, "float64": 4e9}
    (tmp_path / "new.json").write_text(json.dumps(data))
    measured = Profile.load(tmp_path / "new.json")
    assert combine_seconds(without, "float32", 1.0) == 0.0
    assert combine_seconds(measured, "float32", 3.0) == pytest.approx(3 / 2e9)
    cannon25d = get("cannon25d")
    plan = cannon25d.plan((1024, 1024, 1024), 8, grid=(2, 2, 2))
    tree = parse_topology("cluster:8,1")
    links = LinkModel.load("ib-ndr", tree)
    events = schedule(cannon25d, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
    (rs,) = (e for e in events if e.kind == "reduce_scatter")
    summed = (rs.group - 1) / rs.group * rs.nbytes / 2e9  # one rank per node: not slowed

    def phase(profile, links):
        return predict(events, profile, "float32", 1, links=links).phases["reduce_scatter"]

    assert phase(measured, links) == pytest.approx(phase(without, links) + summed)
    emulated = replace(links, emulated=True)
    assert phase(measured, emulated) == phase(without, emulated)
    said = [sources(events, links, 1, p)["reduce_scatter"] for p in (measured, without)]
    assert said[0].endswith("combining measured (profile: MPI's SUM)")
    assert "combining not counted" in said[1]


def test_a_collective_across_nodes_copies_the_ranks_own_block_on_its_core(tmp_path):
    """MPICH's allgather and reduce-scatter (not in place) copy a rank's own piece into place;
    no network moves it, so on links that only move bytes the rank's core does, at the
    profile's copy rate, slowed where ranks share cores. The shift, the broadcast and the
    (in-place) allreduce copy nothing; emulated links price the run's own copy already."""
    from dataclasses import replace

    from bench.cluster import sources
    from bench.model import Profile, own_copy_seconds, predict, schedule
    from topology.costs import own_block_bytes

    n = 1 << 20
    assert [own_block_bytes(k, n, 4) for k in ("allgather", "reduce_scatter", "alltoall")] == [
        n,
        n // 4,
        n // 4,
    ]
    assert not any(own_block_bytes(k, n, 4) for k in ("shift", "bcast", "allreduce", "barrier"))
    assert own_block_bytes("allgather", n, 1) == 0
    profile = Profile.load(_profile(tmp_path, 2e-6, "p.json"))
    assert own_copy_seconds("allgather", n, 4, profile, 2.0) == pytest.approx(
        2 * n / profile.copy_bandwidth
    )
    summa3d = get("summa3d")
    plan = summa3d.plan((1024, 1024, 1024), 8, grid=(2, 2, 2))
    tree = parse_topology("cluster:8,1")
    links = LinkModel.load("ib-ndr", tree)
    events = schedule(summa3d, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
    gathers = [e for e in events if e.kind == "allgather" and links.models(e.phase_level)]
    assert gathers
    moved = sum(links.collective("allgather", e.nbytes, e.group, e.phase_level) for e in gathers)
    copied = sum(e.nbytes for e in gathers) / profile.copy_bandwidth  # one rank per node
    walked = predict(events, profile, "float32", 1, links=links).phases["allgather"]
    assert walked == pytest.approx(moved + copied)
    slower = replace(profile, copy_bandwidth=profile.copy_bandwidth / 10)
    walked_slower = predict(events, slower, "float32", 1, links=links).phases["allgather"]
    assert walked_slower == pytest.approx(moved + 10 * copied)
    emulated = replace(links, emulated=True)  # the profile's price holds the run's own copy
    held = [
        predict(events, p, "float32", 1, links=emulated).phases["allgather"]
        for p in (profile, slower)
    ]
    assert held[0] == pytest.approx(held[1])
    said = sources(events, links, 1, profile)
    assert "own block copied (profile: copy rate)" in said["allgather"]
    assert "own block" not in said.get("bcast", "")


def test_predict_cli_on_a_cluster(tmp_path):
    import json

    from launch import distmm

    prof = _profile(tmp_path, 110e-6, "p.json")
    args = ("predict", "summa", "--shape", "65536,65536,65536", "--P", "8192")
    r = distmm(*args, "--topology", "cluster:8192,1", "--network", "ib-hdr",
               "--profile", str(prof), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    bcast, stated = rec["communication_seconds"]["bcast"], rec["stated"]["seconds"]
    # MPICH's long broadcast (scatter + allgather) moves twice the literature's bytes: a few
    # times the closed form, and nothing like the 110 us latency's seconds
    assert stated < bcast < 5 * stated < 0.2
    assert rec["phase_sources"]["bcast"] == "between nodes: preset ib-hdr"
    assert rec["phase_sources"]["gemm"].startswith("measured")
    assert rec["network"] == "ib-hdr" and rec["ranks_per_node"] == 1
    old = distmm(*args, "--ranks-per-node", "1", "--profile", str(prof), "--json")
    assert json.loads(old.stdout)["predicted_phases"]["bcast"] > 10 * bcast  # the leak
    r = distmm(*args, "--topology", "cluster:8192,1", "--profile", str(prof))
    assert r.returncode == 2 and "--network" in r.stderr
    r = distmm(*args, "--topology", "cluster:8192,1", "--network", "ib-hdr",
               "--ranks-per-node", "4", "--profile", str(prof))  # fmt: skip
    assert r.returncode == 2 and "contradicts" in r.stderr


def test_plan_on_a_cluster(tmp_path):
    import json

    from launch import distmm

    prof = _profile(tmp_path, 110e-6, "p.json")
    base = ("plan", "--shape", "2048,2048,2048", "--P", "8", "--profile", str(prof))
    r = distmm(*base, "--topology", "cluster:4,2", "--network", "10gbe", "--json")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["ranks_per_node"] == 2 and len(rec["candidates"]) > 4
    assert "--topology cluster:4,2 --bind ranks" in rec["recommended"]["command"]
    fast = distmm(*base, "--topology", "cluster:4,2", "--network", "ib-ndr", "--json")

    def total(record):  # the best plans hide communication behind GEMMs: compare them all
        return sum(c["predicted_seconds"] for c in record["candidates"])

    assert total(json.loads(fast.stdout)) < total(rec)
    r = distmm(*base, "--topology", "cluster:4,2")
    assert r.returncode == 2 and "--network" in r.stderr
    r = distmm(*base, "--topology", "cluster:3,2", "--network", "10gbe")
    assert r.returncode == 2 and "cluster:3,2 has 6 ranks but --P is 8" in r.stderr


def test_cluster_closed_form_script():
    import json

    from launch import script

    argv = ["--P", "1024", "--shape", "8192,8192,8192", "--json"]
    r = script("cluster_closed_form.py", *argv, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = {row["algo"]: row for row in json.loads(r.stdout)}
    cannon, summa = rows["cannon"], rows["summa"]
    # Cannon's shifts are the closed form's messages; SUMMA's long broadcasts (scatter + ring
    # allgather) move twice the bytes and pay log g + g - 1 latencies instead of log g
    assert cannon["model"] == pytest.approx(cannon["closed"], rel=1e-9)
    assert summa["model_bandwidth"] == pytest.approx(2 * summa["closed_bandwidth"], rel=0.05)
    assert summa["model_latency"] > 5 * summa["closed_latency"]


def test_plan_run_can_emulate_the_network(tmp_path):
    from launch import distmm

    from bench.model import Profile
    from bench.planner import candidates

    prof = _profile(tmp_path, 110e-6, "p.json")
    cands = candidates((256, 256, 256), 4, Profile.load(prof), "float32", None, "cluster:2,2",
                       "1gbe", algos=["cannon"])  # fmt: skip
    argv = cands[0].run_args((256, 256, 256), "float32", "cluster:2,2", "1gbe")
    assert argv[argv.index("--emulate-links") + 1] == "1gbe"
    assert "--emulate-links" not in cands[0].run_args((256, 256, 256), "float32", "cluster:2,2")
    # emulated on this 2-core machine the 4 ranks share its cores: GEMMs twice as slow as on
    # the cluster's nodes of 2 ranks each, the network the same
    emulated = candidates((256, 256, 256), 4, Profile.load(prof), "float32", 4, "cluster:2,2",
                          "1gbe", algos=["cannon"], emulated=True)  # fmt: skip
    on_nodes = {(c.grid_text, c.overlap): c.kernel for c in cands}
    for c in emulated:
        assert c.kernel > on_nodes[c.grid_text, c.overlap]
    r = distmm("plan", "--shape", "256,256,256", "--P", "4", "--profile", str(prof),
               "--topology", "cluster:2,2", "--run", "--emulate")  # fmt: skip
    assert r.returncode == 2 and "--network" in r.stderr
    r = distmm("plan", "--shape", "256,256,256", "--P", "4", "--profile", str(prof),
               "--topology", "cluster:2,2", "--network", "1gbe", "--emulate")  # fmt: skip
    run_it = next(line for line in r.stdout.splitlines() if line.startswith("run it:"))
    assert run_it.endswith("--emulate-links 1gbe"), run_it  # the command reproduces the runs


def test_relabelled_rank_order():
    """An end-to-end run's relabelling puts native mesh rank d on job (tree) rank ranks[d]."""
    tree = parse_topology("cluster:2,2")
    plan = get("summa").plan((64, 64, 64), 4, grid=(2, 2))
    perm = (0, 2, 1, 3)
    b = RankOrder(plan.mesh, ranks=perm)
    assert str(b) == "ranks (relabelled)"
    for d in range(4):
        coords = plan.mesh.coords(d)
        assert b.tree_coords(coords, tree) == tree.coords(perm[d])
        assert b.algo_coords(tree.coords(perm[d]), tree) == coords
    # native rank 0's row (x=0: ranks 0, 1) runs on job ranks 0 and 2: across the nodes
    assert b.group_levels(tree, plan.mesh.coords(0), ("y",)) == {"node": 1}
    assert RankOrder(plan.mesh).group_levels(tree, plan.mesh.coords(0), ("y",)) == {"local": 1}


@pytest.mark.parametrize("spec", ["cluster:4,3", "cluster:3,4:round-robin"])
def test_rank_order_counts_each_members_crossing_level(spec):
    """RankOrder.group_levels (vectorised) against the definition, member by member: the
    outermost level at which the member's tree coordinates differ from this rank's."""
    from collections import Counter

    from topology.hierarchy import crossing_level_coords

    tree = parse_topology(spec)
    mesh = get("summa").plan((60, 60, 60), 12, grid=(3, 4)).mesh
    levels = levels_of(tree)
    rng = np.random.default_rng(3)
    for ranks in (None, tuple(int(r) for r in rng.permutation(12))):
        order = RankOrder(mesh, ranks=ranks)
        for me in range(12):
            mine = tree.coords(order.tree_rank(me))
            for axes in (("x",), ("y",), ("x", "y")):
                others = [r for r in mesh.group(me, axes) if r != me]
                want = Counter(
                    crossing_level_coords(tree.coords(order.tree_rank(r)), mine, levels)
                    for r in others
                )
                got = order.group_levels(tree, mesh.coords(me), axes)
                assert got == {lv: want[lv] for lv in levels if want[lv]}


def test_relabelling_on_a_cluster_keeps_each_nodes_mesh_ranks_together():
    """From 1-D columns into summa3d's 2x2x2 mesh on 2 nodes of 4 ranks: an order blind to the
    nodes moves fewer elements (18432 against 19584), fewer of them between nodes (which of its
    equally good orders the matching picks says how many fewer), by putting mesh ranks on the
    other node, which would send the kernel's messages between those ranks' groups over the
    network; the cluster's order keeps each node's mesh ranks together (here: the identity),
    so the kernel runs as planned."""
    from bench.endtoend import end_to_end
    from layouts.endpoints import move_counts
    from topology.hierarchy import subtrees_of

    tree = parse_topology("cluster:2,4")
    plan = get("summa3d").plan((96, 96, 96), 8, grid=(2, 2, 2))
    (nodes,) = subtrees_of(tree)
    assert nodes.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    moved = {}
    for where in (None, tree):
        binding = None if where is None else default_binding(plan.mesh, tree)
        e2e = end_to_end(dict.fromkeys("ABC", "cols"), plan, 4, True, where, binding)
        counts = sum(move_counts(m, e2e.ranks) for m in e2e.moves)
        between = counts[nodes[:, None] != nodes[None, :]].sum()
        on = nodes[list(e2e.ranks)]
        together = bool((np.equal.outer(on, on) == np.equal.outer(nodes, nodes)).all())
        moved[where is None] = (int(between), int(counts.sum() - np.trace(counts)), together)
    assert moved[False] == (9216, 19584, True)
    between, total, together = moved[True]
    assert total == 18432 and between < 9216 and not together
    assert subtrees_of(parse_topology("cluster:4,1")) == []  # one rank per node: plain order


def test_link_exchange_prices_messages_between_nodes(tmp_path):
    """LinkModel.exchange: per rank, the longer of its sends and receives over priced levels;
    messages inside a node (unpriced under a network preset) cost nothing there."""
    import json

    f = tmp_path / "net.json"
    f.write_text(json.dumps({"node": {"alpha": 1e-3, "bandwidth": 1e6}}))
    tree = parse_topology("cluster:2,2")  # nodes {0, 1}, {2, 3}; 2 ranks share a link
    links = LinkModel.load(str(f), tree)
    src, dst, n = np.array([0, 0, 3, 1]), np.array([1, 2, 0, 1]), np.array([10, 100, 50, 7])
    assert links.pair_levels(src, dst).tolist() == [1, 0, 0, -1]
    assert links.crosses(src, dst).tolist() == [False, True, True, False]
    t = links.exchange(src, dst, n)
    send0, recv0 = 1e-3 + 100 * 2 / 1e6, 1e-3 + 50 * 2 / 1e6
    assert t[0] == pytest.approx(max(send0, recv0))
    assert t[1] == 0 and t[2] == pytest.approx(send0) and t[3] == pytest.approx(recv0)


def test_redistribution_on_a_cluster_prices_the_network(tmp_path):
    """Moves between nodes cost the network's time; the model with links never prices a move
    below what the links alone take, and a slower network costs more."""
    from bench.model import Profile, plan_moves, price_moves
    from layouts.endpoints import user_layouts

    prof = Profile.load(_profile(tmp_path, 2e-6, "p.json"))
    plan = get("cannon").plan((512, 512, 512), 4)
    users = user_layouts(dict.fromkeys("ABC", "cols"), plan.shape, 4)
    tree = parse_topology("cluster:2,2")
    plain = price_moves(plan_moves(users, plan), 4, prof, 4, 2)
    slow, fast = (
        price_moves(plan_moves(users, plan), 4, prof, 4, 2, links=LinkModel.load(net, tree))
        for net in ("1gbe", "ib-ndr")
    )
    assert slow.seconds > fast.seconds
    assert slow.seconds > plain.seconds
    assert slow.words == fast.words  # the same moves, priced differently
    # off the cluster the order may split the nodes' mesh ranks (0, 2, 1, 3): fewer words
    assert plain.ranks == (0, 2, 1, 3) and slow.ranks == (0, 1, 2, 3)
    assert plain.words < slow.words


def test_emulated_links_with_more_ranks_than_cores_hide_only_the_hold(tmp_path):
    """An emulated message first really moves on this machine: with no core spare that move
    occupies the rank (as on a plain mesh); only the rest of the link's hold hides behind the
    GEMM it was posted before (t10's rotations on 4 x 2 ranks on 2 cores)."""
    import json
    from dataclasses import replace

    from algorithms.events import Event
    from bench.model import Profile, predict

    prof = Profile.load(_profile(tmp_path, 110e-6, "slow.json"))
    at = prof.at(4)  # 4 ranks, 2 cores
    nbytes = 1 << 20
    here = at.collective("shift", nbytes, 2) * at.comm_scale
    gemm = at.gemm_seconds(1024, 1024, 1024, "float32") * prof.slowdown(4)
    link = 1.5 * here  # dearer than the move here, cheaper than the GEMM
    assert gemm > link
    f = tmp_path / "net.json"
    f.write_text(json.dumps({"node": {"alpha": 1e-12, "bandwidth": nbytes / link}}))
    real = LinkModel.load(str(f), parse_topology("cluster:2,2"))
    events = [
        Event(
            "shift",
            group=2,
            nbytes=nbytes,
            sent=nbytes,
            messages=1,
            overlapped=True,
            phase_level="node",
        ),
        Event("gemm", flops=2 * 1024**3, shape=(1024, 1024, 1024)),
        Event("wait", waits=(0,)),
    ]
    cluster = predict(events, prof, "float32", 4, links=real)
    emulated = predict(events, prof, "float32", 4, links=replace(real, emulated=True))
    assert cluster.seconds == pytest.approx(gemm)  # the network's message hides
    assert emulated.seconds == pytest.approx(here + gemm)
    assert emulated.phases["shift"] == pytest.approx(here)


def test_emulated_messages_posted_together_move_at_once_and_queue_only_their_holds(tmp_path):
    """Two messages posted one after the other before a GEMM (Cannon's shifts of A and B) on
    emulated links: each really moves here when posted, and only the link's holds queue one
    after the other (algorithms/levels.py, LinkClock), so the rank pays the second move before
    its GEMM, not after the first hold (Cannon 4x4 on 8 x 2 ranks on 1 GbE was priced 1.36x
    its time so)."""
    import json
    from dataclasses import replace

    from algorithms.events import Event
    from bench.model import Profile, predict

    prof = Profile.load(_profile(tmp_path, 110e-6, "slow.json"))
    at = prof.at(4)  # 4 ranks, 2 cores
    big, small = 1 << 20, 1 << 16
    here = [at.collective("shift", n, 2) * at.comm_scale for n in (big, small)]
    gemm = at.gemm_seconds(1024, 1024, 1024, "float32") * prof.slowdown(4)
    hold = 4 * here[0]  # the first message's link time: dearer than both moves here
    f = tmp_path / "net.json"
    f.write_text(json.dumps({"node": {"alpha": 1e-12, "bandwidth": big / hold}}))
    links = LinkModel.load(str(f), parse_topology("cluster:2,2"))
    held = [
        max(links.collective("shift", n, 2, "node"), h)
        for n, h in zip((big, small), here, strict=True)
    ]
    assert gemm > held[0] + held[1]  # the holds hide behind the GEMM

    def shift(n: int) -> Event:
        return Event(
            "shift", group=2, nbytes=n, sent=n, messages=1, overlapped=True, phase_level="node"
        )

    events = [
        shift(big),
        shift(small),
        Event("gemm", flops=2 * 1024**3, shape=(1024, 1024, 1024)),
        Event("wait", waits=(0, 1)),
    ]
    emulated = predict(events, prof, "float32", 4, links=replace(links, emulated=True))
    assert emulated.phases["shift"] == pytest.approx(here[0] + here[1])
    assert emulated.seconds == pytest.approx(here[0] + here[1] + gemm)
    slow = [*events[:2], Event("gemm", flops=2e3, shape=(10, 10, 10)), events[3]]
    tiny = at.gemm_seconds(10, 10, 10, "float32") * prof.slowdown(4)
    waited = predict(slow, prof, "float32", 4, links=replace(links, emulated=True))
    assert waited.seconds == pytest.approx(held[0] + held[1])  # the holds, one after the other
    assert waited.seconds > here[0] + here[1] + tiny


def test_emulated_links_price_the_dearer_of_the_link_and_this_machine(tmp_path):
    """Emulated links (distmm run --emulate-links) hold messages that really moved on this
    machine: each operation and each move costs at least what the profile prices it at and at
    least the link's time; links of a real cluster are priced by the links alone."""
    import json
    from dataclasses import replace

    from bench.model import Profile, plan_moves, predict, price_moves, schedule
    from bench.model.walk import barrier_seconds
    from layouts.endpoints import user_layouts

    prof = Profile.load(_profile(tmp_path, 110e-6, "slow.json"))  # dear messages here
    f = tmp_path / "net.json"
    tree = parse_topology("cluster:2,2")
    summa = get("summa")
    plan = summa.plan((256, 256, 256), 4, grid=(2, 2))
    events = schedule(summa, plan, 0, np.float32, default_binding(plan.mesh, tree), tree)
    mesh = predict(events, prof, "float32", 4).seconds
    users = user_layouts(dict.fromkeys("ABC", "cols"), plan.shape, 4)
    here = price_moves(plan_moves(users, plan), 4, prof, 4, 4, relabel=False)
    for bandwidth, link_wins in ((1e12, False), (1e6, True)):  # a link far faster, far slower
        f.write_text(json.dumps({"node": {"alpha": 1e-9, "bandwidth": bandwidth}}))
        real = LinkModel.load(str(f), tree)
        emulated = replace(real, emulated=True)
        seconds = {
            lm.emulated: predict(events, prof, "float32", 4, links=lm).seconds
            for lm in (real, emulated)
        }
        moved = {
            lm.emulated: price_moves(plan_moves(users, plan), 4, prof, 4, 4, False, lm).seconds
            for lm in (real, emulated)
        }
        assert seconds[True] >= seconds[False] and moved[True] >= moved[False]
        # a barrier sends no bytes: emulated, it costs what it does here; on the cluster, the
        # link's start alone, nothing of this machine's (model.walk.barrier_seconds)
        gap = barrier_seconds(prof.at(4), 4, emulated) - barrier_seconds(prof.at(4), 4, real)
        assert gap > 0 and barrier_seconds(prof.at(4), 4, real) < 1e-8
        if link_wins:  # held to the link: the emulation costs what the cluster would, but the
            # barriers ending the moves' phase in and closing the repetition
            assert seconds[True] == pytest.approx(seconds[False])  # (no closing barrier asked)
            assert moved[True] == pytest.approx(moved[False] + 2 * gap)
        else:  # this machine's messages are the dearer: priced as on a plain mesh
            assert seconds[True] == pytest.approx(mesh) and seconds[False] < mesh
            assert moved[True] == pytest.approx(here.seconds) and moved[False] < here.seconds


def test_emulated_links_end_a_phase_in_an_idle_barrier(tmp_path):
    """Where calibrate timed layout changes, a move held to emulated links ends with its ranks
    asleep, not in GEMMs: the barrier after it costs the changes' start (on this machine's
    ranks), not the closing barrier's price; on real links that price remains."""
    import json
    from dataclasses import replace

    from conftest import PROFILE

    from bench.model import Profile, phase_barrier, plan_moves, price_moves
    from bench.model.redistribution import phase_end
    from layouts.endpoints import user_layouts

    data = json.loads(json.dumps(PROFILE))
    a2av = {"start": 3e-4, "message": 2e-5, "byte": 3e-10, "copy": 1e-10, "timed": []}
    p2p = {"alpha": 2e-6, "beta": 1e-10, "alpha_large": 5e-6, "beta_large": 1e-10}
    data["counts"] = [
        {"ranks": g, **p2p, "collective_factor": {}, "alltoallv": a2av} for g in (1, 2)
    ]
    f = tmp_path / "timed.json"
    f.write_text(json.dumps(data))
    prof = Profile.load(f)
    tree = parse_topology("cluster:2,2")
    real = LinkModel.load("1gbe", tree)
    emulated = replace(real, emulated=True)
    start = prof.at(4).alltoallv["start"]  # (4 ranks on the profile's 2 cores: scaled)
    assert phase_end(4, prof, 4, emulated) == (start, True)
    assert phase_end(4, prof, 4, real) == (phase_barrier(4, prof, 4, real), False)
    plan = get("summa").plan((256, 256, 256), 4, grid=(2, 2))
    moves = plan_moves(user_layouts(dict.fromkeys("ABC", "cols"), plan.shape, 4), plan)
    held = price_moves(moves, 4, prof, 4, 4, False, emulated)
    slow = price_moves(moves, 4, prof, 4, 4, False, real)
    assert held.closing == 0.0 and slow.closing == phase_barrier(4, prof, 4, real)
    # held to links far slower than this machine: the links' time, then the barrier
    assert held.redistribute_in == pytest.approx(slow.redistribute_in - slow.closing + start)
