"""`mpiexec -n CORES distmm calibrate --refresh-gemm PROFILE`: time the node's GEMM tables again
into a profile and keep everything else it holds.

A shared machine's speed drifts between hours (two tables timed minutes apart on the 2-core VM
of results/vm-2c-xeon were 1.6x apart), and the predictions' level with it. The tables take a
fraction of a calibration (93 s of about 6 minutes there). What calibrate measured as ratios
against the tables stays a ratio: each count's GEMM timed with every rank working
("gemm_shared", which the time-slicing efficiency and the busy factor are taken against) is
scaled by how the new tables price it over the old, so the refresh moves the GEMMs' level and
the shapes' relative rates, and the node's sharing of its cores stays as it was measured. The
planner's order moved little there: a table timed just before a sweep, the machine at the same
speed, chose the fastest in 101 of 160 stored cases, the 29-hour-old one in 100.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np

from .calibration import cpu_facts, speed_probe, steadiness_text
from .calibration_gemm import gemm_tables
from .errors import UsageError
from .files import write_json_atomic


def read_profile(path: str, option: str = "--refresh-gemm") -> dict:
    """The profile JSON to refresh (``option`` names it in errors), checked before any
    collective (every rank reads it)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such profile") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{option} {path}: not a readable profile ({err})") from None
    if not isinstance(data, dict) or "gemm" not in data or "cores" not in data.get("machine", {}):
        raise UsageError(f"{option} {path}: not a distmm calibrate profile (no GEMM table)")
    return data


def refreshed(data: dict, tables: dict) -> tuple[dict, float]:
    """(``data`` with the GEMM ``tables`` ({"gemm", "gemm_threads"}) in place of its own, each
    count's "gemm_shared" seconds scaled alike, the refresh dated; the median over the float32
    shapes of the new time over the old)."""
    from .model.profile import Profile

    cores = int(data["machine"]["cores"])

    def priced(d: dict) -> Profile:
        return Profile(
            0, 0, 0, 0, gemm=d["gemm"], gemm_threads=d.get("gemm_threads", {}), cores=cores
        )

    old, new = priced(data), priced(tables)
    counts = []
    for c in data.get("counts", []):
        if c.get("gemm_shared"):
            n, seconds = c["gemm_shared"]
            scale = new._alone_seconds(n, c["ranks"]) / old._alone_seconds(n, c["ranks"])
            c = {**c, "gemm_shared": [n, seconds * scale]}
        counts.append(c)
    before = {tuple(r[:3]): r[3] for r in data["gemm"]["float32"]}
    ratios = [
        r[3] / before[tuple(r[:3])] for r in tables["gemm"]["float32"] if tuple(r[:3]) in before
    ]
    machine = {
        **data["machine"],
        **cpu_facts(),  # the GEMMs, what differs most between CPUs, are this one's now
        "gemm_refreshed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    out = {**data, "machine": machine, **tables, "counts": counts}
    return out, float(np.median(ratios)) if ratios else float("nan")


def refresh(world, quick: bool, facts: dict, base: dict, out: Path) -> int:
    """`--refresh-gemm`: the GEMM tables timed again into ``base``, written to ``out``."""
    P, cores = world.Get_size(), facts["cores"]
    say = (lambda *a: print(*a, flush=True)) if world.Get_rank() == 0 else (lambda *a: None)
    if cores != base["machine"]["cores"]:  # (every rank's verdict, before any collective)
        raise UsageError(
            f"--refresh-gemm: the profile was made on {base['machine']['cores']} cores, this "
            f"node has {cores}: calibrate it afresh"
        )
    if P < cores:
        say(f"# warning: {P} ranks on {cores} cores: the tables timed with {P} at once")
    say(f"# distmm calibrate --refresh-gemm: the GEMM tables on {min(P, cores)} of {cores} cores")
    probes = [speed_probe(world)]
    tables = gemm_tables(world, quick, cores)
    probes.append(speed_probe(world))
    if world.Get_rank() == 0:
        data, ratio = refreshed(base, tables)
        write_json_atomic(out, data, indent=1)
        say(
            f"# the new tables' float32 times over the old: median {ratio:.2f} "
            f"(the machine runs GEMMs {1 / ratio:.2f}x as fast as when the profile was made)"
        )
        say(steadiness_text(probes))
        say(f"wrote {out}")
    world.Barrier()
    return 0


__all__ = ["read_profile", "refresh", "refreshed"]
