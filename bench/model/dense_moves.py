"""Moves too dense to hold their rank pairs priced a chunk of pairs at a time.

Where every rank's part overlaps most others' (block-cyclic:64 into 3-D blocks at thousands of
ranks) a move pairs up to P^2 ranks, more than layouts.endpoints.MAX_PAIRS: its overlaps are
not held (and not relabelled: the run keeps the order laid, layouts.endpoints.relabelling).
Here they are counted as they come (layouts.counting.overlap_chunks) into what
bench/model/move_price.py prices a phase by: per job rank, the distinct ranks it sends to
and receives from (a byte per pair of ranks: 64 MiB at P = 8192), the elements it sends and
receives between ranks and copies, and on a cluster the seconds its messages between nodes
take on the links; so the price is the one the held pairs give, in memory that does not grow
with them. Only sources holding each element once (the user's layouts, an algorithm's C): a
replicated source's receivers choose among its holders (layouts.endpoints.move_counts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from layouts import endpoints
from layouts.counting import overlap_chunks
from layouts.endpoints import Move, check_pairs
from layouts.redistribute import one_holder
from layouts.tensorlayout import TooManyPairs

from .move_price import MovePrice, ending_barriers, held_start, ranks_seconds
from .profile import Profile

_ROWS = 512  # rows of the P x P bits scanned at once on a cluster (their pairs' levels)


def streamed_price(
    all_moves: Sequence[Move],
    P: int,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    links=None,
    placed=None,
) -> MovePrice:
    """bench.model.redistribution.price_moves without relabelling (native mesh rank d on job
    rank ``placed[d]``, default d) for moves too dense to hold their pairs; TooManyPairs (one
    line) beyond layouts.endpoints.MAX_STREAMED pairs, at more than 2^14 ranks, or where a
    source holds elements more than once."""
    check_pairs(all_moves, endpoints.MAX_STREAMED, "counts")
    pi = np.arange(P) if placed is None else np.asarray(placed, np.int64)
    for m in all_moves:
        if P > 1 << 14 or not one_holder(m.src, m.src_mesh):
            why = "P > 16384" if P > 1 << 14 else "a source holds elements more than once"
            raise TooManyPairs(
                f"{m.matrix} {m.src} -> {m.dst}",
                f"at P = {P} these moves pair too many rank parts to hold, and {why}: they are "
                "not priced (choose layouts closer to the algorithm's)",
            )
    seconds, words = {True: 0.0, False: 0.0}, 0
    for into in seconds:
        group = [m for m in all_moves if m.into == into]
        if not group:
            continue
        phase = _Phase(P, itemsize, links)
        for m in group:
            words += phase.move(m, pi)
        if phase.seen.any():  # something moves between ranks (pieces: as phase_pieces says)
            counted = (profile.at(ranks_per_node).alltoallv or {}).get("piece", 0.0) > 0
            pieces = np.rint(phase.pieces).astype(np.int64) if counted else None
            seconds[into] = phase.seconds(profile, itemsize, ranks_per_node, pieces)
    in_end, closing = ending_barriers(
        seconds[True], seconds[False], P, profile, ranks_per_node, links
    )
    ranks = None if placed is None else tuple(int(r) for r in placed)
    return MovePrice(seconds[True] + in_end, seconds[False], words, ranks, 0, closing)


class _Phase:
    """One phase's moves (in: A and B as one exchange; out: C) counted pair chunk by chunk."""

    def __init__(self, P: int, itemsize: int, links):
        self.P, self.itemsize, self.links = P, itemsize, links
        self.seen = np.zeros(P * P, bool)  # [a * P + b]: a sends b something
        self.sent, self.recv, self.copied = np.zeros(P), np.zeros(P), np.zeros(P)
        self.pieces = np.zeros(P)  # copied, each end (layouts.counting.piece_counts)
        if links is not None:
            self.priced, self.alpha, self.beta = links.level_prices()  # by pair_levels' index
            self.linked_out, self.linked_in = np.zeros(P), np.zeros(P)

    def move(self, m: Move, pi: np.ndarray) -> int:
        """Count move ``m``'s pairs (native rank d on job rank pi[d]); the elements its
        busiest rank sends or receives between ranks."""
        P = self.P
        out, into, kept = np.zeros(P), np.zeros(P), np.zeros(P)
        laid = np.array_equal(pi, np.arange(P))
        for s, d, w, runs in overlap_chunks(m.src, m.src_mesh, m.dst, m.dst_mesh):
            if not laid:  # job ranks: a sends b w elements
                s, d = (s, pi[d]) if m.into else (pi[s], d)
            self.pieces += np.bincount(s, runs, P) + np.bincount(d, runs, P)
            self.seen[s * P + d] = True  # (the diagonal's cleared at the end)
            out += np.bincount(s, w, P)  # (and what each rank keeps taken off at the end)
            into += np.bincount(d, w, P)
            same = np.flatnonzero(s == d)
            kept += np.bincount(s[same], w[same], P)
            if self.links is None:
                continue
            off = s != d
            a, b, w = s[off], d[off], w[off]
            at = self.links.pair_levels(a, b)
            net = self.priced[at]
            held = w[net] * self.itemsize * self.beta[at[net]]
            self.linked_out += np.bincount(a[net], held, P)
            self.linked_in += np.bincount(b[net], held, P)
            if not self.links.emulated:  # emulated links' messages also move here
                self.sent -= np.bincount(a[net], w[net], P)
                self.recv -= np.bincount(b[net], w[net], P)
        self.seen[np.arange(P) * (P + 1)] = False  # a rank sends itself nothing
        out -= kept
        into -= kept
        self.sent += out
        self.recv += into
        self.copied += out + into + 2 * kept  # packed, unpacked, or kept (copied once each end)
        return int(np.rint(max(out.max(initial=0), into.max(initial=0))))

    def seconds(self, profile: Profile, itemsize: int, rpn: int, pieces) -> float:
        """The phase priced as bench.model.redistribution.pairs_seconds prices its pairs."""
        P, linked = self.P, None
        seen = self.seen.reshape(P, P)
        if self.links is None:
            messages = np.maximum(seen.sum(1), seen.sum(0))
        else:  # each distinct pair's start on the links, and the messages left here
            n_out, n_in = np.zeros(P, np.int64), np.zeros(P, np.int64)
            alpha_out, alpha_in, crossing = np.zeros(P), np.zeros(P), False
            for lo in range(0, P, _ROWS):
                a, b = np.nonzero(seen[lo : lo + _ROWS])
                a += lo
                at = self.links.pair_levels(a, b)
                net = self.priced[at]
                crossing = crossing or bool(net.any())
                alpha_out += np.bincount(a[net], self.alpha[at[net]], P)
                alpha_in += np.bincount(b[net], self.alpha[at[net]], P)
                local = np.ones(a.size, bool) if self.links.emulated else ~net
                n_out += np.bincount(a[local], minlength=P)
                n_in += np.bincount(b[local], minlength=P)
            messages = np.maximum(n_out, n_in)
            if crossing:
                linked = np.maximum(self.linked_out + alpha_out, self.linked_in + alpha_in)
                linked = linked + held_start(self.links, profile, rpn)
        elements = np.rint(np.maximum(self.sent, self.recv)).astype(np.int64)
        return ranks_seconds(
            (messages, elements, self.copied), profile, itemsize, rpn, linked, pieces
        )


__all__ = ["streamed_price"]
