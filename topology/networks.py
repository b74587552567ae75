"""Inter-node networks: one-way MPI latency and large-message bandwidth per preset.

Each preset is the link of a cluster's ``node`` level (topology/links.py): ``alpha`` seconds per
message, ``bandwidth`` bytes/s a node's network interface sustains one way (its ranks share it),
``lanes`` interfaces per node. Bandwidth starts from the standard's data rate (the line rate
after encoding), less what framing and protocol headers take; latency is the adapter's stated
latency plus MPI, driver and one switch hop, as MPI ping-pong benchmarks (osu_latency) report
it. These are typical figures for a well-configured cluster, not guarantees: measure yours with
osu_latency / osu_bw and give them in a JSON file (``{"node": {"alpha": s, "bandwidth": B/s,
"lanes": n}}``), or let `distmm calibrate --network-into PROFILE` time them across two nodes
(bench/calibration_network.py), where they differ.
"""

from __future__ import annotations

NETWORKS: dict[str, tuple[float, float, int]] = {
    # Gigabit Ethernet (IEEE 802.3ab, 1000BASE-T): 125 MB/s on the wire, ~94% after TCP/IP
    # framing, ~117 MB/s. MPI over kernel TCP on GbE is commonly 30-60 us one way; we take
    # 50 us (an assumption, not checked against a datasheet). Slow enough that an emulated
    # cluster on one small machine spends a visible share of its time communicating.
    "1gbe": (50e-6, 1.17e8, 1),
    # 10 Gigabit Ethernet (IEEE 802.3ae): 10 Gb/s = 1.25 GB/s on the wire; TCP/IP over
    # Ethernet framing (1500-byte MTU: 1448 payload bytes per 1538 on the wire) leaves
    # ~94%, ~1.17 GB/s. MPI over the kernel's TCP stack (Open MPI tcp BTL, MPICH ch4:ofi
    # tcp) pays the socket path on both sides: we take 15 us one way, an assumption in the
    # range sockets-over-10GbE studies report (Balaji et al., "Sockets vs. RDMA Interface
    # over 10-Gigabit Networks", 2005); not checked against a datasheet here.
    "10gbe": (15e-6, 1.17e9, 1),
    # 25 Gigabit Ethernet (IEEE 802.3by) with RoCE: 3.125 GB/s line rate, ~93% after RoCEv2
    # headers, ~2.9 GB/s. NVIDIA ConnectX-6 EN product brief: "sub 0.8usec latency" for the
    # adapter; MPI over RoCE adds software and a switch hop: ~2.5 us one way.
    "25gbe": (2.5e-6, 2.9e9, 1),
    # 100 Gigabit Ethernet (IEEE 802.3bj) with RoCE: 12.5 GB/s line rate, ~11.6 GB/s after
    # headers. Latency as for 25GbE (same adapters, ConnectX-6 EN "sub 0.8usec"); Cisco's MPI
    # over 40GbE with OS bypass (usNIC, NetPIPE + Open MPI) measured 1.93 us half round trip:
    # 2 us.
    "100gbe": (2.0e-6, 11.6e9, 1),
    # InfiniBand HDR, 4x 50 Gb/s = 200 Gb/s = 25 GB/s (64b/66b encoding already in the 200).
    # NVIDIA ConnectX-6 VPI user manual: "up to two ports of 200Gb/s ... sub-600ns latency"
    # (adapter). MPI one-way small-message latency over HDR is ~1 us (the order MVAPICH2's
    # published osu_latency figures for ConnectX-6 HDR show; not re-checked here) and
    # osu_bw peaks near the data rate: 24 GB/s.
    "ib-hdr": (1.1e-6, 24e9, 1),
    # InfiniBand NDR, 4x 100 Gb/s = 400 Gb/s = 50 GB/s. NVIDIA ConnectX-7 (Quantum-2
    # platform; NVIDIA ConnectX-7 user manual): single-port NDR 400Gb/s, PCIe Gen5 x16. MPI
    # latency taken as HDR's less the faster adapter, 1 us (an assumption); bandwidth 96% of
    # the data rate, as HDR's 24 of 25: 48 GB/s.
    "ib-ndr": (1.0e-6, 48e9, 1),
}

__all__ = ["NETWORKS"]
