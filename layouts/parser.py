"""The parser of the layout notation (grammar in :mod:`layouts.tensorlayout`).

:func:`parse_layout` reads the text into a :class:`TensorLayout`; every problem raises one
:class:`LayoutError` that quotes the input and names the position.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .tensorlayout import Factor, LayoutError, Rotation, TensorLayout

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z][A-Za-z0-9]*)|([()\[\],:_;@/+\-*=]))", re.ASCII)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m:
                ch = text[pos:].lstrip()[:1]
                raise LayoutError(
                    text,
                    f"unexpected character {ch!r} at position "
                    f"{len(text) - len(text[pos:].lstrip())}",
                )
            kind = "int" if m.group(1) else "name" if m.group(2) else "sym"
            val = m.group(1) or m.group(2) or m.group(3)
            self.toks.append((kind, val, m.start(m.lastindex)))
            pos = m.end()
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "", len(self.text))

    def take(self, val: str | None = None, kind: str | None = None) -> str:
        k, v, pos = self.peek()
        if (val is not None and v != val) or (kind is not None and k != kind):
            want = repr(val) if val is not None else {"int": "a number", "name": "a name"}[kind]
            got = "the end" if k == "end" else repr(v)
            raise LayoutError(self.text, f"expected {want} at position {pos}, found {got}")
        self.i += 1
        return v

    def integer(self) -> int:
        pos = self.peek()[2]
        digits = self.take(kind="int")
        try:
            return int(digits)
        except ValueError:  # beyond Python's int-conversion digit limit
            raise LayoutError(
                self.text, f"the number at position {pos} has too many digits ({len(digits)})"
            ) from None

    def layout(self) -> TensorLayout:
        shape = None
        if self.peek()[1] == "(" and self.peek(1)[0] == "int" and self._is_shape():
            shape = self.shape()
            self.take("/")
        self.take("(")
        dims = [self.dim()]
        suffixes: dict[str, object] = {}
        while True:
            v = self.peek()[1]
            if v == ",":
                self.take(",")
                dims.append(self.dim())
            elif v == ";":
                self.take(";")
                self.suffix(suffixes)
            else:
                break
        self.take(")")
        if self.peek()[0] != "end":
            raise LayoutError(
                self.text,
                f"unexpected {self.peek()[1]!r} after the layout at position {self.peek()[2]}",
            )
        try:
            return TensorLayout(
                tuple(dims), shape, suffixes.get("B", ()), suffixes.get("P", ()), suffixes.get("R")
            )
        except LayoutError as err:
            raise LayoutError(self.text, err.problem) from None

    def _is_shape(self) -> bool:
        # "(10,7)/..." : a parenthesised list of plain integers followed by "/".
        j = 1
        while self.peek(j)[0] == "int" and self.peek(j + 1)[1] in (",", ")"):
            if self.peek(j + 1)[1] == ")":
                return self.peek(j + 2)[1] == "/"
            j += 2
        return False

    def shape(self) -> tuple[int, ...]:
        self.take("(")
        out = [self.integer()]
        while self.peek()[1] == ",":
            self.take(",")
            out.append(self.integer())
        self.take(")")
        return tuple(out)

    def dim(self) -> tuple[Factor, ...]:
        if self.peek()[1] != "(":
            return (self.factor(),)
        self.take("(")
        out = [self.factor()]
        while self.peek()[1] == ",":
            self.take(",")
            out.append(self.factor())
        self.take(")")
        return tuple(out)

    def factor(self) -> Factor:
        size = self.integer()
        level = stride = None
        if self.peek()[1] == "_":
            self.take("_")
            level = self.take(kind="name")
        if self.peek()[1] == ":":
            self.take(":")
            stride = self.integer()
        return Factor(size, level, stride)

    def names(self) -> tuple[str, ...]:
        self.take("[")
        out = [self.take(kind="name")]
        while self.peek()[1] == ",":
            self.take(",")
            out.append(self.take(kind="name"))
        self.take("]")
        return tuple(out)

    def suffix(self, into: dict) -> None:
        k, v, pos = self.peek()
        if v not in ("B", "P", "R"):
            raise LayoutError(
                self.text, f"expected B@[...], P@[...] or R@[...] at position {pos}, found {v!r}"
            )
        if v in into:
            raise LayoutError(self.text, f"{v}@[...] is given twice")
        self.take(v)
        self.take("@")
        if v in ("B", "P"):
            into[v] = self.names()
            return
        self.take("[")
        terms: list[tuple[str, int]] = []
        sign = 1
        if self.peek()[1] == "-":
            self.take("-")
            sign = -1
        zero = self.peek()[1] == "0" and self.peek(1)[1] != "*"  # R@[0]: no offset
        if zero:
            self.take()
        while not zero:
            coef = 1
            if self.peek()[0] == "int":
                coef = self.integer()
                self.take("*")
            terms.append((self.take(kind="name"), sign * coef))
            if self.peek()[1] in ("+", "-"):
                sign = 1 if self.take() == "+" else -1
                continue
            break
        terms = [(level, coef) for level, coef in terms if coef]  # (0*x offsets nothing)
        options = {"pace": 1, "window": 1}
        given: set[str] = set()
        while self.peek()[1] == ",":
            self.take(",")
            k, name, pos = self.peek()
            if name not in options or name in given:
                raise LayoutError(
                    self.text,
                    f"expected pace= or window= (each once) at position "
                    f"{pos}, found {name or 'the end'!r}",
                )
            self.take(name)
            self.take("=")
            options[name] = self.integer()
            given.add(name)
        self.take("]")
        into["R"] = Rotation(tuple(terms), options["pace"], options["window"])


@lru_cache(maxsize=4096)
def parse_layout(text: str) -> TensorLayout:
    """Parse the notation; raises :class:`LayoutError` quoting ``text`` on any problem."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutError(str(text), "empty layout")
    return _Parser(text).layout()
