"""What a job printed: the lines its ranks wrote, without what the launcher adds, the last of
them (where a failing job says why) and the JSON record `distmm ... --json` ends with."""

from __future__ import annotations

import json
import re


def said_lines(stderr: str) -> list[str]:
    """The non-blank lines a job's ranks wrote to ``stderr``, without what its launcher adds:
    the notices it frames in rules of dashes (Open MPI's prterun, after the ranks' own line,
    when a rank exits non-zero: "prterun detected that one or more processes exited with
    non-zero status, ...") and its event library's warnings as ranks quit at once ("[warn]
    Epoll MOD(4) on fd 20 failed. ...": 1 of the test suite's 50 refusals in one run under
    Open MPI 5.0.11's wheels here, 1 of 20 in another; open-mpi/ompi#5520, the library not shut
    down cleanly, left unfixed)."""
    lines, notice = [], False
    for line in stderr.splitlines():
        if _RULE.fullmatch(line.strip()):
            notice = not notice
        elif line.strip() and not notice and not _EVENT_WARNING.match(line):
            lines.append(line)
    return lines


_RULE = re.compile(r"-{20,}")
_EVENT_WARNING = re.compile(r"\[warn\] Epoll [A-Z]+\(\d+\) on fd \d+ failed")


def last_line(text: str) -> str:
    """The last line a failing job said (:func:`said_lines`; "" if none): where it says why."""
    return (said_lines(text) or [""])[-1]


def last_json(out: str) -> dict | None:
    """The last line of ``out`` that is a JSON object (what `distmm ... --json` prints)."""
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None
