"""The `distmm` command. Each subcommand lives in its own module, imported only when used.

A subcommand module provides ``add_arguments(parser)`` and ``main(args) -> int``. Expected bad
input raises :class:`UsageError` (or LayoutError / MeshError): every rank reaches the same verdict
without communicating, rank 0 prints one line, and every rank exits with status 2, once all are
there (bench.machine.leave_together: Open MPI ends a job at its first rank's non-zero exit).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .errors import UsageError

SUBCOMMANDS = {
    "layout": ("bench.layout_cmd", "show a layout: canonical form, shapes, placement, plot"),
    "run": ("bench.run_cmd", "run one distributed multiplication (under mpiexec)"),
    "calibrate": ("bench.calibrate_cmd", "measure this machine for the cost model (under mpiexec)"),
    "predict": ("bench.predict_cmd", "predict a run's time from a profile (no MPI needed)"),
    "plan": ("bench.plan_cmd", "choose algorithm, grid and parameters by the model (no MPI)"),
    "analyze": ("bench.analyze_cmd", "compare a traced run with the model, phase by phase"),
    "sweep": ("bench.sweep_cmd", "run a scaling sweep under mpiexec into a results table"),
    "report": ("bench.report_cmd", "plots and a report (Markdown, HTML) from a results table"),
    "compare": ("bench.compare_cmd", "is NEW faster or slower than OLD? (two results tables)"),
}

# commands that price moves and move no data: NumPy sorts as fast as it can (bench/numpy_sorts.py)
MODEL_ONLY = ("plan", "predict")


def _rank() -> int:
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    from .machine import launched_rank

    return launched_rank()


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, printed by rank 0 only, exit status 2."""

    def error(self, message: str):
        if message.endswith("expected one argument"):  # argparse takes "-512,4,512" for a flag
            message += " (a value that starts with '-' is written --option=VALUE)"
        if _rank() == 0:
            print(f"{self.prog}: error: {message}", file=sys.stderr, flush=True)
        from .machine import leave_together

        leave_together()
        sys.exit(2)


def build_parser(names=tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The parser of the subcommands ``names`` (default: all)."""
    parser = _Parser(prog="distmm", description=__doc__.splitlines()[0])
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = {}  # name -> its parser, whose errors name the subcommand
    for name in names:
        module, help_text = SUBCOMMANDS[name]
        sub = parser.commands[name] = subs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in MODEL_ONLY:
        from .numpy_sorts import import_numpy_for_sorting

        import_numpy_for_sorting()  # before anything imports NumPy
    # Build only the parser of the subcommand asked for, so `distmm layout` never loads MPI.
    parser = build_parser([argv[0]] if argv and argv[0] in SUBCOMMANDS else SUBCOMMANDS)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand's parser: "distmm run: error: ..."
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    from algorithms.plan import PlanError
    from layouts import LayoutError
    from topology import MeshError

    from .model import ProfileError

    try:
        status = int(importlib.import_module(args._module).main(args) or 0)
    except KeyboardInterrupt:
        if "mpi4py.MPI" in sys.modules:  # a job's ranks abort together (bench/machine.py)
            raise
        print(f"distmm {args.command}: interrupted", file=sys.stderr, flush=True)
        return 130  # 128 + SIGINT, as the shell reports a Ctrl-C
    except BrokenPipeError:
        if "mpi4py.MPI" in sys.modules:  # a job's ranks abort together (bench/machine.py)
            raise
        # the reader of our output left (`distmm plan ... | head`): stop quietly, as Unix
        # tools do, with nothing more to flush into the closed pipe at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UsageError, LayoutError, MeshError, PlanError, ProfileError, OSError) as err:
        from .machine import abort_job, past_validation

        message = f"distmm {args.command}: error: {err}"
        if past_validation():  # perhaps this rank's alone: the others must not wait for it
            abort_job(message, 2)
        if _rank() == 0:
            print(message, file=sys.stderr, flush=True)
        status = 2
    if status != 0:  # every rank's verdict, rank 0's line out before any rank ends
        from .machine import leave_together

        leave_together()
    return status


if __name__ == "__main__":
    # Run the imported module's main, so its exception classes are the ones others import.
    from bench.cli import main as _main

    sys.exit(_main())
