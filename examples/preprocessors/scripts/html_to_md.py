#!/usr/bin/env python3
"""Convert an HTML file to Markdown-ish text for graders: an evalstore/AgentV converter, standard library only.

Protocol: stdin is one JSON object ``{"path", "original_path", "media_type"}``; the text goes to stdout.

Keeps what a grader reads for: headings (``#``), paragraphs, lists (``-`` / ``1.``), links
(``[text](href)``), images (``![alt](src)``), emphasis, inline code and ``<pre>`` blocks (fenced),
block quotes, and tables (pipe tables). Drops scripts, styles, the ``<head>`` and comments.
Not a full HTML-to-Markdown converter: copy it and adapt it to the pages your agent writes.
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser

BLOCKS = {"p", "div", "section", "article", "header", "footer", "main", "nav", "aside", "figure", "form"}
SKIPPED = {"script", "style", "head", "template", "noscript", "svg"}
LIST_END = "\x00"
"""Marks where a list ended, so two adjacent lists stay two lists."""


class MarkdownWriter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []  # finished blocks, joined by blank lines
        self.line: list[str] = []  # the block being written
        self.skip_depth = 0
        self.pre_depth = 0
        self.lists: list[list] = []  # stack of [kind, counter]
        self.quote_depth = 0
        self.links: list[str | None] = []
        self.table: list[list[str]] | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.header_rows = 0

    # -- structure -------------------------------------------------------------------------------
    def flush(self) -> None:
        text = "".join(self.line)
        self.line = []
        if self.pre_depth:
            block = text.strip("\n")
        else:
            block = "\n".join(" ".join(part.split()) for part in text.split("\n")).strip()
        if not block:
            return
        if self.quote_depth:
            block = "\n".join(f"{'> ' * self.quote_depth}{ln}".rstrip() for ln in block.split("\n"))
        self.blocks.append(block)

    def write(self, text: str) -> None:
        if self.cell is not None:
            self.cell.append(text)
        else:
            self.line.append(text)

    # -- parser callbacks ------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag in SKIPPED:
            self.skip_depth += 1
            return
        if self.skip_depth:
            return
        if (
            tag in BLOCKS or tag in ("blockquote", "table", "ul", "ol", "pre") or re.fullmatch(r"h[1-6]", tag)
        ) and self.cell is None:
            self.flush()
        if re.fullmatch(r"h[1-6]", tag):
            self.write("#" * int(tag[1]) + " ")
        elif tag == "blockquote":
            self.quote_depth += 1
        elif tag in ("ul", "ol"):
            self.lists.append([tag, 0])
        elif tag == "li":
            self.flush()
            indent = "  " * max(0, len(self.lists) - 1)
            if self.lists and self.lists[-1][0] == "ol":
                self.lists[-1][1] += 1
                self.write(f"{indent}{self.lists[-1][1]}. ")
            else:
                self.write(f"{indent}- ")
        elif tag == "br":
            self.write("\n")
        elif tag == "hr":
            self.flush()
            self.blocks.append("---")
        elif tag in ("strong", "b"):
            self.write("**")
        elif tag in ("em", "i"):
            self.write("*")
        elif tag == "code" and not self.pre_depth:
            self.write("`")
        elif tag == "pre":
            self.pre_depth += 1
            self.write("```\n")
        elif tag == "a":
            self.links.append(attr.get("href"))
            self.write("[")
        elif tag == "img":
            self.write(f"![{attr.get('alt') or ''}]({attr.get('src') or ''})")
        elif tag == "table":
            self.table, self.header_rows = [], 0
        elif tag == "tr" and self.table is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []
            if tag == "th" and not self.table:
                self.header_rows = 1

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if self.skip_depth:
            return
        if tag in ("strong", "b"):
            self.write("**")
        elif tag in ("em", "i"):
            self.write("*")
        elif tag == "code" and not self.pre_depth:
            self.write("`")
        elif tag == "a":
            href = self.links.pop() if self.links else None
            self.write(f"]({href})" if href else "]")
        elif tag == "pre" and self.pre_depth:
            self.write("\n```")
            self.flush()
            self.pre_depth -= 1
        elif tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(" ".join("".join(self.cell).split()).replace("|", "\\|"))
            self.cell = None
        elif tag == "tr" and self.row is not None and self.table is not None:
            self.table.append(self.row)
            self.row = None
        elif tag == "table" and self.table is not None:
            self.blocks.append(pipe_table(self.table, self.header_rows))
            self.table = None
        elif tag in ("ul", "ol"):
            self.flush()
            if self.lists:
                self.lists.pop()
            if not self.lists:
                self.blocks.append(LIST_END)
        elif tag == "li":
            self.flush()
        elif tag == "blockquote":
            self.flush()
            self.quote_depth = max(0, self.quote_depth - 1)
        elif (tag in BLOCKS or re.fullmatch(r"h[1-6]", tag)) and self.cell is None:
            self.flush()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        if self.skip_depth:
            return
        self.write(data)

    def text(self) -> str:
        self.flush()
        merged: list[str] = []
        previous = ""
        for block in self.blocks:
            if block == LIST_END:
                previous = ""
                continue
            # Consecutive list items read as one list, not as separate paragraphs.
            if merged and _is_item(block) and _is_item(previous):
                merged[-1] += "\n" + block
            else:
                merged.append(block)
            previous = block
        return "\n\n".join(merged)


def _is_item(line: str) -> bool:
    return bool(re.match(r"^\s*(- |\d+\. )", line))


def pipe_table(rows: list[list[str]], header_rows: int) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    header, body = (rows[0], rows[1:]) if header_rows else ([""] * width, rows)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * width) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def convert(html: str) -> str:
    writer = MarkdownWriter()
    writer.feed(html)
    writer.close()
    return writer.text()


def main() -> int:
    try:
        request = json.load(sys.stdin)
        path = request["path"]
    except (ValueError, KeyError, TypeError):
        print('stdin must be a JSON object with a "path"', file=sys.stderr)
        return 2
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            sys.stdout.write(convert(handle.read()) + "\n")
    except OSError as exc:
        print(f"cannot read {request.get('original_path') or path}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
