#!/usr/bin/env python3
"""Convert a .docx document to plain text for graders: an evalstore/AgentV converter, standard library only.

Protocol: stdin is one JSON object ``{"path", "original_path", "media_type"}``; the text goes to stdout.

Reads ``word/document.xml`` in body order: one paragraph per line group, headings (styles
``Heading1``..``Heading6``, ``Title``) marked with ``#``, list paragraphs as ``- `` items, tabs and
line breaks kept, and tables as `` | ``-separated rows. Headers, footers, comments and tracked
deletions are left out. Copy it and adapt it to the documents your agent writes.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from xml.etree import ElementTree as ET

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def paragraph_text(paragraph: ET.Element) -> str:
    parts: list[str] = []
    for node in paragraph.iter():
        if node.tag == f"{W}t" and node.text:
            parts.append(node.text)
        elif node.tag == f"{W}tab":
            parts.append("\t")
        elif node.tag in (f"{W}br", f"{W}cr"):
            parts.append("\n")
    return "".join(parts)


def _without_deletions(paragraph: ET.Element) -> ET.Element:
    for parent in paragraph.iter():
        for child in list(parent):
            if child.tag == f"{W}del":
                parent.remove(child)
    return paragraph


def paragraph_line(paragraph: ET.Element) -> str:
    text = paragraph_text(_without_deletions(paragraph)).strip()
    if not text:
        return ""
    props = paragraph.find(f"{W}pPr")
    style = ""
    if props is not None:
        style_el = props.find(f"{W}pStyle")
        style = style_el.get(f"{W}val", "") if style_el is not None else ""
        if props.find(f"{W}numPr") is not None:
            return f"- {text}"
    heading = re.fullmatch(r"(?i)heading\s*([1-6])", style)
    if heading:
        return f"{'#' * int(heading.group(1))} {text}"
    if style.lower() == "title":
        return f"# {text}"
    if style.lower().startswith("list"):
        return f"- {text}"
    return text


def table_lines(table: ET.Element) -> list[str]:
    lines = []
    for row in table.findall(f"{W}tr"):
        cells = []
        for cell in row.findall(f"{W}tc"):
            texts = [paragraph_text(p).strip() for p in cell.iter(f"{W}p")]
            cells.append(" ".join(t for t in texts if t))
        lines.append(" | ".join(cells))
    return lines


def convert(path: str) -> str:
    with zipfile.ZipFile(path) as document:
        root = ET.fromstring(document.read("word/document.xml"))
    body = root.find(f"{W}body")
    if body is None:
        return ""
    blocks: list[str] = []
    for element in body:
        if element.tag == f"{W}p":
            line = paragraph_line(element)
            if line:
                blocks.append(line)
        elif element.tag == f"{W}tbl":
            blocks.append("\n".join(table_lines(element)))
    # List items stay together; other blocks are separated by a blank line.
    out: list[str] = []
    for block in blocks:
        if out and block.startswith("- ") and out[-1].split("\n")[-1].startswith("- "):
            out[-1] += "\n" + block
        else:
            out.append(block)
    return "\n\n".join(out)


def main() -> int:
    try:
        request = json.load(sys.stdin)
        path = request["path"]
    except (ValueError, KeyError, TypeError):
        print('stdin must be a JSON object with a "path"', file=sys.stderr)
        return 2
    try:
        sys.stdout.write(convert(path) + "\n")
    except (OSError, zipfile.BadZipFile, KeyError, ET.ParseError) as exc:
        print(f"cannot read {request.get('original_path') or path} as docx: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
