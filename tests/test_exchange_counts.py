"""exchange_counts, overlap_counts and piece_counts (layouts.counting) against a brute-force count
from the block maps, element by element, for layouts on different meshes (serial, no MPI)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from layouts import LayoutError, parse_layout
from layouts.blockmap import grains, held_indices
from layouts.counting import exchange_counts, overlap_counts, piece_counts, placements
from layouts.named import user_layout
from topology import AbstractMesh, MeshError


def _holders(layout, mesh, skip_partial: bool) -> dict[tuple[int, int], list[int]]:
    """Element -> ranks holding it at step 0 (P@ copies off coordinate 0 left out if asked)."""
    out: dict[tuple[int, int], list[int]] = {}
    shape = layout.logical_shape
    for r in range(mesh.size):
        coords = mesh.coords(r)
        if skip_partial and any(coords[lv] != 0 for lv in layout.partial):
            continue
        held = held_indices(layout, coords)
        for e in itertools.product(
            *(ix[ix < n].tolist() for ix, n in zip(held, shape, strict=True))
        ):
            out.setdefault(e, []).append(r)
    return out


def brute(src, smesh, dst, dmesh, ranks=None):
    P = smesh.size
    to_comm = list(range(P)) if ranks is None else list(ranks)
    sh, dh = _holders(src, smesh, False), _holders(dst, dmesh, True)
    counts = np.zeros((P, P), np.int64)
    overlap = np.zeros((P, P), np.int64)
    needed = np.zeros(P, np.int64)
    for e, dests in dh.items():
        for d in dests:
            t = to_comm[d]
            counts[t if t in sh[e] else min(sh[e]), t] += 1
            needed[d] += 1
            for s in sh[e]:
                overlap[s, d] += 1
    return counts, overlap, needed


def _lay(text, shape):
    return parse_layout(text).with_shape(shape)


def cases(shape=(7, 10)):
    """(name, layout, mesh) on 4 ranks: named layouts and algorithm-like ones."""
    m, n = shape
    xy, yx = AbstractMesh.of(x=2, y=2), AbstractMesh.of(y=2, x=2)
    out = [(s, *user_layout(s, shape, 4)) for s in ("rows", "cols", "block", "block-cyclic:2")]
    c2 = lambda k: -(-k // 2)  # noqa: E731
    out += [
        ("summa_yx", _lay(f"((2_x, {c2(m)}), (2_y, {c2(n)}))", shape), yx),
        ("cannon_a", _lay(f"((2_x, {c2(m)}), (2_Time, {c2(n)}); R@[x + y])", shape), xy),
        ("rows_repl", _lay(f"((2_x, {c2(m)}), ({n}))", shape), xy),
        ("replicated", _lay(f"(({m}), ({n}))", shape), xy),
        ("window", _lay(f"(({m}), (4_Time, {-(-n // 4)}); R@[x + 2*y, window=2])", shape), xy),
        # a window as wide as the Time axis: every residue has the same holders
        (
            "window_all",
            _lay(f"((2_x, {c2(m)}), (4_Time, {-(-n // 4)}); R@[x + y, window=4])", shape),
            xy,
        ),
    ]
    return out


DST_ONLY = [("partial_y", _lay("((2_x, 4), (10); P@[y])", (7, 10)), AbstractMesh.of(x=2, y=2))]


@pytest.mark.parametrize("ranks", [None, (2, 0, 3, 1)])
def test_counts_match_brute_force(ranks):
    all_cases = cases()
    for (sn, s, sm), (dn, d, dm) in itertools.product(all_cases, all_cases + DST_ONLY):
        want_counts, want_overlap, want_needed = brute(s, sm, d, dm, ranks)
        got = exchange_counts(s, sm, d, dm, ranks)
        assert np.array_equal(got, want_counts), (sn, dn, ranks)
        H, needed = overlap_counts(s, sm, d, dm)
        assert np.array_equal(H, want_overlap) and np.array_equal(needed, want_needed), (sn, dn)
        # what moves = what is needed minus what is already in place
        to_comm = range(4) if ranks is None else ranks
        kept = sum(H[to_comm[k], k] for k in range(4))
        assert got.sum() - np.trace(got) == needed.sum() - kept, (sn, dn, ranks)


def _positions(layout, mesh, skip_partial: bool) -> dict:
    """Element -> {rank: its flat position in that rank's block} (a block is the product of its
    held indices, C-ordered; P@ copies off coordinate 0 left out if asked)."""
    out: dict = {}
    for r in range(mesh.size):
        coords = mesh.coords(r)
        if skip_partial and any(coords[lv] != 0 for lv in layout.partial):
            continue
        rows, cols = held_indices(layout, coords)
        for a, i in enumerate(rows.tolist()):
            for b, j in enumerate(cols.tolist()):
                out.setdefault((i, j), {})[r] = a * cols.size + b
    return out


def brute_pieces(src, smesh, dst, dmesh):
    """Pieces each rank copies, element by element: a piece starts at every element whose
    predecessor in its row does not go from the same source (the lowest holder) to the same
    destination holder one position before in both blocks."""
    sp, dp = _positions(src, smesh, False), _positions(dst, dmesh, True)
    sent, got = np.zeros(smesh.size, np.int64), np.zeros(dmesh.size, np.int64)
    m, n = src.logical_shape
    for i, j in itertools.product(range(m), range(n)):
        s = min(sp[i, j])
        before = sp.get((i, j - 1), {}), dp.get((i, j - 1), {})
        for d, at in dp[i, j].items():
            if not (
                j
                and min(before[0]) == s
                and before[0][s] == sp[i, j][s] - 1
                and before[1].get(d, -2) == at - 1
            ):
                sent[s] += 1
                got[d] += 1
    return sent, got


def test_pieces_match_brute_force():
    """Exact but where a window narrower than its Time axis is moved: there a piece is counted
    at every Time chunk, though a rank holding consecutive chunks holds them side by side."""
    all_cases = cases()
    for (sn, s, sm), (dn, d, dm) in itertools.product(all_cases, all_cases + DST_ONLY):
        want = brute_pieces(s, sm, d, dm)
        got = piece_counts(s, sm, d, dm)
        if "window" in (sn, dn):
            assert all((g >= w).all() for g, w in zip(got, want, strict=True)), (sn, dn)
            continue
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (sn, dn)
    names = ["rows", "cols", "block", "block-cyclic:2", "block-cyclic:3"]
    for P, shape in itertools.product((2, 3, 6), ((11, 5), (46, 20))):
        for a, b in itertools.product(names, names):
            (s, sm), (d, dm) = user_layout(a, shape, P), user_layout(b, shape, P)
            want = brute_pieces(s, sm, d, dm)
            got = piece_counts(s, sm, d, dm)
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (a, b, P)


@pytest.mark.parametrize("P", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("shape", [(11, 5), (46, 20)])
def test_counts_other_sizes(P, shape):
    # (46, 20): grains of 2-23 indices, counted once per step that divides both layouts'
    names = ["rows", "cols", "block", "block-cyclic:2", "block-cyclic:3"]
    for a, b in itertools.product(names, names):
        s, sm = user_layout(a, shape, P)
        d, dm = user_layout(b, shape, P)
        want, _, _ = brute(s, sm, d, dm)
        got = exchange_counts(s, sm, d, dm)
        assert np.array_equal(got, want), (a, b, P)
        assert got.sum() == shape[0] * shape[1]


def test_counts_big_without_enumerating():
    # 2^16 x 2^16 on 256 ranks: per-dimension counting, no element enumeration
    s, sm = user_layout("block-cyclic:64", (65536, 65536), 256)
    d, dm = user_layout("rows", (65536, 65536), 256)
    c = exchange_counts(s, sm, d, dm)
    assert c.sum() == 65536**2 and np.all(c.sum(axis=0) == 65536**2 // 256)


def test_counting_samples_one_index_per_grain():
    # the vectors counting works on hold one entry per grain, not per index: a 2^20-square
    # matrix costs what a small one does
    n = 1 << 20
    s, sm = user_layout("block", (n, n), 8)
    d, dm = user_layout("block-cyclic:4096", (n, n), 8)
    assert grains(s) == (n // 2, n // 4) and grains(d) == (4096, 4096)
    splace, dplace = placements(s, sm, d, dm, coarse=True)
    assert [len(p) for p in splace.rank_part + dplace.rank_part] == [n // 4096] * 4
    H, needed = overlap_counts(s, sm, d, dm)
    assert H.sum() == needed.sum() == n * n and (needed == n * n // 8).all()
    with pytest.raises(ValueError, match="cannot locate"):
        splace.locate((np.arange(2), np.arange(2)))


@pytest.mark.parametrize("seed", range(4))
def test_windowed_offsets_match_their_definition(seed):
    # layouts.redistribute._windowed: residue r is held by the offsets solving r - w for
    # 0 <= w < window, sorted, -1 padded; every residue with as many offsets (one array) or not
    from layouts.redistribute import _windowed

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    uniform = seed % 2 == 0
    sizes = [2] * n if uniform else rng.integers(0, 3, n)
    perm = rng.permutation(100)
    solutions, k = [], 0
    for size in sizes:
        solutions.append(sorted(perm[k : k + size].tolist()))  # each offset in one residue
        k += size
    for window in range(1, n + 1):
        got = _windowed(solutions, window)
        for r in range(n):
            want = sorted({o for w in range(window) for o in solutions[(r - w) % n]})
            row = got[r][got[r] >= 0].tolist()
            assert row == want and (got[r][len(want) :] == -1).all(), (seed, window, r)


def test_bad_inputs():
    s, sm = user_layout("block", (8, 8), 4)
    d, dm = user_layout("rows", (8, 8), 2)
    with pytest.raises(MeshError, match="must be the same ranks"):
        exchange_counts(s, sm, d, dm)
    d, dm = user_layout("rows", (8, 9), 4)
    with pytest.raises(LayoutError, match="differs from the source"):
        exchange_counts(s, sm, d, dm)
    d, dm = user_layout("rows", (8, 8), 4)
    with pytest.raises(MeshError, match="not a permutation"):
        exchange_counts(s, sm, d, dm, ranks=[0, 1, 1, 3])
    with pytest.raises(LayoutError, match="must be reduced"):
        exchange_counts(*DST_ONLY[0][1:], d, dm)
