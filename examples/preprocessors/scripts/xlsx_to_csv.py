#!/usr/bin/env python3
"""Convert an .xlsx workbook to CSV text for graders: an evalstore/AgentV converter, standard library only.

Protocol: stdin is one JSON object ``{"path", "original_path", "media_type"}``; ``path`` is a private
copy of the file. The text goes to stdout; a problem goes to stderr with a non-zero exit.

Output: for each sheet, a ``# Sheet: <name>`` line, then the sheet as CSV. Cells read as a spreadsheet
shows them: shared and inline strings, booleans as TRUE/FALSE, error values as written, whole numbers
without ``.0``, fixed-decimal and percent formats applied, and date-formatted cells as ISO dates
(``2024-03-31``, or ``2024-03-31 14:30:00`` when the cell has a time). Formulas show their cached value.

Copy this into your project and adapt it (pick sheets, drop empty rows, emit JSON instead).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import zipfile
from datetime import datetime, timedelta
from xml.etree import ElementTree as ET

NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}
R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"

# Built-in number formats (ECMA-376 §18.8.30) that matter for display.
BUILTIN_FORMATS = {
    0: "General",
    1: "0",
    2: "0.00",
    3: "#,##0",
    4: "#,##0.00",
    9: "0%",
    10: "0.00%",
    11: "0.00E+00",
    12: "# ?/?",
    13: "# ??/??",
    14: "yyyy-mm-dd",
    15: "d-mmm-yy",
    16: "d-mmm",
    17: "mmm-yy",
    18: "h:mm AM/PM",
    19: "h:mm:ss AM/PM",
    20: "h:mm",
    21: "h:mm:ss",
    22: "yyyy-mm-dd h:mm",
    37: "#,##0 ;(#,##0)",
    38: "#,##0 ;[Red](#,##0)",
    39: "#,##0.00;(#,##0.00)",
    40: "#,##0.00;[Red](#,##0.00)",
    45: "mm:ss",
    46: "[h]:mm:ss",
    47: "mmss.0",
    48: "##0.0E+0",
    49: "@",
}


def main() -> int:
    try:
        request = json.load(sys.stdin)
        path = request["path"]
    except (ValueError, KeyError, TypeError):
        print('stdin must be a JSON object with a "path"', file=sys.stderr)
        return 2
    try:
        sys.stdout.write(convert(path))
    except (OSError, zipfile.BadZipFile, KeyError, ET.ParseError) as exc:
        print(f"cannot read {request.get('original_path') or path} as xlsx: {exc}", file=sys.stderr)
        return 1
    return 0


def convert(path: str) -> str:
    with zipfile.ZipFile(path) as book:
        strings = shared_strings(book)
        styles = cell_formats(book)
        date1904 = uses_1904_dates(book)
        blocks = []
        for name, sheet_path in sheets(book):
            rows = read_sheet(book, sheet_path, strings, styles, date1904)
            blocks.append(f"# Sheet: {name}\n{to_csv(rows)}".rstrip("\n"))
    return "\n\n".join(blocks) + "\n"


def sheets(book: zipfile.ZipFile) -> list[tuple[str, str]]:
    """(sheet name, part path) in workbook order."""
    workbook = ET.fromstring(book.read("xl/workbook.xml"))
    rels = ET.fromstring(book.read("xl/_rels/workbook.xml.rels"))
    targets = {rel.get("Id"): rel.get("Target", "") for rel in rels.findall("rel:Relationship", NS)}
    result = []
    for sheet in workbook.findall("m:sheets/m:sheet", NS):
        target = targets[sheet.get(R_ID)]
        part = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
        result.append((sheet.get("name", "Sheet"), part))
    return result


def shared_strings(book: zipfile.ZipFile) -> list[str]:
    if "xl/sharedStrings.xml" not in book.namelist():
        return []
    root = ET.fromstring(book.read("xl/sharedStrings.xml"))
    return [rich_text(si) for si in root.findall("m:si", NS)]


def rich_text(element: ET.Element) -> str:
    """The text of a string item: a plain ``<t>`` or rich-text runs (phonetic hints left out)."""
    plain = element.find("m:t", NS)
    parts = [plain.text or ""] if plain is not None else []
    parts.extend(t.text or "" for t in element.findall("m:r/m:t", NS))
    return "".join(parts)


def cell_formats(book: zipfile.ZipFile) -> list[str]:
    """The number format code of each cell style index (``s`` attribute)."""
    if "xl/styles.xml" not in book.namelist():
        return []
    root = ET.fromstring(book.read("xl/styles.xml"))
    custom = {
        int(fmt.get("numFmtId", "0")): fmt.get("formatCode", "General")
        for fmt in root.findall("m:numFmts/m:numFmt", NS)
    }
    codes = []
    for xf in root.findall("m:cellXfs/m:xf", NS):
        fmt_id = int(xf.get("numFmtId", "0"))
        codes.append(custom.get(fmt_id) or BUILTIN_FORMATS.get(fmt_id, "General"))
    return codes


def uses_1904_dates(book: zipfile.ZipFile) -> bool:
    workbook = ET.fromstring(book.read("xl/workbook.xml"))
    pr = workbook.find("m:workbookPr", NS)
    return pr is not None and pr.get("date1904", "0").lower() in ("1", "true")


def read_sheet(
    book: zipfile.ZipFile, part: str, strings: list[str], styles: list[str], date1904: bool
) -> list[list[str]]:
    root = ET.fromstring(book.read(part))
    grid: dict[int, dict[int, str]] = {}
    next_row = 1
    for row in root.findall("m:sheetData/m:row", NS):
        row_number = int(row.get("r", next_row))
        next_row = row_number + 1
        next_col = 1
        cells = grid.setdefault(row_number, {})
        for cell in row.findall("m:c", NS):
            ref = cell.get("r")
            col = column_number(ref) if ref else next_col
            next_col = col + 1
            value = cell_text(cell, strings, styles, date1904)
            if value != "":
                cells[col] = value
    if not any(grid.values()):
        return []
    last_row = max(r for r, cells in grid.items() if cells)
    width = max(max(cells) for cells in grid.values() if cells)
    return [[grid.get(r, {}).get(c, "") for c in range(1, width + 1)] for r in range(1, last_row + 1)]


def column_number(ref: str) -> int:
    letters = re.match(r"[A-Z]+", ref.upper())
    number = 0
    for ch in letters.group(0) if letters else "A":
        number = number * 26 + (ord(ch) - 64)
    return number


def cell_text(cell: ET.Element, strings: list[str], styles: list[str], date1904: bool) -> str:
    kind = cell.get("t", "n")
    value = cell.find("m:v", NS)
    raw = value.text if value is not None and value.text is not None else ""
    if kind == "s":
        return strings[int(raw)] if raw else ""
    if kind == "inlineStr":
        inline = cell.find("m:is", NS)
        return rich_text(inline) if inline is not None else ""
    if kind == "str" or kind == "e":
        return raw
    if kind == "b":
        return "TRUE" if raw == "1" else "FALSE"
    if raw == "":
        return ""
    style = int(cell.get("s", "0"))
    code = styles[style] if style < len(styles) else "General"
    return format_number(float(raw), code, date1904)


def format_number(number: float, code: str, date1904: bool) -> str:
    section = code.split(";")[0]
    if is_date_format(section):
        return format_date(number, section, date1904)
    plain = re.sub(r'"[^"]*"|\[[^\]]*\]|\\.|_.|\*.', "", section)
    if "%" in plain:
        return f"{fixed(number * 100, decimals(plain), ',' in plain)}%"
    if re.search(r"[0#?]", plain) and "E" not in plain.upper():
        return fixed(number, decimals(plain), "," in plain)
    return general(number)


def is_date_format(section: str) -> bool:
    """True when the format shows date or time parts (quoted text, colors and escapes ignored)."""
    stripped = re.sub(r'"[^"]*"|\\.|_.|\*.', "", section)
    stripped = re.sub(r"\[(?!h\]|hh\]|m\]|mm\]|s\]|ss\])[^\]]*\]", "", stripped, flags=re.IGNORECASE)
    return bool(re.search(r"[dmyhs]", stripped, re.IGNORECASE)) and not re.search(r"[0#?]", stripped)


def format_date(serial: float, section: str, date1904: bool) -> str:
    if date1904:
        moment = datetime(1904, 1, 1) + timedelta(days=serial)
    else:
        # Excel's 1900 system counts a fictitious 1900-02-29 (serial 60); 1899-12-30 as day 0 absorbs it
        # for every date from March 1900 on.
        moment = datetime(1899, 12, 30) + timedelta(days=serial)
    moment = _round_second(moment)
    has_date = bool(re.search(r"[dy]|m{3,}", section, re.IGNORECASE))
    has_time = bool(re.search(r"[hs]", section, re.IGNORECASE))
    if has_date and (not has_time or (moment.hour, moment.minute, moment.second) == (0, 0, 0)):
        return moment.date().isoformat()
    if not has_date:
        return moment.time().isoformat()
    return moment.isoformat(sep=" ")


def _round_second(moment: datetime) -> datetime:
    if moment.microsecond >= 500_000:
        moment += timedelta(seconds=1)
    return moment.replace(microsecond=0)


def decimals(plain: str) -> int:
    match = re.search(r"\.([0#?]+)", plain)
    return len(match.group(1)) if match else 0


def fixed(number: float, places: int, grouping: bool) -> str:
    return f"{number:,.{places}f}" if grouping else f"{number:.{places}f}"


def general(number: float) -> str:
    """As the General format shows a number: integers without a decimal point, else up to 11 digits."""
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    text = f"{number:.11g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}E{int(exponent):+03d}"
    return text


def to_csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    return out.getvalue()


if __name__ == "__main__":
    sys.exit(main())
