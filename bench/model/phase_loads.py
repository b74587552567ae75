"""A redistribution phase's per-rank loads under any rank order, without listing its pairs
again for each order.

The relabelling (layouts/relabel.py) lays native mesh rank x on job rank ``ranks[x]``; that only
decides which pair of each native rank stays in place. So each side's pairs and elements are
summed once, per job rank and per native rank, and an order costs a lookup of the P pairs it
keeps: what a rank sends, receives, packs, unpacks and keeps (redistribution._per_rank) follows
in O(P), where mapping and re-summing every pair took most of pricing a layouts' moves at
P = 8192.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layouts.counting import summed


@dataclass(frozen=True)
class PhasePairs:
    """The pairs (job rank, native rank, elements) of one phase (the moves in, A and B as one
    exchange, or the move out), each pair once: ``keys`` sorted, ``major * P + minor`` with
    the job rank major where ``job_major`` (moves in: job rank s sends to native rank d) and
    the native rank major otherwise (move out), as layouts.counting.overlap_pairs sorts them;
    and per rank of each side, its pairs and elements."""

    P: int
    keys: np.ndarray
    counts: np.ndarray
    job_major: bool
    job_pairs: np.ndarray
    job_elements: np.ndarray
    native_pairs: np.ndarray
    native_elements: np.ndarray

    @classmethod
    def of(cls, overlaps: Sequence[tuple], into: bool, P: int) -> PhasePairs:
        """From overlap_pairs' (s, d, count, needed) of the phase's moves: in (``into``: s a
        job rank, d a native one) or out (s native, d job)."""
        if len(overlaps) == 1:  # each pair once already, in order
            s, d, counts, _ = overlaps[0]
            keys = s * P + d
        else:
            keys, counts = summed(
                np.concatenate([o[0] * P + o[1] for o in overlaps]),
                np.concatenate([o[2] for o in overlaps]),
            )
            s, d = keys // P, keys % P
        job, native = (s, d) if into else (d, s)
        return cls(
            P,
            keys,
            counts,
            into,
            np.bincount(job, minlength=P),
            _sums(job, counts, P),
            np.bincount(native, minlength=P),
            _sums(native, counts, P),
        )

    def per_rank(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(messages, elements, copied) per job rank with native rank x on job rank
        ``ranks[x]``: the larger of the pairs (and elements) it sends and receives off its
        own, and the elements it packs, unpacks and keeps (redistribution._per_rank)."""
        P = self.P
        native = np.arange(P)
        wanted = ranks * P + native if self.job_major else native * P + ranks
        at = np.minimum(np.searchsorted(self.keys, wanted), max(self.keys.size - 1, 0))
        hit = self.keys[at] == wanted if self.keys.size else np.zeros(P, bool)
        kept = np.where(hit, self.counts[at] if self.keys.size else 0, 0)
        hosted = np.empty(P, np.int64)  # job rank q hosts native rank hosted[q]
        hosted[ranks] = native
        messages = np.maximum(self.job_pairs - hit[hosted], (self.native_pairs - hit)[hosted])
        elements = np.maximum(
            self.job_elements - kept[hosted], (self.native_elements - kept)[hosted]
        )
        return messages, elements, self.job_elements + self.native_elements[hosted]


def _sums(rank: np.ndarray, counts: np.ndarray, P: int) -> np.ndarray:
    """Elements per rank, exact (int64)."""
    return np.rint(np.bincount(rank, counts, minlength=P)).astype(np.int64)


__all__ = ["PhasePairs"]
