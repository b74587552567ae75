"""scripts/moves_warmth.py: layout changes timed cold and warm against the profile's price."""

import os
import subprocess
import sys

from launch import SCRIPTS, mpirun


def test_moves_warmth_times_each_move_cold_and_warm(profile_file):
    env = dict(os.environ, MPIEXEC_TIMEOUT="120")
    argv = [str(SCRIPTS / "moves_warmth.py"), "--counts", "2,3", "--mib", "0.25"]
    done = subprocess.run(
        [*mpirun(2), sys.executable, *argv, "--profile", str(profile_file)],
        capture_output=True,
        text=True,
        timeout=135,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    head, *rows = done.stdout.splitlines()
    assert head.split()[:2] == ["ranks", "move"]
    # 3 > the job's 2: said, not timed
    notes = [r for r in rows if r.startswith("(")]
    assert notes == ["(count 3 left out: the job has 2 ranks)"]
    rows = [r for r in rows if r not in notes]
    # at 2 ranks, cols -> block (a 1 x 2 grid) moves nothing and is left out
    assert [r.split()[1:4] for r in rows] == [
        ["block-cyclic:64", "->", "block"],
        ["rows", "->", "cols"],
    ]
    for r in rows:
        cold, warm, model = map(float, r.split()[-5:-2])
        assert cold > 0 and warm > 0 and model > 0
