#!/usr/bin/env bash
# The accuracy figures that need a core per rank, on a borrowed machine with more cores, no
# network and a hard time limit (one command, a few minutes):
#
#     scripts/device_suite.sh OUTDIR SECONDS [STAGE ...]
#
# Without .venv, it first makes one over the machine's own python3 (whose NumPy, SciPy, pandas
# and matplotlib it uses) with the wheels in $WHEELS (default .whl, ignored by git: mpich,
# mpi4py and what that Python lacks), fetched beforehand where there is a network, e.g. for a
# Python 3.12 machine:
#     for p in mpich mpi4py viztracer objprint greenlet filelock tabulate; do
#       pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#         --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl $p; done
# Then the stages, each capped by what is left of SECONDS (default: calibrate plan_speed
# plan_block):
#   calibrate   a calibration at one rank per core, into OUTDIR/profile.json
#   plan_speed  distmm plan's speed at 8192 ranks (scripts/plan_speed.py)
#   plan_block  the planner from block layouts (scripts/plan_accuracy.py) at 16 and 8 ranks,
#               then at 4 and 6 ($PLAN_RANKS: other sets), each set complete with its summary
#               or cut by the clock; every case's runs in OUTDIR/plan_block.jsonl
#   gemm_busy   GEMMs with every rank computing at once, three times (scripts/gemm_busy.py)
#   moves       layout changes timed cold (as calibrate times them) and warm, against the
#               profile's price, at 4, 8 and 16 ranks (scripts/moves_warmth.py): are runs'
#               redistributions priced slow because calibrate's moves start out of the caches?
#   messages    runs whose time is largely messages, overlapped and blocking, at 16 then 4 ranks
#               ($MESSAGE_RANKS), priced with the profile (scripts/messages_accuracy.py; the
#               records in OUTDIR/messages_RANKS.jsonl for --replay)
# The stages after calibrate use OUTDIR/profile.json, or $PROFILE if that is set. Everything
# is packed into OUTDIR/all.tgz at the end; the machine's facts are in OUTDIR/machine.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/device_suite.sh OUTDIR SECONDS [STAGE ...]}
budget=${2:?usage: scripts/device_suite.sh OUTDIR SECONDS [STAGE ...]}
shift 2
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(calibrate plan_speed plan_block)
wheels=${WHEELS:-.whl}
end=$((SECONDS + budget))
mkdir -p "$out"
out=$(cd "$out" && pwd)
left() { echo $((end - SECONDS - ${1:-0})); }
stage() {  # stage NAME RESERVE CMD...: run CMD with what is left less RESERVE seconds
  local name=$1 cap
  cap=$(left "$2")
  shift 2
  if [ "$cap" -lt 20 ]; then
    echo "=== $(date +%T) skip $name (${cap}s left)" | tee -a "$out/log"
    return
  fi
  echo "=== $(date +%T) start $name (cap ${cap}s)" | tee -a "$out/log"
  timeout -k 5 "$cap" "$@" >"$out/$name.txt" 2>"$out/$name.err"
  echo "=== $(date +%T) done $name rc=$?" | tee -a "$out/log"
}

if [ ! -x .venv/bin/python ]; then
  base=$(command -v python3)
  venv=/tmp/distmm-venv
  "$base" -m venv "$venv" &&
    "$venv/bin/python" -m pip install -q --no-index --no-deps --no-compile "$wheels"/*.whl ||
    { echo "could not make $venv from $wheels" | tee -a "$out/log"; exit 1; }
  # the machine's own packages (NumPy, SciPy, ...) after the venv's, their .pth files honoured
  sitedir=$("$base" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  purelib=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "import site; site.addsitedir('$sitedir')" >"$purelib/zz-machine.pth"
  ln -sfn "$venv" .venv
fi
source scripts/mpienv.sh
PY=.venv/bin/python
export PATH="$PWD/.venv/bin:$PATH"

{
  date
  nproc
  lscpu | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\)|NUMA node\(s\))"
  free -g | head -2
  df -h /dev/shm | tail -1
  "$PY" -c "import sys, numpy, scipy, mpi4py.MPI as M; print(sys.version.split()[0], \
numpy.__version__, scipy.__version__, M.Get_library_version().splitlines()[0])"
  "$PY" -m threadpoolctl -i numpy 2>/dev/null | grep -E '"(internal_api|version|architecture)"'
} >"$out/machine.txt" 2>&1
cores=$("$PY" -c "from bench.machine import cores; print(cores())")
mpiexec_for "$cores"  # (scripts/mpienv.sh) the array launch, for `timeout` to run
prof=${PROFILE:-$out/profile.json}

for name in "${stages[@]}"; do
  case $name in
    calibrate) stage calibrate 150 "${launch[@]}" "$PY" -m bench.cli calibrate --out "$prof" ;;
    plan_speed) stage plan_speed 120 "$PY" scripts/plan_speed.py --profile "$prof" --P 8192 \
      --layouts block,native --repeat 3 ;;
    plan_block)
      for ranks in ${PLAN_RANKS:-16,8 4,6}; do
        stage "plan_block_${ranks/,/_}" 15 "$PY" -u scripts/plan_accuracy.py --profile "$prof" \
          --layouts block --ranks "$ranks" --out "$out/plan_block_${ranks/,/_}.final" \
          --records "$out/plan_block.jsonl"
      done ;;
    gemm_busy)
      for lap in 1 2 3; do
        stage "gemm_busy_$lap" 10 "${launch[@]}" "$PY" scripts/gemm_busy.py --profile "$prof"
      done ;;
    moves) stage moves 10 "${launch[@]}" "$PY" -u scripts/moves_warmth.py --profile "$prof" ;;
    messages)
      for ranks in ${MESSAGE_RANKS:-16 4}; do
        stage "messages_$ranks" 10 "$PY" -u scripts/messages_accuracy.py --profile "$prof" \
          --ranks "$ranks" --records "$out/messages_$ranks.jsonl"
      done ;;
    *) echo "unknown stage $name" | tee -a "$out/log" ;;
  esac
done
tar czf "$out.tgz" -C "$out" . && mv "$out.tgz" "$out/all.tgz"
cat "$out/log"
