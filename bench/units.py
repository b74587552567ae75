"""Reading and writing numbers the way every command spells them: integer lists and shapes
(``2x3`` or ``2,3``), counts, byte sizes (``512MiB``) and byte amounts in text."""

from __future__ import annotations

import argparse
import math
import re

_BYTE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def parse_ints(text: str, count: int | None = None) -> tuple[int, ...]:
    """``"2x3"``, ``"2,3"`` or ``"(2, 3)"`` -> (2, 3): positive integers, ``count`` of them if
    given. Raises ValueError with a message quoting ``text``."""
    parts = text.strip().strip("()").replace("x", ",").split(",")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{text!r} is not a list of integers") from None
    if count is not None and len(values) != count:
        raise ValueError(f"{text!r} needs {count} integers")
    if any(v < 1 for v in values):
        raise ValueError(f"{text!r}: sizes must be positive")
    return values


def ints(count: int | None = None):
    """The argparse type of a list of ``count`` positive integers (any number if None)."""

    def parse(text: str) -> tuple[int, ...]:
        return _argument(parse_ints, text, count)

    return parse


parse_shape = ints(3)  # the argparse type of --shape M,K,N


def parse_int(text: str, low: int = 1) -> int:
    """An integer of at least ``low``; ValueError with a message quoting ``text``."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if value < low:
        raise ValueError(f"{text!r} must be at least {low}")
    return value


def positive(text: str) -> int:
    """The argparse type of an integer >= 1."""
    return _argument(parse_int, text, 1)


def nonnegative(text: str) -> int:
    """The argparse type of an integer >= 0."""
    return _argument(parse_int, text, 0)


def _argument(parse, *args):
    """``parse(*args)``, its ValueError turned into argparse's error (message kept)."""
    try:
        return parse(*args)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_bytes(text: str) -> int:
    """The argparse type of a size: '2GiB', '512MiB', '1.5GB', '1000000' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 2GiB, 512MiB, 1000000)")
    value, unit, binary = float(m.group(1)), m.group(2).upper(), m.group(3)
    power = " KMGT".index(unit) if unit else 0
    n = int(value * (1024 if binary or not unit else 1000) ** power) if unit else int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return n


def format_seconds(x: float) -> str:
    """Seconds as a run prints them: 4 decimals, more below a millisecond so that at least 3
    significant digits show (0.0007 .. 0.0007 hid a 5% wide interval)."""
    if not x or not math.isfinite(x) or abs(x) >= 1e-3:
        return f"{x:.4f}"
    return f"{x:.{2 - math.floor(math.log10(abs(x)))}f}"


def format_bytes(n, unit: str = "auto", spec: str = ".2f", label: bool = True) -> str:
    """``n`` bytes as text: in ``unit`` (B, KiB, MiB, GiB; "auto": the largest not above n, whole
    bytes below 1 KiB), formatted with ``spec``, followed by the unit unless ``label`` is False.
    None or NaN -> "-"."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    if unit == "auto":
        unit = next((u for u in ("GiB", "MiB", "KiB") if n >= _BYTE_UNITS[u]), "B")
        if unit == "B":
            return f"{int(n)} B"
    text = format(n / _BYTE_UNITS[unit], spec)
    return f"{text} {unit}" if label else text
