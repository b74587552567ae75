#!/usr/bin/env bash
# A Slurm batch script: calibrate the nodes, run a sweep inside the allocation with srun, write
# the report. Submit from the repository root:  sbatch scripts/slurm_sweep.sh [SWEEP.toml]
#SBATCH --job-name=distmm-sweep
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --output=results/slurm-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
SWEEP=${1:-scripts/strong.toml}
# On a cluster install against the site MPI (mpi4py builds against it), not the MPICH wheels:
#   python3 -m venv .venv && .venv/bin/pip install -e .
export PATH="$PWD/.venv/bin:$PATH"
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}   # BLAS threads per rank
RPN=${SLURM_NTASKS_PER_NODE:-1}
NAME=$(basename "$SWEEP" .toml)-$SLURM_JOB_ID
# One profile for the whole allocation (every rank count the sweep uses).
srun -n "$SLURM_NTASKS" --ntasks-per-node "$RPN" --cpu-bind=cores \
    distmm calibrate --out "results/$NAME-profile.json"
status=0  # the sweep exits 1 if some run failed: the report still says which
distmm sweep "$SWEEP" --name "$NAME" --launcher srun --ranks-per-node "$RPN" --pin \
    --profile "results/$NAME-profile.json" || status=$?
distmm report "results/$NAME.csv" -o "results/$NAME-report"
echo "report: results/$NAME-report/report.html"
exit "$status"
