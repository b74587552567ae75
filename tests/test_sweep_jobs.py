"""A sweep's ``jobs``: every configuration run in that many separate jobs, round by round, and
`distmm compare` testing the jobs' medians (repetitions inside one job are not independent)."""

from __future__ import annotations

import json

from test_sweep_layouts import BASE, _cfg

from bench.comparison import read_table
from bench.record import COLUMNS
from bench.sweep_config import plan_runs


def test_jobs_run_in_rounds_and_the_first_keeps_its_key(tmp_path):
    one, _ = plan_runs(_cfg(tmp_path, BASE))
    three, _ = plan_runs(_cfg(tmp_path, BASE + "jobs = 3\n"))
    assert len(three) == 3 * len(one)
    n = len(one)
    assert [r["job"] for r in three] == [0] * n + [1] * n + [2] * n  # rounds, not runs in a row
    assert [r["key"] for r in three[:n]] == [r["key"] for r in one]  # tables before jobs resume
    assert len({r["key"] for r in three}) == len(three)
    assert _cfg(tmp_path, BASE, jobs=5)["jobs"] == 5  # the flag wins
    assert "job" in COLUMNS


def test_compare_uses_each_jobs_median(tmp_path):
    path = tmp_path / "t.csv"
    header = ["status", "algo", "P", "M", "K", "N", "dtype", "seconds", "samples"]
    lines = [",".join(header)]
    for times in [[1.0, 1.1, 5.0], [2.0, 2.0, 2.0], [3.0, 0.5, 3.1]]:
        lines.append(f'ok,summa,4,8,8,8,float32,{times[1]},"{json.dumps(times)}"')
    lines.append('ok,cannon,4,8,8,8,float32,0.5,"[0.5, 0.6]"')  # one job: its repetitions
    path.write_text("\n".join(lines) + "\n")
    table = read_table(path)
    by_algo = {config[0]: v for config, v in table.samples.items()}
    assert by_algo["summa"] == (1.1, 2.0, 3.0)
    assert by_algo["cannon"] == (0.5, 0.6)
    assert table.pooled == 1


def _table(path, scale: dict, jitter: float = 0.0):
    """Four configurations, five jobs each: times 1.0 (x scale[algo]) with a little jitter."""
    lines = ["status,algo,P,M,K,N,dtype,seconds,samples"]
    for algo in ("cannon", "summa", "t10", "summa25d"):
        for job in range(5):
            t = scale.get(algo, 1.0) * (1 + jitter * ((job * 7) % 5 - 2) / 100)
            lines.append(f'ok,{algo},4,8,8,8,float32,{t},"[{t}, {t * 1.01}, {t * 0.99}]"')
    path.write_text("\n".join(lines) + "\n")
    return read_table(path)


def test_relative_tests_against_the_common_drift(tmp_path):
    """Everything 10% slower (a drifting machine) and summa 30% slower: plain, all four are
    flagged; relative, only summa."""
    from bench.comparison import SLOWER, compare, drift

    old = _table(tmp_path / "old.csv", {}, jitter=1)
    new = _table(tmp_path / "new.csv", {"cannon": 1.1, "summa": 1.43, "t10": 1.1, "summa25d": 1.1})
    plain = {c.config[0]: c.verdict for c in compare(old, new, min_effect=0.05)}
    assert set(plain.values()) == {SLOWER}
    assert abs(drift(old, new) - 1.1) < 0.02
    relative = {c.config[0]: c.verdict for c in compare(old, new, min_effect=0.05, relative=True)}
    assert relative["summa"] == SLOWER
    assert [a for a, v in relative.items() if v == SLOWER] == ["summa"]
