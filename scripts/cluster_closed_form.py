#!/usr/bin/env python
"""SUMMA and Cannon on a cluster with one rank per node: the model's prediction beside the
literature's closed form, both with the network preset's alpha and beta.

    python scripts/cluster_closed_form.py [--P 4096] [--network ib-hdr]
        [--shape 65536,65536,65536] [--profile results/profile.json] [--json]

For each algorithm it prints the communication the model prices (every operation in full, and
what stays on the critical path after overlap with the GEMMs), split into its latency part
(bandwidth infinite) and its bandwidth part (alpha 0), beside the closed form split the same
way, and the operations the schedule issues, so the difference can be read off: the model uses
MPICH's algorithms (a long broadcast is a scatter plus a ring allgather: (log g + g - 1) alpha
and twice the bytes of a binomial tree's one pipelined pass), the closed form assumes one
message per step. Without --profile (or where results/profile.json is missing) GEMMs are priced
with round numbers (100 GFLOP/s per core): only the exposed column depends on them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import get  # noqa: E402
from algorithms.plan import PlanError  # noqa: E402
from bench.model import (  # noqa: E402
    Profile,
    ProfileError,
    communication_seconds,
    predict,
    schedule,
    stated_cost,
)
from bench.units import parse_ints  # noqa: E402
from topology.links import LinkModel  # noqa: E402
from topology.tree import default_binding, parse_topology  # noqa: E402

ROUND_PROFILE = {
    "machine": {"cores": 1, "ranks": 1},
    "p2p": {"small": {"alpha": 1e-6, "beta": 1e-10}, "large": {"alpha": 1e-6, "beta": 1e-10}},
    "gemm": {"float32": [[512, 512, 512, 2 * 512**3 / 1e11]]},
}


def load_profile(path: str | None) -> tuple[Profile, str]:
    if path or (ROOT / "results/profile.json").exists():
        path = path or str(ROOT / "results/profile.json")
        return Profile.load(path), path
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ROUND_PROFILE, f)
    return Profile.load(f.name), "round numbers (100 GFLOP/s per core)"


def with_link(links: LinkModel, alpha: float, bandwidth: float) -> LinkModel:
    """The same cluster with the network's alpha or bandwidth replaced (to split the terms)."""
    _, _, lanes = links.params("node")
    return LinkModel((("node", (alpha, bandwidth, lanes)), ("local", None)), links.tree, links.name)


def study(algo: str, shape, P: int, network: str, profile: Profile) -> dict:
    module = get(algo)
    plan = module.plan(tuple(shape), P)
    tree = parse_topology(f"cluster:{P},1")
    links = LinkModel.load(network, tree)
    events = schedule(module, plan, 0, "float32", default_binding(plan.mesh, tree), tree)
    alpha, bw, _ = links.params("node")
    beta = 1 / bw

    def model(lm):
        return sum(communication_seconds(events, profile, "float32", 1, lm).values())

    def closed(a, b):
        return stated_cost(algo, shape, P, plan.grid, profile, 4, link=(a, b))["seconds"]

    pred = predict(events, profile, "float32", 1, links=links)
    ops = Counter(
        (e.kind, e.group, e.nbytes) for e in events if e.kind not in ("gemm", "copy", "wait")
    )
    return {
        "algo": algo,
        "grid": list(plan.grid),
        "closed": closed(alpha, beta),
        "closed_latency": closed(alpha, 0.0),
        "closed_bandwidth": closed(0.0, beta),
        "formula": stated_cost(algo, shape, P, plan.grid, profile, 4, link=(alpha, beta))[
            "formula"
        ],
        "model": model(links),
        "model_latency": model(with_link(links, alpha, math.inf)),
        "model_bandwidth": model(with_link(links, 0.0, bw)),
        "exposed": sum(v for k, v in pred.phases.items() if k not in ("gemm", "copy")),
        "gemm": pred.phases.get("gemm", 0.0),
        "total": pred.seconds,
        "operations": [
            {"kind": k, "group": g, "bytes": n, "count": c} for (k, g, n), c in sorted(ops.items())
        ],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--P", type=int, default=4096)
    p.add_argument("--network", default="ib-hdr")
    p.add_argument("--shape", type=parse_ints, default=(65536, 65536, 65536))
    p.add_argument("--profile")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    try:
        profile, source = load_profile(args.profile)
    except ProfileError as err:
        print(f"cluster_closed_form: {err}", file=sys.stderr)
        return 2
    rows = []
    for algo in ("summa", "cannon"):
        try:
            rows.append(study(algo, args.shape, args.P, args.network, profile))
        except PlanError as err:
            print(f"# {algo}: {err}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))
        return 0
    alpha, bw, _ = LinkModel.load(args.network, parse_topology("cluster:1,1")).params("node")
    M, K, N = args.shape
    print(
        f"P = {args.P}, one rank per node, {M}x{K}x{N} float32; network {args.network}: "
        f"alpha {alpha * 1e6:.2f} us, {bw / 1e9:.3g} GB/s; GEMMs: {source}"
    )
    head = f"{'':<8}{'total':>10}{'latency':>10}{'bandwidth':>11}   communication [s]"
    print(head)
    for r in rows:
        print(f"{r['algo']} {'x'.join(map(str, r['grid']))}: {r['formula']}")
        print(
            f"{'  closed':<10}{r['closed']:>10.5f}{r['closed_latency']:>10.5f}"
            f"{r['closed_bandwidth']:>11.5f}   the literature's form, same alpha and beta"
        )
        print(
            f"{'  model':<10}{r['model']:>10.5f}{r['model_latency']:>10.5f}"
            f"{r['model_bandwidth']:>11.5f}   every operation priced in full (MPICH algorithms)"
        )
        print(
            f"{'  exposed':<10}{r['exposed']:>10.5f}{'':>21}   left after overlap with "
            f"{r['gemm']:.3f} s of GEMMs (predicted total {r['total']:.3f} s)"
        )
        ratio = r["model"] / r["closed"] if r["closed"] else float("nan")
        print(f"  model / closed = {ratio:.2f}; operations of rank 0:")
        for o in r["operations"]:
            print(f"    {o['count']:>5} x {o['kind']:<10} g={o['group']:<6} {o['bytes']:>12} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
