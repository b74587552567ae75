"""The alpha-beta-gamma cost model, evaluated on the schedule an algorithm really executes.

:func:`schedule` (schedule.py) runs an algorithm's own ``multiply`` loop on a symbolic
communication layer (no MPI, no GEMMs) for one rank, so the events priced here are the ones the
real run issues. :func:`predict` (walk.py) walks them with a calibrated :class:`Profile`
(profile.py); collective costs follow MPICH's algorithms (topology/costs.py), scaled by a factor
per collective that calibration measures. :func:`price` walks a schedule while the loop issues
it, and :func:`search` (search.py) uses that to stop the loops of candidate plans that cannot
change the planner's answer. redistribution.py prices moving a tensor between two
layouts; stated.py holds the literature's closed forms for comparison. No MPI import here:
predictions for thousands of ranks run anywhere.
"""

from algorithms.events import level_bytes
from topology.costs import EAGER_LIMIT, collective_seconds

from .profile import Profile, ProfileError
from .redistribution import (
    MovePrice,
    move_seconds,
    phase_barrier,
    plan_moves,
    price_moves,
    redistribution_seconds,
    transfer_seconds,
)
from .schedule import Pruned, bytes_per_rank, price, schedule, setup_seconds
from .search import Job, search
from .stated import stated_cost
from .walk import Prediction, combine_seconds, communication_seconds, own_copy_seconds, predict

__all__ = [
    "EAGER_LIMIT",
    "Job",
    "MovePrice",
    "Prediction",
    "Profile",
    "ProfileError",
    "Pruned",
    "bytes_per_rank",
    "collective_seconds",
    "combine_seconds",
    "communication_seconds",
    "level_bytes",
    "own_copy_seconds",
    "predict",
    "price",
    "move_seconds",
    "phase_barrier",
    "plan_moves",
    "price_moves",
    "redistribution_seconds",
    "schedule",
    "search",
    "setup_seconds",
    "stated_cost",
    "transfer_seconds",
]
