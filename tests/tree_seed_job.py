"""Run under `mpiexec -n 16` (a 2,2,2,2 tree): the seed example's notation with smaller sizes sets
up data on every PE and gathers back to the global matrix (tests/test_tree.py launches it)."""

import sys

import numpy as np
from mpi4py import MPI

from layouts import generate_block, global_matrix, parse_layout
from layouts.redistribute import gather
from topology.tree import parse_topology

tree = parse_topology(sys.argv[1] if len(sys.argv) > 1 else "mncore:2,2,2,2")
text = sys.argv[2] if len(sys.argv) > 2 else "((2_L2B, 2_L1B, 8:8), (2_MAB, 8:1, 2_PE))"
world = MPI.COMM_WORLD
cart = world.Create_cart(list(tree.shape), periods=[True] * 4, reorder=False)


class View:  # what gather needs: abstract, rank, coords, cart
    abstract, rank, cart = tree, cart.Get_rank(), cart
    coords = tree.coords(cart.Get_rank())


lay = parse_layout(text)
block = generate_block(lay, View.coords, 9)
whole = gather(block, lay, View)
if world.Get_rank() == 0:
    ok = np.array_equal(whole, global_matrix(lay.logical_shape, 9))
    print(
        f"seed layout {lay} shape {lay.logical_shape} block {lay.block_shape}: "
        f"{'gathered == global' if ok else 'MISMATCH'}"
    )
    sys.exit(0 if ok else 1)
