"""The catalogue of bad inputs: every command, as a user types it.

Each case must end with exit status 2 (on every rank, for MPI runs), exactly one line on stderr
that contains the expected words, no traceback, and within 10 seconds.
"""

import json
import tempfile
import time
from pathlib import Path

import pytest
from launch import distmm, distmm_mpi

from bench.job_output import said_lines

BAD_LAYOUTS = [
    ("((4_PE, 3:8), (8:1)", "expected ')'"),
    ("((2_PE, 6:4), (2_PE, 4:1))", "needs a stride"),
    ("((2_PE:1, 6:4), (2_PE:1, 4:1))", "bijection"),
    ("((4:1, 3:1))", "overlap"),
    ("(13,8)/((4_PE, 3:8), (8:1))", "less than the logical size"),
    ("((4_PE, 3:8), (8:1); B@[PE])", "also named in B@"),
    ("((4, 3:8), (8:1))", "every memory axis or for none"),
    ("", "empty layout"),
    ("((0:1))", "positive integer"),
    ("((4_PE, 3:8), (8:1); R@[PE])", "no factor is a Time axis"),
    ("((4_PE, 3:8), (8:1); Q@[PE])", "expected B@[...]"),
    ("((2_x, 3), (6_Time, 2); R@[x, window=7])", "window"),
    ("(10,7,3)/((3:7, 4_PE), (7:1))", "dimensions"),
    ("((4_PE, 3:8), (8:1)) extra", "after the layout"),
]

# calibrate --network-into: a real profile (never written: every case fails first)
PROFILE = Path(__file__).resolve().parent.parent / "results/vm-2c-zen3/profile_s72.json"
NET = ["--network-into", str(PROFILE)]
EMU = ["--emulate-links", "1gbe", "--topology"]
UNWRITTEN = str(Path(tempfile.gettempdir()) / "distmm-never-written.json")
MPI_CASES = [  # (ranks, argv, expected words)
    (3, ["run", "nosuch", "--shape", "8,8,8"], "unknown algorithm 'nosuch'"),
    (3, ["run", "cannon", "--shape", "8,8,8"], "cannot run on 3 ranks"),
    (2, ["run", "summa3d", "--shape", "8,8,8"], "cube number"),
    (3, ["run", "summa", "--shape", "8,8,8", "--grid", "2x2"], "grid 2x2 has 4 ranks"),
    (2, ["run", "cannon", "--shape", "8,8,8", "--grid", "2x2"], "grid 2x2 has 4 ranks but the job"),
    (4, ["run", "summa25d", "--shape", "8,8,8", "--grid", "1,1,4"], "is not"),
    (4, ["run", "tesseract", "--shape", "8,8,8", "--grid", "3,3,1"], "has 9 ranks"),
    (3, ["run", "summa", "--shape", "0,8,8"], "must be positive"),
    (3, ["run", "summa", "--shape=-4,8,8"], "must be positive"),
    (3, ["run", "summa", "--shape", "8,x,8"], "not a list of integers"),
    (3, ["run", "summa", "--shape", "8,8"], "needs 3 integers"),
    (3, ["run", "summa", "--shape", "8,8,8", "--dtype", "int8"], "invalid choice"),
    (3, ["run", "cannon", "--shape", "8,8,8", "--panel", "2"], "cannon"),
    (3, ["run", "summa", "--shape", "8,8,8", "--fop", "1,1,3"], "summa takes no --fop"),
    (6, ["run", "t10", "--shape", "8,8,8", "--fop", "2,2,2"], "has 8 cores but the job has 6"),
    (6, ["run", "t10", "--shape", "8,8,8", "--fop", "2,3"], "needs 3 integers"),
    (6, ["run", "t10", "--shape", "8,8,8", "--fop", "2,1,3", "--pace", "5"], "pace 5 is not valid"),
    (4, ["run", "t10", "--shape", "8,8,8", "--grid", "2x2"], "t10 takes no --grid"),
    (3, ["run", "summa", "--shape", "8,8,8", "--repeat", "0"], "must be at least 1"),
    (3, ["run", "summa", "--shape", "8,8,8", "--warmup", "-1"], "warmup"),
    (3, ["run", "summa", "--shape", "8,8,8", "--panel", "0"], "must be at least 1"),
    (3, ["run", "summa", "--shape", "8,8,8", "--dump", "/nonexistent/dir/x"], "does not exist"),
    (3, ["run", "summa", "--shape", "8,8,8", "--trace", "/nonexistent/dir/t"], "does not exist"),
    (3, ["run", "summa", "--shape", "8,8,8", "--profile", "/nonexistent.json"], "does not exist"),
    (3, ["run", "summa", "--shape", "8192,8192,8192", "--dump", "/tmp"], "small shapes"),
    (2, ["calibrate", "--out", "/nonexistent/dir/p.json"], "does not exist"),
    (2, ["calibrate", "--refresh-gemm", "/nonexistent.json"], "no such profile"),
    (2, ["calibrate", "--network-into", "/nonexistent.json"], "no such profile"),
    (2, ["calibrate", *NET, "--out", UNWRITTEN], "runs on one node"),
    (2, ["calibrate", "--topology", "cluster:2,1", "--emulate-links", "1gbe"], "--network-into"),
    (2, ["calibrate", *NET, "--topology", "cluster:2,1", "--out", UNWRITTEN], "need both"),
    (2, ["calibrate", *NET, *EMU, "cluster:4,1", "--out", UNWRITTEN], "4 ranks but the job has 2"),
    (2, ["calibrate", *NET, *EMU, "mncore:1,1,1,2", "--out", UNWRITTEN], "cluster:NODES"),
    (2, ["run", "summa", "--shape", "200000,200000,200000"], "GiB per rank"),
    (4, ["run", "cannon", "--shape", "64,64,64", "--topology", "mncore:2,2,2,2"], "16"),
    (2, ["run", "summa", "--shape", "64,64,64", "--topology", "torus"], "torus"),
    (2, ["nosuchcommand"], "invalid choice"),
    (2, ["run", "summa", "--shape", "8,8,8", "--bogus", "3"], "distmm run: error: unrecognized"),
    (2, ["run", "summa", "--shape", "8,8,8", "--topology", "cluster:3,2"], "the job has 2 ranks"),
    (2, ["run", "summa", "--shape", "8,8,8", "--layouts", "((2_r, 4), (8"], "expected ')'"),
]


@pytest.mark.parametrize("text,words", BAD_LAYOUTS)
def test_bad_layout(text, words):
    _check(lambda: distmm("layout", text), words, quoted=text)


@pytest.mark.parametrize("n,argv,words", MPI_CASES)
def test_bad_mpi_command(n, argv, words):
    _check(lambda: distmm_mpi(n, *argv, timeout=30), words)


def test_bad_predict_and_analyze(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"p2p": {}}))
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{ not json")
    listed = tmp_path / "listed.json"
    listed.write_text("[1, 2]")
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "badrun").mkdir()
    (tmp_path / "badrun" / "run.json").write_text("[truncated")
    cases = [
        (
            ["predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", "none.json"],
            "does not exist",
        ),
        (
            ["predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", str(corrupt)],
            "not readable JSON",
        ),
        (
            ["predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", str(profile)],
            "lacks",
        ),
        (
            ["predict", "cannon", "--shape", "64,64,64", "--P", "5", "--profile", str(corrupt)],
            "not readable JSON",
        ),
        (["predict", "summa", "--shape", "64,64,64", "--profile", str(corrupt)], "not readable"),
        (
            ["predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", str(listed)],
            "is not a profile (list indices",
        ),
        (["analyze", str(tmp_path / "missing")], "not a directory"),
        (["analyze", str(empty)], "run.json is missing"),
        (["analyze", str(tmp_path / "badrun")], "not readable JSON"),
        (["layout", "((4_PE, 3:8), (8:1))", "--levels", "PE=x"], "PE=x"),
        (["layout", "((4_PE, 3:8), (8:1))", "--levels", "PE=3"], "PE"),
    ]
    real = Path(__file__).resolve().parent.parent / "results/vm-2c-zen3/profile_s72.json"
    on_links = ["predict", "summa", "--shape", "64,64,64", "--P", "4", "--profile", str(real)]
    on_links += ["--topology", "cluster:2,2", "--network"]
    for link, words in (  # links files whose numbers no network has
        ({"alpha": 1e-6, "bandwidth": 1e9, "lanes": 0}, "lanes must be a whole number >= 1"),
        ({"alpha": 1e-6, "bandwidth": 1e9, "lanes": 1.5}, "lanes must be a whole number >= 1"),
        ({"alpha": 1e-6, "bandwidth": 0}, "bandwidth > 0"),
        ({"alpha": -1e-6, "bandwidth": 1e9}, "alpha >= 0"),
        ({"alpha": 1e-6}, "missing 'bandwidth'"),
    ):
        path = tmp_path / f"links{len(cases)}.json"
        path.write_text(json.dumps({"node": link}))
        cases.append(([*on_links, str(path)], words))
    unknown = tmp_path / "unknown.json"
    unknown.write_text(
        json.dumps(
            {"node": {"alpha": 1e-6, "bandwidth": 1e9}, "rack": {"alpha": 1, "bandwidth": 1}}
        )
    )
    cases.append(([*on_links, str(unknown)], "level(s) rack not in cluster"))
    cases.append((["predict", "summa", "--shape", "8,8,8", "--P", "4", "--profile", str(real),
                   "--network", "ib-hdr"], "need --topology"))  # fmt: skip
    for argv, words in cases:
        _check(lambda argv=argv: distmm(*argv), words)


def _check(call, words: str, quoted: str | None = None) -> None:
    start = time.monotonic()
    r = call()
    assert time.monotonic() - start < 10, "took too long"
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = said_lines(r.stderr)  # (without the launcher's notices: Open MPI's prterun)
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert words in lines[0], lines[0]
    if quoted is not None:
        assert repr(quoted) in lines[0]
