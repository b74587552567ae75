#!/usr/bin/env bash
# The main job (for now a small demonstration): every algorithm on a few ranks, each verified,
# with the layouts it set its data up from. Sets up .venv first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/mpienv.sh
export PATH="$PWD/.venv/bin:$PATH"
SHAPE=${DISTMM_DEMO_SHAPE:-1000,700,900}
run() { echo; echo "\$ mpiexec -n $*"; timeout 300 mpiexec -n "$@"; }
distmm layout "((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))" | head -n 8
run 4 distmm run cannon --shape "$SHAPE"
run 6 distmm run summa --shape "$SHAPE"
run 8 distmm run summa3d --shape "$SHAPE"
run 8 distmm run summa25d --shape "$SHAPE" --grid 2,2,2
run 8 distmm run cannon25d --shape "$SHAPE" --grid 2,2,2
run 8 distmm run tesseract --shape "$SHAPE"
run 6 distmm run t10 --fop 2,1,3 --shape "$SHAPE"
echo; echo "demo finished: every run above was verified"
