"""The error every command raises for bad input the user can fix (bench.cli prints it)."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input the user can fix; printed as one line, exit status 2."""
