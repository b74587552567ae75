# Sourced by the scripts: settings for MPI ranks on a small machine (notes/machine.md).
# MPICH reads these at MPI_Init; they make waiting ranks yield instead of busy-polling, which
# matters when ranks outnumber cores. Open MPI yields by itself once told it is oversubscribed.
# Not MPIR_CVAR_ENABLE_HEAVY_YIELD: it slows large Alltoallv several times (bench/machine.py).
export MPIR_CVAR_POLLS_BEFORE_YIELD=${MPIR_CVAR_POLLS_BEFORE_YIELD:-1}
export MPIR_CVAR_CH4_PROGRESS_THROTTLE=${MPIR_CVAR_CH4_PROGRESS_THROTTLE:-1}
export MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT=${MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT:-1}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
