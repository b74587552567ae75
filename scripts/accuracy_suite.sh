#!/usr/bin/env bash
# Every accuracy figure of the cost model on this machine, one stage after another, each stage's
# output in OUTDIR (a calibration at one rank per core, then the model on a mesh and on an
# emulated cluster, the planner from block layouts on both, end-to-end runs on a mesh and on
# the emulated MN-Core tree, overlap on and off):
#
#     scripts/accuracy_suite.sh OUTDIR [STAGE ...]
#
# Stages (default: all, in this order): calibrate model_mesh overlap plan_block e2e throughput
# model_emu plan_emu tree_e2e.
# OUTDIR/log holds each stage's start and end; a stage reuses OUTDIR/profile.json once made.
# About 40 minutes on 16 cores; ranks go up to 16 whatever the cores (oversubscribed below 16).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/accuracy_suite.sh OUTDIR [STAGE ...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
stages=("$@")
all=(calibrate model_mesh overlap plan_block e2e throughput model_emu plan_emu tree_e2e)
[ ${#stages[@]} -eq 0 ] && stages=("${all[@]}")
for stage in "${stages[@]}"; do
  [[ " ${all[*]} " == *" $stage "* ]] || { echo "unknown stage $stage (${all[*]})" >&2; exit 2; }
done
source scripts/mpienv.sh
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
cores=$("$PY" -c "from bench.machine import cores; print(cores())")
prof=$out/profile.json

overlap() {  # overlap on and off, alternated, three pairs per case, at P = 16
  for rep in 1 2 3; do
    for case in "summa 4096,4096,4096" "cannon 4096,4096,4096" "t10 4096,4096,4096" \
      "summa25d 4096,4096,4096" "summa 8192,2048,2048"; do
      set -- $case
      for flag in "" --no-overlap; do
        mpiexec_n 16 "$PY" -m bench.cli run "$1" --shape "$2" --repeat 5 --json $flag |
          "$PY" -c "import json, sys; r = json.loads(sys.stdin.read().splitlines()[-1]);
print('$rep $1 $2 ${flag:---overlap}', r['seconds'], r['compute_seconds'], r['grid'])"
      done
    done
  done
}

for stage in "${stages[@]}"; do
  echo "=== $(date +%T) start $stage" >>"$out/log"
  case $stage in
    calibrate) mpiexec_n "$cores" "$PY" -m bench.cli calibrate --out "$prof" ;;
    model_mesh) "$PY" scripts/model_accuracy.py --profile "$prof" --ranks 1,2,4,6,8,9,12,16 \
      --repeat 3 --rounds 3 --out "$out/model_mesh.csv" ;;
    overlap) overlap ;;
    plan_block) "$PY" scripts/plan_accuracy.py --profile "$prof" --layouts block \
      --out "$out/plan_block.txt" ;;
    e2e) "$PY" scripts/end_to_end.py --profile "$prof" --ranks 4,8,9,16 --repeat 3 \
      --out "$out/e2e.csv" ;;
    throughput) "$PY" scripts/redistribution_throughput.py --ranks 4,8,9,16 \
      --out "$out/throughput.csv" ;;
    model_emu) "$PY" scripts/model_accuracy.py --profile "$prof" --ranks 8,16 --repeat 3 \
      --rounds 3 --cluster 2 --emulate-links 1gbe --out "$out/model_emu.csv" ;;
    plan_emu) "$PY" scripts/plan_accuracy.py --profile "$prof" --ranks 4,6,8,16 --cluster 2 \
      --emulate-links 1gbe --layouts block --repeat 3 --out "$out/plan_emu.txt" ;;
    tree_e2e) "$PY" scripts/tree_study.py --profile "$prof" --layouts block \
      --out "$out/tree_e2e.json" ;;
  esac >"$out/$stage.txt" 2>"$out/$stage.err"
  echo "=== $(date +%T) done $stage rc=$?" >>"$out/log"
done
