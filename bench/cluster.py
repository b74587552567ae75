"""A prediction for a cluster (``--topology cluster:NODES,RPN --network PRESET``): which parts
are measured on this node and which come from a network preset (or from the network
`distmm calibrate --network-into` measured across nodes, the profile's own by default).

Computation (GEMMs, copies) is the profile's, slowed as ``RPN`` ranks share the node's cores;
messages between nodes are the network preset's (topology/networks.py), shared by the node's
ranks; messages inside a node are the profile's measured links. Nothing of the calibration
machine's messages prices a message between nodes, so a one-rank-per-node prediction holds
none of its (possibly oversubscribed) latency.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from topology.costs import PLACING, REDUCING
from topology.hierarchy import cluster_size, is_cluster
from topology.networks import NETWORKS

from .errors import UsageError
from .model import (
    Prediction,
    communication_seconds,
    plan_moves,
    predict,
    price_moves,
    schedule,
    setup_seconds,
    stated_cost,
)
from .units import format_bytes

COMPUTE = ("gemm", "copy")


def need_network(tree, links) -> None:
    if is_cluster(tree) and links is None:
        raise UsageError(
            f"a cluster needs its network: --network {'|'.join(NETWORKS)}, a JSON file "
            '{"node": {"alpha": s, "bandwidth": B/s, "lanes": n}}, or a --profile that '
            "measured one (distmm calibrate --network-into, on a job across nodes)"
        )


def default_network(args) -> None:
    """On a cluster with no --network given, the network the --profile measured across nodes
    (calibrate --network-into), if it did: args.links names the profile."""
    if args.topology.startswith("cluster:") and not args.links:
        try:
            measured = "network" in json.loads(Path(args.profile).read_text())
        except (OSError, ValueError, TypeError):
            measured = False  # (Profile.load says what is wrong with it)
        if measured:
            args.links = args.profile


def network_text(links) -> str:
    """Where a cluster's messages between nodes are priced from."""
    if links.measured:
        return measured_network(links.name)
    return f"{'preset' if links.origin == 'preset' else 'links file'} {links.name}"


def _local_links_line(links) -> list[str]:
    """The header line of a links file's level inside a node, if it prices one."""
    local = links.params("local")
    if local is None:
        return []
    a, bw, lanes = local
    return [f"inside a node: alpha {a * 1e6:.2f} us, {bw / 1e9:.3g} GB/s per link ({lanes} "
            f"link(s)) [{links.origin}]"]  # fmt: skip


def measured_network(profile: str) -> str:
    """A network ``profile`` measured (calibrate --network-into), as predict and plan say it."""
    return f"measured across nodes (calibrate --network-into, {profile})"


def _node_work(kind: str, profile) -> str:
    """Where the work the ranks' cores do in a collective across nodes is priced from: a
    reduction's combining (walk.combine_seconds), a rank's own block copied into place
    (walk.own_copy_seconds)."""
    out = ", own block copied (profile: copy rate)" if kind in PLACING else ""
    if kind not in REDUCING:
        return out
    if profile.reduce_bandwidth:
        return out + ", combining measured (profile: MPI's SUM)"
    return out + ", combining not counted (the profile predates its measurement: re-run calibrate)"


def sources(events, links, rpn: int, profile) -> dict[str, str]:
    """{phase kind: where its price comes from} for the kinds in ``events``."""
    by_kind: dict[str, set] = {}
    for e in events:
        if e.kind != "wait":
            by_kind.setdefault(e.kind, set()).add(e.phase_level)
    out = {}
    for kind, levels in by_kind.items():
        if kind in COMPUTE:
            out[kind] = f"measured (profile, {rpn} rank(s) per node)"
            continue
        parts = []
        for lv, where in (("node", "between nodes"), ("local", "inside a node")):
            if lv in levels:
                parts.append(
                    f"{where}: {network_text(links)}{_node_work(kind, profile)}"
                    if links.models(lv)
                    else f"{where}: measured (profile)"
                )
        out[kind] = "; ".join(parts) or "no messages"
    return out


def on_cluster(args, module, plan, profile, rpn: int, started, users=None) -> tuple[dict, str]:
    """The record and the text of a prediction on a cluster (rank 0's schedule; ``users``: the
    user's layouts, whose redistributions are priced as the kernel's messages are: between
    nodes by the network, inside a node by the profile)."""
    from .runner import tree_setup

    tree, binding, links = tree_setup(args, plan, args.links)
    need_network(tree, links)
    nodes, per_node, placement = cluster_size(tree)
    events = schedule(module, plan, 0, np.dtype(args.dtype), binding, tree)
    pred: Prediction = predict(events, profile, args.dtype, rpn, links=links, P=plan.P)
    word = np.dtype(args.dtype).itemsize
    link = links.alpha_beta("node")
    stated = stated_cost(plan.algo, plan.shape, plan.P, plan.grid, profile, word, link=link)
    src = sources(events, links, rpn, profile)
    if plan.P > 1 and links.models("node"):  # the closing barrier (model.walk.barrier_seconds)
        src["barrier"] = f"between nodes: {network_text(links)}" + (
            " or the profile, the dearer" if links.emulated else ""
        )
    comm = communication_seconds(events, profile, args.dtype, rpn, links)
    moved = price_moves(
        plan_moves(users, plan) if users else [],
        plan.P,
        profile,
        word,
        rpn,
        not args.no_relabel,
        links,
    ).with_setup(setup_seconds(module, plan, profile, args.dtype, rpn))
    total = pred.seconds + moved.seconds
    made = profile.meta.get("ranks")
    record = {
        "algo": plan.algo,
        "P": plan.P,
        "grid": list(plan.grid),
        "shape": list(plan.shape),
        "dtype": args.dtype,
        "topology": args.topology,
        "nodes": nodes,
        "ranks_per_node": per_node,
        "placement": placement,
        "links": links.as_dict(),
        "network": links.name,
        "network_measured": links.measured,
        "layouts": plan.describe(),
        **pred.as_dict(),
        "user_layouts": {n: str(u) for n, u in (users or {}).items()},
        "predicted_seconds": total,
        "predicted_multiply_seconds": pred.seconds,
        "predicted_redistribute_in_seconds": moved.redistribute_in,
        "predicted_redistribute_out_seconds": moved.redistribute_out,
        "predicted_closing_barrier_seconds": moved.closing,
        "relabel_bytes_saved": moved.bytes_saved,
        "predicted_gflops": plan.flops / total / 1e9 if total else None,
        "phase_sources": src,
        "communication_seconds": comm,
        "profile_ranks": made,
        "stated": stated,
        "planning_seconds": time.perf_counter() - started,
    }
    M, K, N = plan.shape
    a, bw, lanes = links.params("node")
    lines = [
        f"distmm predict {plan.algo}: {nodes} node(s) x {per_node} rank(s) ({placement}), "
        f"grid={'x'.join(map(str, plan.grid))} shape={M}x{K}x{N} {args.dtype}",
        f"network {links.name}: alpha {a * 1e6:.2f} us, {bw / 1e9:.3g} GB/s per link "
        f"({lanes} link(s), shared by {links.share('node'):g} rank(s)) [{links.origin}]",
        *_local_links_line(links),
        f"node: {profile.cores} cores, GEMM rates and copy bandwidth from the profile "
        f"[measured]; {rpn} rank(s) per node ({threads_text(profile, rpn)}): computation "
        f"x{pred.oversubscription:.2f}",
        *(f"  {name}  {text}" for name, text in plan.describe().items()),
        f"{'phase':<16}{'predicted [s]':>14}{'in full [s]':>13}  source",
        *(
            f"{kind:<16}{sec:>14.6f}{comm.get(kind, sec):>13.6f}  {src.get(kind, '')}"
            for kind, sec in sorted(pred.phases.items(), key=lambda kv: -kv[1])
        ),
        f"{'kernel':<16}{pred.seconds:>14.6f}   {plan.flops / pred.seconds / 1e9:.1f} GFLOP/s",
        f"{'redistribute in':<16}{moved.redistribute_in:>14.6f}"
        + ("  between nodes: network; inside a node: profile" if moved.seconds else ""),
        f"{'redistribute out':<16}{moved.redistribute_out:>14.6f}",
        *([f"{'closing barrier':<16}{moved.closing:>14.6f}"] if moved.closing else []),
        f"{'end-to-end':<16}{total:>14.6f}   {record['predicted_gflops']:.1f} GFLOP/s"
        + (
            f"   (relabelling saves {format_bytes(moved.bytes_saved)})" if moved.bytes_saved else ""
        ),
        f"rank 0 sends {format_bytes(pred.bytes_sent, 'MiB')} in {pred.messages} messages; "
        + ", ".join(f"{lv} {format_bytes(n, 'MiB')}" for lv, n in sorted(pred.level_bytes.items())),
    ]
    if any("inside a node" in s for s in src.values()) and made and made != per_node:
        lines.append(
            f"  note: messages inside a node use the profile's links, measured with {made} "
            f"ranks on {profile.cores} cores, not {per_node}"
        )
    lines.append(
        "(predicted: on the critical path, after overlap; in full: every operation priced alone)"
    )
    if stated:
        lines.append(
            f"literature with the network's alpha and beta: {stated['formula']} = "
            f"{stated['seconds']:.6f} s communication"
        )
    lines.append(f"(planned and evaluated in {record['planning_seconds'] * 1e3:.0f} ms)")
    return record, "\n".join(lines)


def threads_text(profile, ranks_per_node: int) -> str:
    """What `predict` says of the BLAS threads each rank's GEMMs are priced with."""
    t = profile.at(ranks_per_node).threads
    if t > 1 and not profile.gemm_threads:
        return f"{t} BLAS threads per rank, GEMMs priced at one (re-run distmm calibrate)"
    return f"{t} BLAS thread{'s' if t > 1 else ''} per rank"


__all__ = [
    "default_network",
    "measured_network",
    "need_network",
    "network_text",
    "on_cluster",
    "sources",
    "threads_text",
]
