"""Launchers for sweeps: srun (through a stand-in srun on PATH), templates, hostfile, ranks per
node and pinning on the command line, and the refusals (serial; launches mpiexec)."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.job_output import last_line, said_lines
from bench.launch import Launcher, find_mpiexec, launcher_problem, mpi_flavour

ROOT = Path(__file__).resolve().parent.parent
ONE_RUN = "--algos cannon --ranks 1 --shapes 64,64,64 --repeat 1 --warmup 0 --timeout 60".split()


def fake_srun(tmp_path: Path) -> dict:
    """A stand-in `srun -n P [--ntasks-per-node N] [--cpu-bind=cores] cmd...` that runs
    `mpiexec -n P cmd...`, first on PATH; the environment to run a sweep with it."""
    mpiexec = find_mpiexec(None)
    extra = ""
    if mpi_flavour(mpiexec)[0] == "openmpi" and os.geteuid() == 0:
        extra = "--allow-run-as-root"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "srun"
    script.write_text(
        f"""#!/bin/sh
P=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) P=$2; shift 2 ;;
    --ntasks-per-node) echo "ppn $2" >> "{tmp_path}/srun.log"; shift 2 ;;
    --cpu-bind=cores) echo pin >> "{tmp_path}/srun.log"; shift ;;
    *) break ;;
  esac
done
exec "{mpiexec}" {extra} -n "$P" "$@"
"""
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}


def sweep(tmp_path, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", "sweep", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
        env={**(env or os.environ), "PYTHONPATH": str(ROOT)},
    )


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.timeout(100)
def test_sweep_through_srun_records_the_launcher(tmp_path):
    env = fake_srun(tmp_path)
    out = tmp_path / "s.csv"
    res = sweep(
        tmp_path, *ONE_RUN, "--launcher", "srun", "--ranks-per-node", "1", "--pin",
        "--results", str(out), env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    (row,) = rows(out)
    assert row["status"] == "ok" and row["launcher"] == "srun"
    assert (tmp_path / "srun.log").read_text().split("\n")[:2] == ["ppn 1", "pin"]


@pytest.mark.timeout(100)
def test_sweep_through_a_template(tmp_path):
    env = fake_srun(tmp_path)
    out = tmp_path / "t.csv"
    template = "srun --cpu-bind=cores -n {P} {cmd}"
    res = sweep(tmp_path, *ONE_RUN, "--launcher", template, "--results", str(out), env=env)
    assert res.returncode == 0, res.stderr
    (row,) = rows(out)
    assert row["status"] == "ok" and row["launcher"] == template


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--launcher", "srun -n {P}"], "lacks {cmd}"),
        (["--launcher", "qsub"], "is not mpiexec, srun or a template"),
        (["--launcher", "run {P} {cmd} {where}"], "unknown placeholder {where}"),
        (["--hostfile", "no-such-hosts"], "hostfile no-such-hosts does not exist"),
    ],
)
def test_bad_launcher_settings_are_one_line(tmp_path, flags, says):
    res = sweep(tmp_path, *ONE_RUN, *flags)
    assert res.returncode == 2
    assert says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_toml_launcher_key_names_key_and_line(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('ranks = [1]\nshapes = [[64, 64, 64]]\nlauncher = "srun -n {P}"\n')
    res = sweep(tmp_path, str(toml))
    assert res.returncode == 2
    assert f"{toml}:3: launcher must be" in res.stderr, res.stderr


def test_mpiexec_placement_flags(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost\n")
    job = ["run", "cannon"]
    mpich = Launcher("mpiexec", "mpich", "", 2, "mpiexec", str(hosts), 4, True)
    assert mpich.command(8, job, ("distmm",)) == [
        "mpiexec", "-n", "8", "-f", str(hosts), "-ppn", "4", "-bind-to", "core", "distmm", *job
    ]  # fmt: skip
    ompi = Launcher("mpiexec", "openmpi", "", 4, "mpiexec", str(hosts), 4, True)
    cmd = ompi.command(8, job, ("distmm",))
    assert "--oversubscribe" not in cmd  # 4 ranks per node on 4 cores
    assert cmd[-7:] == ["--map-by", "ppr:4:node", "--bind-to", "core", "distmm", *job]
    assert ["--hostfile", str(hosts)] == cmd[cmd.index("--hostfile") :][:2]
    tpl = Launcher("", "template", "", 2, "srun --mpi=pmix -n {P} --ntasks-per-node {ppn} {cmd}")
    tpl = Launcher(tpl.mpiexec, tpl.flavour, "", 2, tpl.name, ranks_per_node=2)
    assert tpl.command(4, ["run", "a b"], ("distmm",)) == [
        "srun", "--mpi=pmix", "-n", "4", "--ntasks-per-node", "2", "distmm", "run", "a b"
    ]  # fmt: skip


def test_template_settings_must_match_placeholders():
    assert launcher_problem("mpiexec") is None and launcher_problem("x {P} {cmd}") is None
    with pytest.raises(UsageError, match="uses {ppn}: give --ranks-per-node"):
        Launcher.find(None, "srun -n {P} --ntasks-per-node {ppn} {cmd}")
    with pytest.raises(UsageError, match="--ranks-per-node needs {ppn}"):
        Launcher.find(None, "srun -n {P} {cmd}", ranks_per_node=2)


def test_the_ranks_own_lines_without_the_launchers_notices():
    """What a job's ranks said, without the notice Open MPI's prterun frames in dashes after
    them when a rank exits non-zero (a refusal is still one line, and the reason a sweep
    records is the ranks' last line, not a rule of dashes)."""
    rule = "-" * 74
    notice = [
        rule,
        "prterun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "   Process name: [prterun-vm-22641@1,2]",
        "   Exit code:    2",
        rule,
    ]
    said = "distmm run: error: unknown algorithm 'nosuch'"
    assert said_lines("\n".join([said, *notice, ""])) == [said]
    warned = "[warn] Epoll MOD(4) on fd 26 failed. Old events were 6; read change was 2 (del)"
    assert said_lines("\n".join([said, warned, *notice])) == [said]
    assert last_line("\n".join(["first", said, "", *notice])) == said
    assert said_lines("a\n\n  b\n") == ["a", "  b"] and last_line("") == ""


@pytest.mark.timeout(120)
def test_ranks_pinned_a_core_each_still_see_the_nodes_cores():
    """`--pin` binds each rank to one core (MPICH -bind-to core, Open MPI --bind-to core, as
    Open MPI does by default up to as many ranks as cores): the run still counts the node's
    cores, so 2 ranks on 2 cores are not oversubscribed (they said 1 core, oversubscribed)."""
    cores = len(os.sched_getaffinity(0))
    launcher = Launcher.find(None, pin=True)
    P = min(2, cores)
    argv = ["run", "summa", "--shape", "16,16,16", "--repeat", "1", "--json"]
    record, why = launcher.run_json(P, argv, 90, cwd=ROOT)
    assert record is not None, why
    assert (record["cores"], record["ranks_per_node"]) == (cores, P)
    assert record["oversubscribed"] is False and record["blas_threads"] == 1


@pytest.mark.timeout(60)
def test_a_calibration_that_fails_says_why_in_one_line(tmp_path):
    """Launcher.calibrate, what sweeps and the accuracy scripts calibrate with: "" once the
    profile is written, else one line with the job's own last words."""
    missing = tmp_path / "no such folder" / "profile.json"
    why = Launcher.find(None).calibrate(1, missing, 50, quick=True, cwd=ROOT)
    assert why.startswith("calibration failed (done, exit 2): distmm calibrate: error:"), why
    assert "\n" not in why and not missing.exists()
