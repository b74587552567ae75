"""`distmm calibrate --network-into` on emulated nodes gives back the network they are held to,
and predict and plan on a cluster then take their network from the profile; what a message
costs through the communication layer (scripts/message_overhead.py)."""

import json
import os
import re
import subprocess
import sys

import pytest
from launch import SCRIPTS, distmm, distmm_mpi, mpirun

from topology.links import LinkModel
from topology.networks import NETWORKS
from topology.tree import parse_topology


@pytest.mark.parametrize("topology", ["cluster:2,2", "cluster:2,2:round-robin"])
def test_an_emulated_network_is_measured_back(tmp_path, profile_file, topology):
    out = tmp_path / "measured.json"
    argv = ["calibrate", "--network-into", str(profile_file), "--out", str(out), "--quick"]
    r = distmm_mpi(4, *argv, "--topology", topology, "--emulate-links", "1gbe", timeout=90)
    assert r.returncode == 0, r.stderr
    assert "# link: alpha" in r.stdout and f"wrote {out}" in r.stdout
    data = json.loads(out.read_text())
    assert {k: v for k, v in data.items() if k != "network"} == json.loads(
        profile_file.read_text()
    )  # the rest of the profile kept
    net = data["network"]
    alpha, bandwidth, lanes = NETWORKS["1gbe"]
    assert (net["nodes"], net["ranks_per_node"], net["emulated"]) == (2, 2, "1gbe")
    # the emulation charges a message from a node of 2 ranks n * 2 / bandwidth, one rank alone
    # or every rank at once: 2 lanes of half the bandwidth give that back for any ranks per node
    # --quick fits the bandwidth to two sizes (64 KiB, 1 MiB) of a few shifts each, with 4 ranks
    # on this machine's cores: within 10% (two test runs of stop 74 measured a lane at 51.0 and
    # 61.8 MB/s once each; a wrong share of the link would be off by 2x)
    link = net["links"]["node"]
    assert link["lanes"] == 2
    assert link["bandwidth"] == pytest.approx(bandwidth / 2, rel=0.1)
    assert net["node_bandwidth"] == pytest.approx(bandwidth, rel=0.1)
    # held to 50 us at least; the rest is this machine's MPI with 4 ranks on its cores
    assert alpha <= link["alpha"] < 20 * alpha
    for nodes_ranks in ("4,2", "2,4"):  # priced as the preset is, at other sizes too
        tree = parse_topology(f"cluster:{nodes_ranks}")
        measured = LinkModel.load(str(out), tree)
        assert measured.measured and measured.alpha_beta("node")[1] == pytest.approx(
            LinkModel.load("1gbe", tree).alpha_beta("node")[1], rel=0.1
        )
    # one rank alone was measured at half the node's bandwidth (the emulation shares the link
    # among the node's 2 ranks whoever sends): one rank a node is priced at that, not more
    one = LinkModel.load(str(out), parse_topology("cluster:8,1")).alpha_beta("node")[1]
    assert one == pytest.approx(2 / bandwidth, rel=0.1)

    r = distmm("predict", "cannon", "--shape", "512,512,512", "--topology", "cluster:2,2",
               "--profile", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "[measured]" in r.stdout and "between nodes: measured across nodes" in r.stdout
    r = distmm("plan", "--shape", "512,512,512", "--topology", "cluster:2,2", "--profile", str(out))
    assert r.returncode == 0, r.stderr
    assert "network measured across nodes" in r.stdout.splitlines()[0]
    r = distmm("predict", "cannon", "--shape", "512,512,512", "--topology", "cluster:2,2",
               "--profile", str(out), "--network", "10gbe")  # fmt: skip
    assert r.returncode == 0 and "network 10gbe" in r.stdout and "[preset]" in r.stdout


def test_a_profile_without_a_network_says_so(profile_file):
    argv = ["predict", "cannon", "--shape", "64,64,64", "--topology", "cluster:2,2"]
    r = distmm(*argv, "--profile", str(profile_file))
    assert r.returncode == 2 and "a cluster needs its network" in r.stderr
    assert "--network-into" in r.stderr
    r = distmm(*argv, "--profile", str(profile_file), "--network", str(profile_file))
    assert r.returncode == 2 and "this profile holds no network" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_message_overhead_script_times_each_way():
    done = subprocess.run(
        [*mpirun(2), sys.executable, str(SCRIPTS / "message_overhead.py")]
        + ["--shifts", "50", "--laps", "1", "--emulate", "1gbe"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, MPIEXEC_TIMEOUT="60"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = (re.fullmatch(r"lap 1: (.+?) +([\d.]+) us a message \(8 B\)", line)
             for line in done.stdout.splitlines())  # fmt: skip
    us = {m[1]: float(m[2]) for m in found if m}
    assert set(us) == {
        "Sendrecv alone",
        "Irecv, Isend, Waitall alone",
        "shift through the layer",
        "ishift and wait through the layer",
        "shift through the layer, held to 1gbe",
    }
    assert us["shift through the layer, held to 1gbe"] >= NETWORKS["1gbe"][0] * 1e6  # 50 us
