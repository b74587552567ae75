"""`distmm compare`: verdicts, --fail-above, the fallback without samples, and bad input."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from bench.cli import main

HEADER = [
    "key",
    "status",
    "algo",
    "P",
    "M",
    "K",
    "N",
    "dtype",
    "topology",
    "grid",
    "params",
    "seconds",
    "seconds_min",
    "seconds_max",
    "samples",
]
CONFIGS = [  # (algo, P, grid, params)
    ("cannon", 4, "2x2", "{}"),
    ("summa", 4, "2x2", '{"panel": 64}'),
    ("summa", 8, "2x4", '{"panel": 64}'),
    ("t10", 4, "2x1x2", '{"fop": [2, 1, 2], "pace": 1}'),
]


def _write(path, slow: dict | None = None, samples: bool = True, seed: int = 0, extra=(), ran=None):
    """A results table: 7 samples per configuration, 3% noise; ``slow`` = {algo: factor};
    ``ran``: context cells (bench.comparison.CONTEXT_COLUMNS) for every row, or a callable
    giving them for a row."""
    rng = np.random.default_rng(seed)
    rows = []
    for algo, P, grid, params in CONFIGS:
        base = 0.1 * (1 + 0.2 * P) * np.exp(rng.normal(0, 0.03, size=7))
        times = base * (slow or {}).get(algo, 1.0)
        row = dict(
            key=f"{algo}{P}",
            status="ok",
            algo=algo,
            P=P,
            M=1536,
            K=1536,
            N=1536,
            dtype="float32",
            topology="",
            grid=grid,
            params=params,
            seconds=np.median(times),
            seconds_min=times.min(),
            seconds_max=times.max(),
            samples=json.dumps([round(t, 6) for t in times]) if samples else "",
        )
        row.update((ran(row) if callable(ran) else ran) or {})
        rows.append(row)
    rows += list(extra)
    header = HEADER if samples else HEADER[:-1]
    header += sorted({k for r in rows for k in r} - set(header))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def _compare(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["compare", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_identical_tables_show_no_significant_difference(tmp_path, capsys):
    old = _write(tmp_path / "old.csv")
    new = _write(tmp_path / "new.csv")
    rc, out, err = _compare(capsys, old, new, "--fail-above", 0)
    assert rc == 0 and err == ""
    assert out.count("no significant difference") == len(CONFIGS) + 1  # + the summary line
    assert "4 configurations in both: 0 slower, 0 faster, 4 no significant difference" in out


def test_an_algorithm_twenty_percent_slower_is_flagged_and_nothing_else(tmp_path, capsys):
    old = _write(tmp_path / "old.csv", seed=1)
    new = _write(tmp_path / "new.csv", slow={"summa": 1.2}, seed=1)
    rc, out, _ = _compare(capsys, old, new, "--json")
    assert rc == 0
    result = json.loads(out)
    verdicts = {
        c["label"].split()[0] + c["config"]["P"]: c["verdict"] for c in result["configurations"]
    }
    assert verdicts == {
        "cannon4": "no significant difference",
        "summa4": "slower",
        "summa8": "slower",
        "t104": "no significant difference",
    }
    slow = [c for c in result["configurations"] if c["verdict"] == "slower"]
    assert all(c["low"] < 1.2 < c["high"] and c["p_value"] < 0.05 for c in slow)
    assert result["summary"]["counts"]["slower"] == 2

    rc, _, err = _compare(capsys, old, new, "--fail-above", 10)
    assert rc == 1 and "2 configuration(s) significantly slower by more than 10%" in err
    rc, _, _ = _compare(capsys, old, new, "--fail-above", 30)
    assert rc == 0
    rc, out, _ = _compare(capsys, new, old)  # the other way round: faster
    assert rc == 0 and out.count(" faster") >= 2


def test_independent_draws_of_the_same_times_are_not_flagged(tmp_path, capsys):
    old = _write(tmp_path / "old.csv", seed=2)
    new = _write(tmp_path / "new.csv", seed=3)
    rc, out, _ = _compare(capsys, old, new, "--json", "--fail-above", 5)
    assert rc == 0
    assert json.loads(out)["summary"]["counts"]["no significant difference"] == len(CONFIGS)


def test_only_ok_rows_count_and_unmatched_ones_are_listed(tmp_path, capsys):
    failed = dict(
        key="x",
        status="failed",
        algo="summa3d",
        P=8,
        M=1536,
        K=1536,
        N=1536,
        dtype="float32",
        grid="2x2x2",
        params="{}",
    )
    only_new = dict(
        failed,
        key="y",
        status="ok",
        algo="cannon",
        P=9,
        grid="3x3",
        samples="[0.1, 0.11, 0.12, 0.1, 0.1]",
    )
    old = _write(tmp_path / "old.csv", extra=[failed])
    new = _write(tmp_path / "new.csv", extra=[only_new])
    rc, out, _ = _compare(capsys, old, new)
    assert rc == 0
    assert "only in new" in out and "summa3d" not in out
    assert "0 only in old, 1 only in new" in out


def test_a_table_without_samples_falls_back_and_says_too_few(tmp_path, capsys):
    old = _write(tmp_path / "old.csv", samples=False)
    new = _write(tmp_path / "new.csv", slow={"summa": 1.5}, samples=False)
    rc, out, err = _compare(capsys, old, new, "--fail-above", 10)
    assert rc == 0  # 3 vs 3: nothing can be significant
    assert err.count("warning") == 1 and "seconds_min, seconds, seconds_max" in err
    assert "too few samples" in out and "0.1" in out and "3/3*" in out
    assert "4 no significant difference" in out


MACHINE = {
    "cpu_model": "AMD EPYC 7B13",
    "cores": "2",
    "mpi_library": "MPICH Version: 5.0.2",
    "numpy": "2.4.0",
    "settings": json.dumps({"OPENBLAS_NUM_THREADS": "1"}),
}


def test_tables_from_other_settings_or_machines_are_said_to_differ(tmp_path, capsys):
    same = _write(tmp_path / "same.csv", ran=dict(MACHINE, cores="2.0"))
    old = _write(tmp_path / "old.csv", ran=MACHINE)
    rc, _, err = _compare(capsys, old, same)
    assert rc == 0 and "warning" not in err  # the same context, however spelled

    def fenced(row):  # the 4-rank runs forced MPI's barrier
        settings = {"OPENBLAS_NUM_THREADS": "1"}
        if row["P"] == 4:
            settings["DISTMM_FENCE"] = "mpi"
        return dict(MACHINE, settings=json.dumps(settings))

    new = _write(tmp_path / "new.csv", ran=fenced)
    rc, out, err = _compare(capsys, old, new, "--json")
    assert rc == 0
    (line,) = json.loads(out)["warnings"]
    assert line.startswith("settings differs in 3 of the 4 configurations in both")
    assert "DISTMM_FENCE: unset in old, mpi in new" in line
    assert "OPENBLAS" not in line

    other = dict(MACHINE, cpu_model="Intel Xeon Platinum 8481C", cores="4")
    new = _write(tmp_path / "xeon.csv", ran=other)
    rc, _, err = _compare(capsys, old, new)
    lines = [line for line in err.splitlines() if line.startswith("distmm compare: warning: ")]
    assert len(lines) == 2
    assert "cpu_model differs in 4 of the 4" in lines[0] and "Intel Xeon" in lines[0]
    assert "cores: 2 in old, 4 in new" in lines[1]


def test_a_table_that_does_not_record_the_context_is_not_said_to_differ(tmp_path, capsys):
    old = _write(tmp_path / "old.csv")  # from before the columns were written
    new = _write(tmp_path / "new.csv", ran=MACHINE)
    rc, _, err = _compare(capsys, old, new)
    assert rc == 0 and "warning" not in err


def test_plot(tmp_path, capsys):
    old = _write(tmp_path / "old.csv")
    new = _write(tmp_path / "new.csv", slow={"cannon": 1.3})
    rc, out, _ = _compare(capsys, old, new, "--plot", tmp_path / "change.png")
    assert rc == 0 and f"plot: {tmp_path / 'change.png'}" in out
    assert (tmp_path / "change.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("hello, world\n1, 2\n", "not a results table"),
        ("", "not a results table"),
        (b"\xff\xfe\x00binary", "not a results table"),
        ("status,algo,P,M,K,N,seconds,samples\nok,cannon,4,8,8,8,0.1,[0.1, oops]\n", "samples"),
        ("status,algo,P,M,K,N,seconds\nok,summa3d,8,64,64,64,0.1\n", "no configuration"),
    ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, capsys, content, message):
    old = _write(tmp_path / "old.csv")
    bad = tmp_path / "bad.csv"
    if isinstance(content, bytes):
        bad.write_bytes(content)
    elif content is not None:
        bad.write_text(content)
    rc, out, err = _compare(capsys, old, bad)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("distmm compare: error: ")
    assert message in err


@pytest.mark.parametrize("flags", [["--alpha", "1.5"], ["--fail-above", "-3"]])
def test_bad_options_are_status_2(tmp_path, capsys, flags):
    old = _write(tmp_path / "old.csv")
    rc, _, err = _compare(capsys, old, old, *flags)
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_relative_heads_the_new_column_as_divided_by_the_drift(tmp_path, capsys):
    old = _write(tmp_path / "old.csv", seed=4)
    new = _write(tmp_path / "new.csv", slow={a: 1.1 for a, *_ in CONFIGS}, seed=4)
    _, out, _ = _compare(capsys, old, new, "--relative")
    head = out.splitlines()[1]
    assert "new/drift [s]" in head and "new [s]" not in head
    assert "relative: new divided by the common drift 1.100" in out
    _, out, _ = _compare(capsys, old, new)
    assert "new [s]" in out.splitlines()[1]
