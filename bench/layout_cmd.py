"""`distmm layout`: show what a layout notation means, as text, JSON or a picture.

    distmm layout NOTATION [--levels NAME=SIZE,...] [--sbp SHAPE] [--json] [--plot FILE.png]

The text report gives the canonical form, the shapes, the device levels, the replicated levels,
the Time axis and rotation, the local size and what every device holds (step 0). ``--json``
prints one object with per-element arrays (device index per level, local address, Time chunk);
``--plot`` draws the matrix coloured by owning device. ``--sbp 10,7`` reads NOTATION as an SBP
placement (``[x=S(0), y=S(1)]``) over the mesh that ``--levels`` gives. Nothing here loads MPI.
"""

from __future__ import annotations

import argparse
import json

from layouts import LayoutError, parse_layout, parse_sbp

from .errors import UsageError
from .layout_view import all_levels, check_small, describe, parse_levels, text_report
from .units import parse_ints


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notation",
        metavar="NOTATION",
        help="a TensorLayout such as '((4_PE, 3:8), (8:1))' (or an SBP placement with --sbp)",
    )
    parser.add_argument(
        "--levels",
        metavar="NAME=SIZE,...",
        default="",
        help="device level sizes, e.g. PE=4,MAB=2; a level the layout does not split is replicated",
    )
    parser.add_argument(
        "--sbp",
        metavar="SHAPE",
        default=None,
        help="read NOTATION as an SBP placement of a tensor of this shape "
        "(e.g. 10,7) on the mesh given by --levels",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with per-element placement arrays",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="draw the matrix coloured by owning device into FILE.png",
    )


def main(args: argparse.Namespace) -> int:
    sizes = parse_levels(args.levels, args.notation)
    if args.sbp is not None:
        try:
            shape = parse_ints(args.sbp)
        except ValueError:
            raise UsageError(
                f"invalid --sbp shape {args.sbp!r}: write positive sizes like 10,7"
            ) from None
        placement = parse_sbp(args.notation)
        axes = [axis for axis, _ in placement.placements]
        missing = [axis for axis in axes if axis not in sizes]
        if missing:
            raise LayoutError(
                args.notation,
                f"give the size of every mesh axis with --levels, e.g. --levels "
                f"{','.join(f'{a}=2' for a in axes)} (missing: {', '.join(missing)})",
            )
        layout = placement.to_layout(shape, sizes)
    else:
        layout = parse_layout(args.notation)
    levels = all_levels(layout, sizes, args.notation)
    if args.json or args.plot:
        check_small(layout, args.notation, padded=bool(args.plot))
    if args.plot:
        from .layout_plot import plot_layout

        plot_layout(layout, args.plot, args.notation)
    if args.json:
        print(json.dumps(describe(layout, levels, sizes)), flush=True)
    else:
        print(text_report(layout, levels, sizes), flush=True)
        if args.plot:
            print(f"plot           {args.plot}", flush=True)
    return 0
