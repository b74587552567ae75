"""The command-line options several commands share, each defined once: the algorithm and its
options, --shape, --dtype, --topology/--bind, --profile, --links, --ranks-per-node, --json.

The algorithm options (--grid, --fop, --pace, --panel) are generated from option records, one
flag per option name whatever the number of algorithms taking it, its help naming them.
"""

from __future__ import annotations

import argparse

from algorithms import ALGORITHMS
from algorithms.plan import PlanError
from algorithms.spec import Option
from topology.networks import NETWORKS

from .errors import UsageError
from .units import ints, parse_shape, positive


def all_options() -> dict[str, tuple[Option, list[str]]]:
    """{option name: (its record, the algorithms taking it)}, in first-declared order."""
    out: dict[str, tuple[Option, list[str]]] = {}
    for name, algorithm in ALGORITHMS.items():
        for option in algorithm.options:
            out.setdefault(option.name, (option, []))[1].append(name)
    return out


def add_algorithm_options(p: argparse.ArgumentParser) -> None:
    for name, (option, takers) in all_options().items():
        helps: dict[str, list[str]] = {}  # one option name may mean different things
        for algo in takers:
            helps.setdefault(ALGORITHMS[algo].option(name).help, []).append(algo)
        every = len(takers) == len(ALGORITHMS)
        kind = ints(option.length) if option.type is tuple else positive
        p.add_argument(
            f"--{name}",
            type=kind,
            metavar=option.metavar,
            choices=option.choices or None,
            help="; ".join(h if every else f"{', '.join(t)}: {h}" for h, t in helps.items()),
        )


def algorithm_options(args: argparse.Namespace, algorithm) -> dict:
    """{name: value} of the algorithm options given on the command line; an option the
    algorithm does not take is refused with PlanError."""
    takes = {o.name for o in algorithm.options}
    name = algorithm.name
    given = {}
    for option in all_options():
        value = getattr(args, option, None)
        if value is None:
            continue
        if option not in takes:
            raise PlanError(f"{name} takes no --{option}")
        given[option] = value
    return given


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    """What chooses an algorithm's plan (`distmm run` and `distmm predict`)."""
    p.add_argument("algo", metavar="ALGO", help=f"one of: {', '.join(ALGORITHMS)}")
    add_shape(p)
    add_algorithm_options(p)
    add_dtype(p)
    p.add_argument(
        "--no-overlap",
        action="store_true",
        help="blocking communication: no overlap with computation",
    )
    add_topology(p)
    p.add_argument(
        "--bind",
        metavar="AXIS=LEVEL+...,...",
        help="with a tree: the tree levels "
        "of each mesh axis, e.g. x=L2B+L1B,y=MAB+PE (default: consecutive levels "
        "from L2B down, in mesh axis order); on a cluster only 'ranks' (rank r on rank r)",
    )


def add_shape(p, required: bool = True) -> None:
    p.add_argument(
        "--shape",
        required=required,
        type=parse_shape,
        metavar="M,K,N",
        help="C[M,N] = A[M,K] @ B[K,N]",
    )


def add_dtype(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])


def add_topology(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument(
        "--topology",
        default="mesh",
        help="mesh (default), mncore (the 8192-PE "
        "board), mncore:L2B,L1B,MAB,PE (a scaled tree, e.g. mncore:2,2,2,2) or "
        "cluster:NODES,RANKS_PER_NODE[:round-robin] (ranks on nodes in blocks, or dealt out; "
        "its network: --network PRESET for predict and plan, --emulate-links PRESET to hold "
        "a run's messages to it)" + note,
    )


def add_profile(p: argparse.ArgumentParser, required: bool = True, use: str = "") -> None:
    p.add_argument(
        "--profile",
        required=required,
        help="machine profile from distmm calibrate" + (f": {use}" if use else ""),
    )


def add_links(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--links",
        "--network",
        dest="links",
        metavar="PRESET|FILE",
        help="with --topology: price communication with this link model: on mncore a preset "
        "mncore, mncore-emu or flat; on a cluster its network between nodes, "
        f"{', '.join(NETWORKS)} (topology/networks.py); or a JSON file "
        "{level: {alpha, bandwidth, lanes}}",
    )


def add_ranks_per_node(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ranks-per-node",
        type=positive,
        help="ranks sharing one node's cores "
        "(default: P, every rank on the machine the profile describes)",
    )


def ranks_per_node(args: argparse.Namespace, P: int) -> int:
    """--ranks-per-node as the model takes it: at most P, P when not given; on a cluster its
    own ranks per node."""
    topology = getattr(args, "topology", "mesh") or "mesh"
    if topology.startswith("cluster:"):
        from topology.tree import parse_topology

        return cluster_ranks_per_node(parse_topology(topology), args.ranks_per_node)
    return min(args.ranks_per_node or P, P)


def cluster_ranks_per_node(tree, given: int | None) -> int:
    """A cluster's ranks per node (--ranks-per-node, if given, must agree)."""
    from topology.hierarchy import cluster_size

    rpn = cluster_size(tree)[1]
    if given is not None and given != rpn:
        raise UsageError(f"--ranks-per-node {given} contradicts the cluster's {rpn} per node")
    return rpn


def add_json(p: argparse.ArgumentParser, what: str = "print one JSON object") -> None:
    p.add_argument("--json", action="store_true", help=what)


def add_layouts(p: argparse.ArgumentParser, default: str | None = "native", said: str = "") -> None:
    """--layouts for A, B and C together, --layout-a/-b/-c for one (layouts/named.py);
    ``said``: the default in words, where the command chooses it later (default: ``default``)."""
    names = "native, rows, cols, block, block-cyclic:NB, or LAYOUT@MESH"
    p.add_argument(
        "--layouts",
        default=default,
        metavar="NAME",
        help=f"where A and B start and C ends: {names} (e.g. ((4_r, 8), (2_c, 16))@r=4,c=2); "
        f"anything but native times redistribution in and out (default {said or default})",
    )
    for m in "abc":
        p.add_argument(
            f"--layout-{m}",
            metavar="NAME",
            help=f"{m.upper()}'s layout alone (overrides --layouts)",
        )
    p.add_argument(
        "--no-relabel",
        action="store_true",
        help="lay the algorithm's mesh on the ranks in order, instead of the order that moves "
        "the fewest bytes (COSTA's relabelling)",
    )


def layout_specs(args: argparse.Namespace) -> dict[str, str]:
    """{"A", "B", "C": spec} from --layouts and --layout-a/-b/-c."""
    return {m.upper(): getattr(args, f"layout_{m}") or args.layouts for m in "abc"}


def resolved_layouts(args: argparse.Namespace, shape, P: int) -> dict:
    """{"A", "B", "C": layouts.endpoints.UserLayout} of --layouts/--layout-a/-b/-c for this shape
    and rank count (LayoutError / MeshError with one line when bad)."""
    from layouts.endpoints import user_layouts

    return user_layouts(layout_specs(args), tuple(shape), P)
