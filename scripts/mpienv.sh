# Sourced by the scripts: settings for MPI ranks on a small machine (bench/machine.py).
# MPICH reads these at MPI_Init; they make waiting ranks yield instead of busy-polling, which
# matters when ranks outnumber cores. Open MPI yields by itself once told it is oversubscribed.
# Not MPIR_CVAR_ENABLE_HEAVY_YIELD: it slows large Alltoallv several times (bench/machine.py).
export MPIR_CVAR_POLLS_BEFORE_YIELD=${MPIR_CVAR_POLLS_BEFORE_YIELD:-1}
export MPIR_CVAR_CH4_PROGRESS_THROTTLE=${MPIR_CVAR_CH4_PROGRESS_THROTTLE:-1}
export MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT=${MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT:-1}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

# mpiexec_for N: the array `launch` set to the launcher for N ranks: the mpiexec beside the Python
# (${PY:-python}) and the flags its MPI needs here (Open MPI's --oversubscribe beyond the cores,
# --allow-run-as-root as root), as distmm starts its own jobs (bench.launch.mpiexec_command);
# for commands a function cannot run in, e.g. under `timeout`
mpiexec_for() {
  eval "launch=($("${PY:-python}" -c 'import shlex, sys
from bench.launch import Launcher
print(shlex.join(Launcher.find().command(int(sys.argv[1]), [], program=())))' "$1"))"
}

# mpiexec_n N CMD...: CMD on N ranks with that launcher
mpiexec_n() {
  local n=$1 launch
  shift
  mpiexec_for "$n"
  "${launch[@]}" "$@"
}
