"""Count the pieces in a machine profile's timed layout changes (calibrations from before
calibrate counted them), so that the model refits its layout changes with a cost per piece.

    .venv/bin/python scripts/profile_pieces.py PROFILE [PROFILE ...] [--check]

Calibrate times each of bench.calibration_counts.A2AV_MOVES at each rank count and records
[messages, bytes, copied bytes, seconds]; since pieces were counted it records [messages,
bytes, copied bytes, pieces, seconds]. A profile's layout changes are only those moves, so each
recorded row is matched to the move whose loads it holds (at that count's rank count and ranks
per core, on the sizes calibrate times) and that move's pieces are put in before the seconds:
the timings are left as measured. A count whose rows do not all match is left as it was (and
named). Written in place, atomically; ``--check`` says what it would change.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.calibration_counts import A2AV_BYTES, A2AV_MOVES, timed_move  # noqa: E402
from bench.files import write_json_atomic  # noqa: E402
from bench.model.fits import A2AV_TERMS  # noqa: E402


def with_pieces(count: dict, cores: int) -> list | None:
    """The count's timed rows with the pieces put in, or None where a row matches no move."""
    a2av, g = count["alltoallv"], count["ranks"]
    # loads recorded before calibrate kept per_core were cores / g times the loads (fits.py)
    scale = 1.0 if "per_core" in a2av or g >= cores else cores / g
    per_core = max(g / cores, 1.0)
    known = []
    for nbytes in A2AV_BYTES:
        for names in A2AV_MOVES:
            found = timed_move(names, nbytes, g, per_core)
            if found is not None:
                known.append([x * scale for x in found.loads])
    out = []
    for row in a2av.get("timed", []):
        if len(row) == len(A2AV_TERMS):  # [M, B, C, N, seconds]: counted already
            out.append(row)
            continue
        match = [k for k in known if all(_close(a, b) for a, b in zip(k[:3], row[:3], strict=True))]
        if not match:
            return None
        out.append([*row[:3], match[0][3], row[3]])
    return out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--check", action="store_true", help="say what would change, write nothing")
    args = ap.parse_args()
    for path in args.profiles:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            print(f"profile_pieces: {path}: {err}", file=sys.stderr)
            return 2
        cores = data["machine"]["cores"]
        changed, unmatched = 0, []
        for count in data.get("counts", []):
            if "alltoallv" not in count:
                continue
            rows = with_pieces(count, cores)
            if rows is None:
                unmatched.append(count["ranks"])
            elif rows != count["alltoallv"]["timed"]:
                count["alltoallv"]["timed"] = rows
                changed += 1
        print(
            f"{path}: pieces counted at {changed} rank counts; rows matching no move at: "
            f"{unmatched or 'none'}"
        )
        if changed and not args.check:
            write_json_atomic(path, data, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
