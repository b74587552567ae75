"""A small document (headings, paragraphs, lists, images, tables) written as Markdown and as one
self-contained HTML page (images inlined as data URIs). Tables are rendered by tabulate."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from tabulate import tabulate

_STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
    "color:#222}img{max-width:100%;border:1px solid #ddd}"
    "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f0f0f0}code{background:#f4f4f4}"
)


class Doc:
    def __init__(self):
        self.blocks = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def ul(self, items):
        if items:
            self.blocks.append(("ul", items))

    def img(self, name, alt):
        self.blocks.append(("img", name, alt))

    def table(self, headers, rows):
        if rows:
            self.blocks.append(("table", headers, rows))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "ul":
                out.append("\n".join(f"- {i}" for i in b[1]))
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1]})")
            else:
                _, headers, rows = b
                cells = [[_escape_pipes(c) for c in r] for r in rows]
                heads = [_escape_pipes(h) for h in headers]
                out.append(tabulate(cells, heads, tablefmt="github", disable_numparse=True))
        return "\n\n".join(out) + "\n"

    def html(self, out: Path, title: str) -> str:
        """The page; images are read from ``out``, where markdown() expects them."""
        e = html.escape
        parts = [
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
            f"<style>{_STYLE}</style></head><body>"
        ]
        for b in self.blocks:
            if b[0] == "h":
                parts.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                parts.append(f"<p>{_inline(b[1])}</p>")
            elif b[0] == "ul":
                parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
            elif b[0] == "img":
                data = base64.b64encode((out / b[1]).read_bytes()).decode()
                parts.append(f"<p><img alt='{e(b[2])}' src='data:image/png;base64,{data}'></p>")
            else:
                _, headers, rows = b
                cells = [[_inline(str(c)) for c in r] for r in rows]
                parts.append(
                    tabulate(
                        cells, [e(h) for h in headers], tablefmt="unsafehtml", disable_numparse=True
                    )
                )
        parts.append("</body></html>")
        return "\n".join(parts)


def _escape_pipes(cell) -> str:
    """A Markdown table cell: a '|' in it would end the cell."""
    return str(cell).replace("|", "\\|")


def _inline(text: str) -> str:
    """Markdown `code` and **bold** to HTML (all the report uses)."""
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", t)
