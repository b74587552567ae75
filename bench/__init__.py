"""The benchmark driver: the `distmm` command, runs, verification, model and reports."""
