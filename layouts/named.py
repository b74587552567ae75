"""The user's layouts of a matrix, by name or as explicit text with the mesh they live on.

``user_layout(spec, (rows, cols), P)`` returns ``(TensorLayout, AbstractMesh)``; ranks are
row-major over the mesh axes (rank r of the job is rank r of the mesh). Specs:

``rows``            1-D row blocks: mesh ``r=P``, layout ``((P_r, ceil(M/P)), (N))``.
``cols``            1-D column blocks: mesh ``c=P``, layout ``((M), (P_c, ceil(N/P)))``.
``block``           2-D blocks on the most square grid p x q = P with p <= q (``grid(P)``):
                    mesh ``r=p,c=q``, layout ``((p_r, ceil(M/p)), (q_c, ceil(N/q)))``.
``block-cyclic:NB`` ScaLAPACK's 2-D block-cyclic layout with MB = NB, RSRC = CSRC = 0, on the
                    same p x q grid: NB x NB blocks dealt round-robin, block (I, J) on process
                    row I mod p and column J mod q. Layout
                    ``((ceil(M/(NB p)), p_r, NB), (ceil(N/(NB q)), q_c, NB))``: the device factor
                    between two memory factors deals the blocks round-robin.
``LAYOUT@MESH``     any TensorLayout text (a PadLayout too) or SBP text with the mesh it lives on,
                    written after ``@`` the way the mesh prints: ``axis=size`` entries joined by
                    ``,``, first axis most significant, e.g. ``((4_r, 8), (2_c, 16))@r=4,c=2``,
                    ``(30,32)/((4_r, 8), (2_c, 16))@r=4,c=2``, ``[r=S(0), c=S(1)]@r=4,c=2``.
                    The notation's own ``@`` is always followed by ``[`` (``B@[...]``,
                    ``P@[...]``, ``R@[...]``), so the one ``@`` followed by anything else
                    starts the mesh. A layout without a ``(M,N)/`` prefix must have exactly
                    the matrix's shape; SBP text pads by itself. ``f"{layout}@{mesh}"``
                    prints a layout and its mesh in this form.

ScaLAPACK's process grid: BLACS_GRIDINIT's default order ('R', and any value other than 'C')
numbers process (i, j) of an nprow x npcol grid ``i * npcol + j``, row-major; that is this
mesh's order, so process (i, j) is mesh coordinate r=i, c=j. ScaLAPACK stores each local array
column-major (Fortran, leading dimension LLD); the layouts here store it row-major (the suite's
local blocks are row-major everywhere): the same local rows and columns in the same local index
order (numroc's), transposed in memory. Write the memory strides explicitly for column-major.

Sizes that do not divide are padded (a PadLayout), as the algorithms pad: the last rank of a
row blocking may hold padding only. Bad specs raise LayoutError, or MeshError for the mesh,
with one line naming the problem.
"""

from __future__ import annotations

import math
import numbers
import re

from topology.mesh import AbstractMesh, MeshError

from .blockmap import grains
from .parser import parse_layout
from .redistribute import check_on_mesh, check_whole
from .sbp import parse_sbp
from .tensorlayout import Factor, LayoutError, TensorLayout

NAMES = ("rows", "cols", "block", "block-cyclic:NB")
_MESH_ENTRY = re.compile(r"\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\d+)\s*", re.ASCII)


def grid(P: int) -> tuple[int, int]:
    """The most square p x q = P with p <= q (ScaLAPACK's usual nprow <= npcol)."""
    p = max(d for d in range(1, math.isqrt(P) + 1) if P % d == 0)
    return p, P // p


def user_layout(spec: str, shape: tuple[int, int], P: int) -> tuple[TensorLayout, AbstractMesh]:
    """The layout ``spec`` names for a matrix of logical ``shape`` on ``P`` ranks, and its mesh."""
    if not isinstance(P, numbers.Integral) or P < 1:
        raise MeshError(f"a layout needs a positive rank count, not {P!r}")
    P = int(P)
    shape = _check_shape(spec, shape)
    text = spec.strip() if isinstance(spec, str) else ""
    if not text:
        raise LayoutError(str(spec), f"empty layout spec (use {', '.join(NAMES)} or LAYOUT@MESH)")
    if text in ("rows", "cols", "block"):
        return _named(text, shape, P)
    if text.startswith("block-cyclic"):
        return _block_cyclic(text, shape, P)
    body, mesh_text = split_mesh(text)
    if mesh_text is None:
        if text[0] not in "([":
            raise LayoutError(
                text,
                f"unknown layout name (use native, {', '.join(NAMES)}, or a "
                f"TensorLayout or SBP text with its mesh: LAYOUT@r={grid(P)[0]},c={grid(P)[1]})",
            )
        raise LayoutError(
            text,
            "state the mesh the layout lives on after '@', e.g. "
            f"{text}@{_mesh_hint(text, P)} (axes in rank order, first most significant)",
        )
    parsed = parse_sbp(body) if body.startswith("[") else parse_layout(body)  # syntax first
    mesh = parse_mesh(mesh_text, P)
    layout = parsed.to_layout(shape, mesh.sizes) if body.startswith("[") else parsed
    _check_explicit(layout, body, shape, mesh)
    return layout, mesh


def _mesh_hint(body: str, P: int) -> str:
    """A mesh of P ranks for a layout given without one, from its own axes: a TensorLayout's
    device factors' sizes, an axis it only names (B@[...], P@[...], R@[...]) taking the ranks
    left; an SBP's axes on P or the most square grid. The text is parsed first, so a malformed
    layout gets its own error, not this hint."""
    if body.startswith("["):
        axes = [axis for axis, _ in parse_sbp(body).placements]
        sizes = [P] if len(axes) == 1 else [*grid(P), *[1] * (len(axes) - 2)]
        return ",".join(f"{a}={n}" for a, n in zip(axes, sizes, strict=True))
    layout = parse_layout(body)
    sizes = dict(layout.levels)
    named = [*layout.broadcast, *layout.partial]
    if layout.rotation:
        named += [axis for axis, _ in layout.rotation.offset]
    rest = [axis for axis in dict.fromkeys(named) if axis not in sizes]
    left, known = P // math.prod(sizes.values()), P % math.prod(sizes.values()) == 0
    for i, axis in enumerate(rest):
        sizes[axis] = left if known and i == 0 else 1
    return ",".join(f"{a}={n}" for a, n in sizes.items()) or f"r={P}"


def split_mesh(text: str) -> tuple[str, str | None]:
    """(layout text, mesh text or None): split at the one '@' that no '[' follows."""
    at = [m.start() for m in re.finditer(r"@(?!\s*\[)", text, re.ASCII)]
    if not at:
        return text, None
    if len(at) > 1:
        raise LayoutError(text, "more than one '@' states a mesh (write LAYOUT@MESH once)")
    return text[: at[0]].strip(), text[at[0] + 1 :].strip()


def parse_mesh(text: str, P: int) -> AbstractMesh:
    """``r=4,c=2`` -> AbstractMesh (ranks row-major, first axis most significant) of P ranks."""
    axes = []
    for part in text.split(","):
        m = _MESH_ENTRY.fullmatch(part)
        if not m:
            raise MeshError(
                f"invalid mesh {text!r}: cannot read {part.strip()!r} "
                f"(write axis=size entries joined by ',', e.g. r=4,c=2)"
            )
        axes.append((m.group(1), int(m.group(2))))
    try:
        mesh = AbstractMesh(tuple(axes))
    except MeshError as err:
        raise MeshError(f"invalid mesh {text!r}: {err}") from None
    if mesh.size != P:
        raise MeshError(
            f"invalid mesh {text!r}: its axes multiply to {mesh.size} ranks, the job has {P}"
        )
    return mesh


def _check_shape(spec, shape) -> tuple[int, int]:
    try:
        rows, cols = (int(n) for n in shape)
    except (TypeError, ValueError):
        raise LayoutError(str(spec), f"matrix shape {shape!r} is not two sizes") from None
    if rows < 1 or cols < 1:
        raise LayoutError(str(spec), f"matrix shape {rows}x{cols} needs positive sizes")
    return rows, cols


def _dim(*factors: Factor) -> tuple[Factor, ...]:
    """A dimension without its size-1 factors (the house convention), ``1`` if none is left."""
    kept = tuple(f for f in factors if f.size > 1)
    return kept or (Factor(1),)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _named(name: str, shape: tuple[int, int], P: int) -> tuple[TensorLayout, AbstractMesh]:
    M, N = shape
    if name == "rows":
        mesh = AbstractMesh((("r", P),))
        dims = (_dim(Factor(P, "r"), Factor(_ceil(M, P))), _dim(Factor(N)))
    elif name == "cols":
        mesh = AbstractMesh((("c", P),))
        dims = (_dim(Factor(M)), _dim(Factor(P, "c"), Factor(_ceil(N, P))))
    else:
        p, q = grid(P)
        mesh = AbstractMesh((("r", p), ("c", q)))
        dims = (
            _dim(Factor(p, "r"), Factor(_ceil(M, p))),
            _dim(Factor(q, "c"), Factor(_ceil(N, q))),
        )
    return TensorLayout(dims, shape), mesh


def _block_cyclic(text: str, shape: tuple[int, int], P: int) -> tuple[TensorLayout, AbstractMesh]:
    m = re.fullmatch(r"block-cyclic\s*:\s*(-?\d{1,18})", text, re.ASCII)
    if not m:
        raise LayoutError(
            text, "write block-cyclic:NB with NB a positive block size, e.g. block-cyclic:64"
        )
    nb = int(m.group(1))
    if nb < 1:
        raise LayoutError(text, f"block size NB={nb} must be at least 1")
    M, N = shape
    p, q = grid(P)
    mesh = AbstractMesh((("r", p), ("c", q)))
    # a block wider than the matrix holds it all, as the matrix's own size does (no more
    # padding than that: NB = 10^8 on 8 x 8 made the plan's block maps 17 GB)
    mb, nb = min(nb, M), min(nb, N)
    dims = (
        _dim(Factor(_ceil(M, mb * p)), Factor(p, "r"), Factor(mb)),
        _dim(Factor(_ceil(N, nb * q)), Factor(q, "c"), Factor(nb)),
    )
    return TensorLayout(dims, shape), mesh


def _check_explicit(
    layout: TensorLayout, body: str, shape: tuple[int, int], mesh: AbstractMesh
) -> None:
    if layout.ndim != 2:
        raise LayoutError(body, f"a matrix layout needs 2 dimensions, this one has {layout.ndim}")
    given = tuple(layout.logical_shape)
    if given != shape:
        size = "x".join(map(str, given))
        fits = all(n <= m for n, m in zip(shape, layout.padded_shape, strict=True))
        padded = f"({shape[0]},{shape[1]})/{body}@{mesh}"
        hint = f" (pad it: {padded})" if fits and not layout.is_padded else ""
        raise LayoutError(body, f"its shape is {size}, the matrix is {shape[0]}x{shape[1]}{hint}")
    check_on_mesh(layout, mesh)
    check_whole(layout, mesh, grains(layout))
