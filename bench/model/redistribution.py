"""What moving a tensor from one layout to another costs: the elements every pair of ranks
exchanges (layouts/transfer.exchange_counts, the counts the real Alltoallv sends), priced with
the layout changes calibrate timed at each rank count (Profile.alltoallv_seconds: a start and
costs per message, byte sent and byte copied, the node's cores sharing every rank's part).
A profile from before that was measured prices it as the calibrated all-to-all
(Profile.exchange: the pairwise-exchange formula and factor of ``Profile.collective("alltoall",
...)``). On a cluster the messages between nodes are priced by the network's links instead
(topology.links.LinkModel.exchange), as the kernel's are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from layouts.counting import exchange_counts, piece_counts, summed_pairs
from layouts.endpoints import (
    Move,
    UserLayout,
    move_counts,
    move_overlaps,
    moves,
    relabelling,
)
from layouts.redistribute import one_holder
from layouts.tensorlayout import TensorLayout
from topology.hierarchy import subtrees_of
from topology.mesh import AbstractMesh

from .phase_loads import PhasePairs
from .profile import Profile
from .walk import barrier_seconds


@dataclass(frozen=True)
class MovePrice:
    """An end-to-end run's moves priced: seconds in (A, B, and the barrier ending the phase)
    and out (C), the elements the busiest rank sends or receives in each move (summed over
    moves), the relabelling used, and the barrier closing the repetition after the moves out
    (bench/runner.py), which the end-to-end time holds but no phase."""

    redistribute_in: float
    redistribute_out: float
    words: int
    ranks: tuple[int, ...] | None  # native mesh rank d runs on job rank ranks[d]
    bytes_saved: int  # by the relabelling, against the identity order
    closing: float = 0.0
    has_moves: bool = True  # False: every layout native, nothing timed but the multiplication

    @property
    def seconds(self) -> float:
        return self.redistribute_in + self.redistribute_out + self.closing

    def with_setup(self, seconds: float) -> MovePrice:
        """This price with the algorithm's prepare (bench.model.schedule.setup_seconds) in the
        phase in, where a run with moves prepares; without moves nothing is timed before the
        multiplication."""
        if not self.has_moves:
            return self
        return replace(self, redistribute_in=self.redistribute_in + seconds)


def pairs_seconds(
    src,
    dst,
    count,
    P: int,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    links=None,
    pieces=None,
) -> float:
    """Seconds for one redistribution in which job rank ``src[i]`` sends ``count[i]`` elements
    to ``dst[i]`` (each pair once; src == dst: kept, a local copy), at ``ranks_per_node``.
    Where calibrate timed layout changes at each rank count, its coefficients price the
    :func:`loads` (Profile.alltoallv_seconds); else (older profiles) each rank's messages and
    bytes, the larger of what it sends and receives, are priced by Profile.exchange and its
    packing, unpacking and keeping at the profile's copy bandwidth, slowed as GEMMs are where
    ranks share cores, the busiest rank's time. With ``links`` (a cluster's network:
    topology.links.LinkModel, job rank = tree rank) the messages crossing a priced level are
    priced by the links instead (LinkModel.exchange), the two parts running at once; emulated
    links (LinkModel.emulated) are held after the messages really moved here, so those are
    priced both ways and the dearer counts (the links' with the barrier after: phase_end).
    ``pieces``: the pieces each job rank copies (:func:`phase_pieces`; None: none counted).
    Nothing moving between ranks costs nothing."""
    src, dst, count = (np.asarray(x, np.int64) for x in (src, dst, count))
    off = src != dst
    if not count[off].any():
        return 0.0
    if links is None:
        per_rank = _per_rank(src, dst, count, P, off)
        return ranks_seconds(per_rank, profile, itemsize, ranks_per_node, pieces=pieces)
    net = off & links.crosses(src, dst)
    # emulated links hold messages that really move on this machine: they count here too
    local = off if links.emulated else off & ~net
    linked = links.exchange(src[net], dst[net], count[net] * itemsize) if net.any() else None
    if linked is not None and links.emulated and (a2av := profile.at(ranks_per_node).alltoallv):
        linked = linked + a2av["start"]
    per_rank = _per_rank(src, dst, count, P, local)
    return ranks_seconds(per_rank, profile, itemsize, ranks_per_node, linked, pieces)


def ranks_seconds(
    per_rank: tuple,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    linked=None,
    pieces=None,
) -> float:
    """:func:`pairs_seconds` from the per-rank (messages, elements, copied) of the messages
    priced on this machine (:func:`_per_rank`) and ``linked``, each rank's seconds of those
    the links price (None: none), and ``pieces`` per rank (None: none counted)."""
    messages, elements, copied = per_rank
    at = profile.at(ranks_per_node)
    if at.alltoallv is not None:
        per_core = max(ranks_per_node / profile.cores, 1.0)
        load = _reduced(messages, elements, copied, itemsize, per_core, pieces)
        seconds = at.alltoallv_seconds(load)
        return seconds if linked is None else max(seconds, float(linked.max()))
    per_rank = np.where(elements > 0, at.exchange(messages, elements * itemsize), 0.0)
    per_rank = per_rank * at.comm_scale
    if linked is not None:
        per_rank = np.maximum(per_rank, linked)
    slow = profile.slowdown(ranks_per_node)
    return float(np.max(per_rank + copied * itemsize / profile.copy_bandwidth * slow))


def loads(src, dst, count, P: int, itemsize: int, per_core: float, sent=None, pieces=None) -> tuple:
    """(messages, bytes, copied bytes, pieces) of a redistribution in which rank ``src[i]``
    sends ``count[i]`` elements to ``dst[i]`` (src == dst: kept), as calibrate's coefficients
    price them (Profile.alltoallv_seconds): per rank, the messages and bytes of the pairs
    ``sent`` (default: every one off the diagonal), the larger of what it sends and receives,
    the bytes it packs, unpacks and keeps (every pair), and the ``pieces`` it copies (per rank,
    :func:`phase_pieces`; None: 0); of each, the busiest rank's, or with ``per_core`` ranks
    sharing a core the mean over ranks where larger (the cores share out every rank's work,
    but no rank goes faster than alone on a core)."""
    src, dst, count = (np.asarray(x, np.int64) for x in (src, dst, count))
    messages, elements, copied = _per_rank(src, dst, count, P, src != dst if sent is None else sent)
    return _reduced(messages, elements, copied, itemsize, per_core, pieces)


def _reduced(messages, elements, copied, itemsize: int, per_core: float, pieces=None) -> tuple:
    """:func:`loads` from the per-rank figures."""
    out = []
    pieces = np.zeros(1) if pieces is None else pieces
    for x in (messages, elements * itemsize, copied * itemsize, pieces):
        x = np.asarray(x, float)
        out.append(max(float(x.mean()), float(x.max()) / per_core))
    return tuple(out)


def _per_rank(src, dst, count, P: int, sent) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(messages, elements, copied) per rank: :func:`_busiest` of the pairs ``sent``, and the
    elements each rank packs, unpacks or keeps over every pair."""
    messages, elements = _busiest(src[sent], dst[sent], count[sent], P)
    copied = np.bincount(src, count, minlength=P) + np.bincount(dst, count, minlength=P)
    return messages, elements, copied


def _busiest(src, dst, count, P: int) -> tuple[np.ndarray, np.ndarray]:
    """(messages, elements) per rank of the messages (src[i] -> dst[i], count[i] elements,
    each pair once, none to itself): the larger of what it sends and what it receives."""
    sent = np.bincount(src, count, minlength=P)
    recv = np.bincount(dst, count, minlength=P)
    messages = np.maximum(np.bincount(src, minlength=P), np.bincount(dst, minlength=P))
    return messages, np.rint(np.maximum(sent, recv)).astype(np.int64)


def transfer_seconds(
    counts: np.ndarray,
    itemsize: int,
    profile: Profile,
    ranks_per_node: int,
    links=None,
    pieces=None,
) -> float:
    """:func:`pairs_seconds` of one Alltoallv in which job rank s sends ``counts[s, t]``
    elements to rank t (the diagonal is a local copy), job rank s copying ``pieces[s]``."""
    counts = np.asarray(counts)
    src, dst = np.nonzero(counts)
    args = (profile, itemsize, ranks_per_node, links, pieces)
    return pairs_seconds(src, dst, counts[src, dst], len(counts), *args)


def phase_pieces(
    all_moves: Sequence[Move], into: bool, ranks, P: int, at=None
) -> np.ndarray | None:
    """The pieces (layouts.counting.piece_counts) each job rank copies in the phase in
    (``into``) or out of ``all_moves``, native mesh rank x on job rank ``ranks[x]`` (None: on
    rank x); None where ``at`` (a Profile.at) prices no piece (a calibration from before they
    were counted, or one without layout changes): counting them costs a tenth of pricing the
    moves, so callers count them only for a phase that moves something between ranks."""
    if at is not None and not (at.alltoallv or {}).get("piece", 0.0) > 0:
        return None
    hosted = np.arange(P)  # job rank q hosts native rank hosted[q]
    if ranks is not None:
        hosted[np.asarray(ranks, np.int64)] = np.arange(P)
    out = np.zeros(P, np.int64)
    for m in (m for m in all_moves if m.into == into):
        sent, got = piece_counts(m.src, m.src_mesh, m.dst, m.dst_mesh)
        out += sent + got[hosted] if m.into else sent[hosted] + got
    return out


def move_seconds(
    all_moves: Sequence[Move],
    ranks: Sequence[int] | None,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    links=None,
    setup: float = 0.0,
) -> dict[str, float]:
    """{"redistribute_in": s, "redistribute_out": s, "closing_barrier": s}: the end-to-end
    run's moves priced (A and B in, as the one exchange they run as, and C out), native mesh
    rank d on job rank ``ranks[d]``, the phase in with the algorithm's prepare (``setup``:
    bench.model.schedule.setup_seconds) and the barrier that ends it (:func:`phase_barrier`),
    and the one closing the repetition after the moves out (in the end-to-end time, in no
    phase: MovePrice.closing); ``links`` as for :func:`pairs_seconds`. Without moves, nothing:
    a native run prepares before its timed region (MovePrice.with_setup)."""
    out = {"redistribute_in": 0.0, "redistribute_out": 0.0, "closing_barrier": 0.0}
    for into, phase in ((True, "redistribute_in"), (False, "redistribute_out")):
        group = [m for m in all_moves if m.into == into]
        if group:  # the moves in run as one exchange (layouts/batch.py)
            counts = sum(move_counts(m, ranks) for m in group)
            if counts.sum() > np.trace(counts):  # (else nothing moves: no price)
                at = profile.at(ranks_per_node)
                pieces = phase_pieces(all_moves, into, ranks, counts.shape[0], at)
                args = (itemsize, profile, ranks_per_node, links, pieces)
                out[phase] = transfer_seconds(counts, *args)
    if all_moves:
        P = all_moves[0].src_mesh.size
        ends = ending_barriers(
            out["redistribute_in"], out["redistribute_out"], P, profile, ranks_per_node, links
        )
        out["redistribute_in"] += ends[0] + setup
        out["closing_barrier"] = ends[1]
    return out


def phase_barrier(P: int, profile: Profile, ranks_per_node: int, links=None) -> float:
    """The barrier closing a run's timed region (bench.model.walk.barrier_seconds)."""
    return barrier_seconds(profile.at(ranks_per_node), P, links)


def phase_end(P: int, profile: Profile, ranks_per_node: int, links=None) -> tuple[float, bool]:
    """(seconds, held) of the barrier ending an end-to-end run's phase in (after the moves in
    and the algorithm's set-up, bench/endtoend.py) and of the one closing its repetition (after
    the moves out), and whether the moves' price holds it. Calibrate times its layout changes
    barrier to barrier, as the phases are timed: where their coefficients price the moves
    (Profile.alltoallv), the barrier after moves is in their price (the fit's start), and one
    after none is a start too: a barrier after no GEMMs (the one closing a multiplication waits
    for GEMMs the ranks time-slice: priced so, the phases in of 96 runs from block at 4-16
    ranks were a median 1.65x what they took). Emulated links (LinkModel.emulated) hold ranks
    asleep, not in GEMMs: :func:`pairs_seconds` adds the start to their time (the barrier after
    Cannon 4x4's moves in on an emulated 8 x 2 cluster took about 1 ms, the closing barrier's
    price 7.6). Without those coefficients, or on real links: the closing barrier's price."""
    at = profile.at(ranks_per_node)
    if P <= 1:
        return 0.0, False
    if (links is None or links.emulated) and at.alltoallv is not None:
        return at.alltoallv["start"], True
    return phase_barrier(P, profile, ranks_per_node, links), False


def price_moves(
    all_moves: Sequence[Move],
    P: int,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    relabel: bool = True,
    links=None,
    overlaps=None,
    tree=None,
    placed=None,
) -> MovePrice:
    """:func:`move_seconds` with the relabelling an end-to-end run makes (unless ``relabel`` is
    False), and the words the moves make the busiest rank send or receive; on a machine
    hierarchy ``tree`` (default: ``links``'), native mesh rank d laid on job rank ``placed[d]``
    before relabelling (a tree binding's Binding.tree_ranks; default d).

    Computed from the sparse overlaps (layouts.counting.overlap_pairs), never a P x P array,
    where it can be: a source with one holder per element sends exactly its overlaps (others:
    layouts.endpoints.move_counts), and the relabelling is the run's (layouts.endpoints.
    relabelling; on a machine hierarchy, ``links``, the one that moves whole subtrees).
    ``overlaps``: the moves' overlap_pairs, if already computed."""
    if placed is not None:
        placed = tuple(int(r) for r in placed)
    if not all_moves:
        return MovePrice(0.0, 0.0, 0, None, 0, has_moves=False)
    if overlaps is None:
        overlaps = move_overlaps(all_moves)
    found = None
    if relabel:
        hierarchy = tree if tree is not None else None if links is None else links.tree
        groups = subtrees_of(hierarchy)
        found = relabelling(all_moves, P, itemsize, groups, overlaps, placed)
    ranks = found.ranks if found is not None else placed
    pi = np.arange(P) if ranks is None else np.asarray(ranks, np.int64)
    saved = found.bytes_saved if found is not None else 0
    if links is None and all(one_holder(m.src, m.src_mesh) for m in all_moves):
        args = (pi, P, profile, itemsize, ranks_per_node)
        (t_in, t_out), words = _by_sides(all_moves, overlaps, *args)
        in_end, closing = ending_barriers(t_in, t_out, P, profile, ranks_per_node, links)
        return MovePrice(t_in + in_end, t_out, words, ranks, saved, closing)
    keys: dict = {True: [], False: []}  # src * P + dst of the moves in and out
    counts: dict = {True: [], False: []}
    words = 0
    for m, (s, d, c, _) in zip(all_moves, overlaps, strict=True):
        if one_holder(m.src, m.src_mesh):
            src, dst = (s, pi[d]) if m.into else (pi[s], d)
        else:  # replicated sources choose among holders: the house's exact counts
            dense = move_counts(m, ranks)
            src, dst = np.nonzero(dense)
            c = dense[src, dst]
        keys[m.into].append(src * P + dst)
        counts[m.into].append(c)
        off = src != dst
        words += int(_busiest(src[off], dst[off], c[off], P)[1].max(initial=0))
    phases = {True: 0.0, False: 0.0}
    for into in phases:  # the moves in run as one exchange (layouts/batch.py)
        if keys[into]:
            src, dst, count = summed_pairs(keys[into], counts[into], P)
            if count[src != dst].any():  # (else nothing moves: no price)
                pieces = phase_pieces(all_moves, into, pi, P, profile.at(ranks_per_node))
                args = (profile, itemsize, ranks_per_node, links, pieces)
                phases[into] = pairs_seconds(src, dst, count, P, *args)
    in_end, closing = ending_barriers(
        phases[True], phases[False], P, profile, ranks_per_node, links
    )
    return MovePrice(phases[True] + in_end, phases[False], words, ranks, saved, closing)


def ending_barriers(
    t_in: float, t_out: float, P: int, profile, ranks_per_node: int, links
) -> tuple[float, float]:
    """Seconds of the barriers ending the phase in and the repetition after moves in and out
    taking ``t_in`` and ``t_out`` (:func:`phase_end`: none where those moves' price holds it;
    the rule is the same for both, so the bounds, bench/model/move_bound.py, may pass the
    phases in either order)."""
    end, held = phase_end(P, profile, ranks_per_node, links)
    return tuple(0.0 if held and t > 0 else end for t in (t_in, t_out))


def _by_sides(all_moves, overlaps, pi, P: int, profile, itemsize: int, rpn: int) -> tuple:
    """((seconds in, seconds out), words) of :func:`price_moves` where every source holds each
    element once and no links price messages: from each phase's pairs summed per side
    (bench/model/phase_loads.py), native rank x on job rank ``pi[x]``."""
    seconds, words = [0.0, 0.0], 0
    for phase, into in enumerate((True, False)):
        group = [o for m, o in zip(all_moves, overlaps, strict=True) if m.into == into]
        each = [PhasePairs.of([o], into, P) for o in group]
        for pairs in each:  # the busiest rank of each move
            words += int(pairs.per_rank(pi)[1].max(initial=0))
        if group:  # the moves in run as one exchange (layouts/batch.py)
            per_rank = (each[0] if len(each) == 1 else PhasePairs.of(group, into, P)).per_rank(pi)
            if per_rank[1].any():
                pieces = phase_pieces(all_moves, into, pi, P, profile.at(rpn))
                seconds[phase] = ranks_seconds(per_rank, profile, itemsize, rpn, pieces=pieces)
    return tuple(seconds), words


def plan_moves(users: dict[str, UserLayout], plan) -> list[Move]:
    """The moves between the user's layouts and an algorithm plan's native A, B and C."""
    return moves(users, {n: (getattr(plan, n), plan.mesh) for n in ("A", "B", "C")})


def redistribution_seconds(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
) -> float:
    """Seconds to move ``src`` on ``src_mesh`` into ``dst`` on ``dst_mesh`` (same rank order)."""
    if str(src) == str(dst) and src_mesh == dst_mesh:
        return 0.0
    counts = exchange_counts(src, src_mesh, dst, dst_mesh)
    return transfer_seconds(counts, itemsize, profile, ranks_per_node)


__all__ = [
    "MovePrice",
    "move_seconds",
    "pairs_seconds",
    "phase_barrier",
    "phase_end",
    "phase_pieces",
    "ending_barriers",
    "plan_moves",
    "price_moves",
    "redistribution_seconds",
    "transfer_seconds",
]
