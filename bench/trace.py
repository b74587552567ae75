"""Per-rank traces in viztracer's format, with spans only for the suite's own phases.

The tracer is never *started* (no profiling hook, so ordinary Python calls cost nothing extra):
the communication layer adds complete-duration events with ``add_raw``. Each rank writes
``rank<r>.json``; :func:`combine` aligns them on a barrier-synchronised marker and writes one
``combined.json`` (one process per rank) that vizviewer and Perfetto open.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .files import replacing, write_json_atomic

MAIN_LANE, COMM_LANE = 0, 1  # tid 0: what the rank does; tid 1: messages in flight


class Tracer:
    def __init__(self, directory: str | os.PathLike, rank: int, entries: int = 1_000_000):
        from viztracer import VizTracer

        self.directory = Path(directory)
        self.rank = rank
        self.viz = VizTracer(
            output_file=str(self.directory / f"rank{rank}.json"),
            verbose=0,
            tracer_entries=entries,
            pid_suffix=False,
        )
        self.now = self.viz.getts  # microseconds
        self.enabled = True

    def span(self, name: str, **args) -> _Span:
        return _Span(self, name, args)

    def add(self, name: str, start: float, end: float, lane: int = MAIN_LANE, **args) -> None:
        if self.enabled:
            # viztracer stamps its own pid/tid, so the lane travels in args; combine() uses it
            args = {k: v for k, v in args.items() if v is not None}
            self.viz.add_raw(
                {
                    "ph": "X",
                    "name": name,
                    "ts": start,
                    "dur": end - start,
                    "cat": "distmm",
                    "args": dict(args, lane=lane),
                }
            )

    def marker(self, name: str, **args) -> None:
        """An instant event; ``sync`` markers are recorded right after a barrier on every rank."""
        self.viz.add_raw(
            {
                "ph": "i",
                "s": "g",
                "name": name,
                "ts": self.now(),
                "cat": "distmm",
                "args": dict(args, lane=MAIN_LANE),
            }
        )

    def save(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        out = self.directory / f"rank{self.rank}.json"
        with replacing(out) as tmp:  # viztracer picks the format by the suffix: .json
            self.viz.save(str(tmp), verbose=0)
        return out


class _Span:
    __slots__ = ("tracer", "name", "args", "start")

    def __init__(self, tracer: Tracer, name: str, args: dict):
        self.tracer, self.name, self.args = tracer, name, args

    def __enter__(self):
        self.start = self.tracer.now()
        return self

    def __exit__(self, *exc):
        self.tracer.add(self.name, self.start, self.tracer.now(), **self.args)


def load_rank_events(directory: str | os.PathLike) -> dict[int, list[dict]]:
    """{rank: trace events} from the per-rank files, each aligned so its last sync marker is 0."""
    out: dict[int, list[dict]] = {}
    files = sorted(Path(directory).glob("rank*.json"))
    if not files:
        raise FileNotFoundError(f"no rank*.json traces in {directory}")
    for f in files:
        try:
            events = json.loads(f.read_text())["traceEvents"]
        except (ValueError, KeyError) as err:
            raise FileNotFoundError(f"{f} is not a readable trace ({err})") from None
        rank = int(f.stem[4:])
        syncs = [e["ts"] for e in events if e.get("name") == "sync" and e.get("ph") == "i"]
        zero = syncs[0] if syncs else 0.0
        mine = [e for e in events if e.get("cat") == "distmm"]
        for e in mine:
            e["ts"] -= zero
            e["pid"], e["tid"] = rank, e.get("args", {}).get("lane", MAIN_LANE)
        out[rank] = mine
    return out


def combine(directory: str | os.PathLike) -> Path:
    """Write ``combined.json``: all ranks on one aligned timeline, one process per rank."""
    directory = Path(directory)
    per_rank = load_rank_events(directory)
    start = min((e["ts"] for evs in per_rank.values() for e in evs), default=0.0)
    events: list[dict] = []
    for rank, evs in sorted(per_rank.items()):
        events.append(
            {
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "name": "process_name",
                "args": {"name": f"rank {rank}"},
            }
        )
        events.append(
            {
                "ph": "M",
                "pid": rank,
                "tid": MAIN_LANE,
                "name": "thread_name",
                "args": {"name": "compute / blocking"},
            }
        )
        events.append(
            {
                "ph": "M",
                "pid": rank,
                "tid": COMM_LANE,
                "name": "thread_name",
                "args": {"name": "messages in flight"},
            }
        )
        events.extend(dict(e, ts=e["ts"] - start) for e in evs)
    return write_json_atomic(
        directory / "combined.json", {"traceEvents": events, "displayTimeUnit": "ms"}
    )
