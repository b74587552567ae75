#!/usr/bin/env bash
# The whole test suite: ruff (lint and format), serial tests, then the MPI tests at several
# rank counts.
# Sets up .venv first (scripts/setup.sh). Every MPI job runs under a hard timeout as well as
# pytest-timeout's per-test one, so a hang fails the run instead of stalling it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/mpienv.sh
export PATH="$PWD/.venv/bin:$PATH"
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-420}
RANKS=${DISTMM_TEST_RANKS:-"1 2 3 4 6 8 9"}

echo "== lint and format (ruff)"
ruff check .
ruff format --check .
echo "== serial tests"
python -m pytest -q "$@"
for n in $RANKS; do
  echo "== MPI tests on $n ranks"
  mpiexec_n "$n" python -m mpi4py -m pytest -q --only-mpi "$@"  # (scripts/mpienv.sh)
done
echo "== all test runs passed (serial and MPI at $RANKS ranks)"
