"""A stand-in agent for the quickstart: answers in text and writes an .xlsx and an .html report.

AgentV's cli target protocol: reads the prompt from --prompt-file, writes its answer as JSON
``{"output": [messages]}`` to --output, with file blocks pointing at the files it wrote in its
working directory (the per-test workspace). Standard library only, so the quickstart needs nothing
but Python; the workbook is a minimal but real Office Open XML spreadsheet.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

REGIONS = {
    "Q1": [("North", 1200), ("South", 950), ("West", 730)],
    "Q2": [("North", 1310), ("South", 990), ("West", 805)],
    "Q3": [("North", 1275), ("South", 1010), ("West", 0)],
}


def write_xlsx(path: Path, rows: list[list[object]]) -> None:
    strings: list[str] = []

    def cell(ref: str, value: object) -> str:
        if isinstance(value, (int, float)):
            return f'<c r="{ref}"><v>{value}</v></c>'
        strings.append(str(value))
        return f'<c r="{ref}" t="s"><v>{len(strings) - 1}</v></c>'

    body = "".join(
        f'<row r="{r}">' + "".join(cell(f"{'ABCDEFGH'[c]}{r}", v) for c, v in enumerate(row)) + "</row>"
        for r, row in enumerate(rows, start=1)
    )
    sheet = (
        '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
        f'spreadsheetml/2006/main"><sheetData>{body}</sheetData></worksheet>'
    )
    shared = (
        '<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
        f'2006/main" count="{len(strings)}" uniqueCount="{len(strings)}">'
        + "".join(f"<si><t>{escape(s)}</t></si>" for s in strings)
        + "</sst>"
    )
    ns = "http://schemas.openxmlformats.org"
    files = {
        "[Content_Types].xml": (
            f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{ns}/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
            '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
            "</Types>"
        ),
        "_rels/.rels": (
            f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ns}/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{ns}/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>'
            "</Relationships>"
        ),
        "xl/workbook.xml": (
            f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{ns}/spreadsheetml/2006/main" '
            f'xmlns:r="{ns}/officeDocument/2006/relationships"><sheets>'
            '<sheet name="Revenue" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{ns}/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{ns}/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>'
            f'<Relationship Id="rId2" Type="{ns}/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'
            "</Relationships>"
        ),
        "xl/worksheets/sheet1.xml": sheet,
        "xl/sharedStrings.xml": shared,
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    # Files go into the per-test workspace, where evalstore captures them.
    os.chdir(os.environ.get("AGENTV_WORKSPACE_PATH", "."))
    prompt = Path(args.prompt_file).read_text(encoding="utf-8")
    match = re.search(r"\bQ[1-4]\b", prompt)
    quarter = match.group(0) if match else "Q1"
    rows = REGIONS.get(quarter, REGIONS["Q1"])
    total = sum(v for _, v in rows)
    write_xlsx(Path("revenue.xlsx"), [["Region", "Revenue"], *[[r, v] for r, v in rows], ["Total", total]])
    items = "".join(f"<tr><td>{r}</td><td>{v:,}</td></tr>" for r, v in rows)
    Path("summary.html").write_text(
        f"<html><body><h1>{quarter} revenue summary</h1><table><tr><th>Region</th><th>Revenue</th></tr>{items}</table>"
        f"<p>Total revenue: <b>{total:,}</b></p></body></html>",
        encoding="utf-8",
    )
    answer = {
        "output": [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"The {quarter} revenue report is ready: revenue.xlsx and summary.html."},
                    {
                        "type": "file",
                        "media_type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                        "path": "revenue.xlsx",
                    },
                    {"type": "file", "media_type": "text/html", "path": "summary.html"},
                ],
            }
        ]
    }
    Path(args.output).write_text(json.dumps(answer), encoding="utf-8")


if __name__ == "__main__":
    main()
