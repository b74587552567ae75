#!/usr/bin/env bash
# The main job: calibrate this machine, sweep every algorithm at 4 and 8 ranks from native and
# from block layouts (traced, with the model's prediction), and write the report. Sets up .venv
# first (scripts/setup.sh). Started again, the sweep skips the runs already in
# results/quickstart.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/mpienv.sh
export PATH="$PWD/.venv/bin:$PATH"
status=0
distmm sweep scripts/quickstart.toml || status=$?  # 1: some run failed (the report says which)
distmm report results/quickstart.csv -o results/quickstart-report >/dev/null
echo
echo "report: $PWD/results/quickstart-report/report.html (and report.md beside it)"
exit "$status"
