"""The example converters in examples/preprocessors/, run on real files, alone and through the pipeline."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import CodeGraderSpec
from evalstore.replay.grading.graders.base import GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.code import CodeGrader
from evalstore.replay.grading.preprocessing import prepare_answer
from evalstore.replay.recording import MemoryRecorder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "preprocessors"
SCRIPTS = EXAMPLES / "scripts"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def convert(script: str, path: Path, media_type: str = "x") -> subprocess.CompletedProcess[str]:
    stdin = json.dumps({"path": str(path), "original_path": path.name, "media_type": media_type})
    return subprocess.run(
        [sys.executable, str(SCRIPTS / script)], input=stdin, capture_output=True, text=True, timeout=30
    )


# -- xlsx ------------------------------------------------------------------------------------------------


def make_workbook(path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Revenue"
    sheet.append(["Quarter", "Revenue", "Closed", "Share", "Note"])
    sheet.append(["Q1", 42, dt.date(2024, 3, 31), 0.25, "on target"])
    sheet.append(["Q2", 1234.5, dt.datetime(2024, 6, 30, 14, 30), 0.125, "ahead, again"])
    sheet.append(["Q3", 1 / 3, dt.date(2024, 9, 30), 1, None])
    sheet["D2"].number_format = "0%"
    sheet["D3"].number_format = "0.00%"
    sheet["D4"].number_format = "0%"
    sheet["B3"].number_format = "#,##0.00"
    costs = book.create_sheet("Costs")
    costs.append(["Item", "Cost", "Approved"])
    costs.append(["Rent", 1200, True])
    costs.append(["Coffee", 0.001, False])
    book.save(path)


def test_xlsx_sheets_numbers_and_dates_read_as_a_spreadsheet_shows_them(tmp_path: Path) -> None:
    path = tmp_path / "report.xlsx"
    make_workbook(path)
    result = convert("xlsx_to_csv.py", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "# Sheet: Revenue\n"
        "Quarter,Revenue,Closed,Share,Note\n"
        "Q1,42,2024-03-31,25%,on target\n"
        'Q2,"1,234.50",2024-06-30 14:30:00,12.50%,"ahead, again"\n'
        "Q3,0.33333333333,2024-09-30,100%,\n"
        "\n"
        "# Sheet: Costs\n"
        "Item,Cost,Approved\n"
        "Rent,1200,TRUE\n"
        "Coffee,0.001,FALSE\n"
    )


SHARED_SHEET = """<?xml version="1.0" encoding="UTF-8"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>
<row r="1"><c r="A1" t="s"><v>0</v></c><c r="C1" t="s"><v>1</v></c></row>
<row r="3"><c r="A3" s="1"><v>45292</v></c><c r="B3" t="str"><f>A3+1</f><v>computed</v></c><c r="C3" t="e"><v>#DIV/0!</v></c></row>
</sheetData></worksheet>"""

SHARED_STRINGS = """<?xml version="1.0" encoding="UTF-8"?>
<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="2" uniqueCount="2">
<si><t>Region</t></si>
<si><r><rPr><b/></rPr><t>Rich </t></r><r><t>text</t></r><rPh><t>ignored</t></rPh></si>
</sst>"""

STYLES = """<?xml version="1.0" encoding="UTF-8"?>
<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">
<cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="14"/></cellXfs></styleSheet>"""

WORKBOOK = """<?xml version="1.0" encoding="UTF-8"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"
 xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">
<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>"""

WORKBOOK_RELS = """<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"
 Target="worksheets/sheet1.xml"/></Relationships>"""


def test_xlsx_shared_strings_rich_text_formulas_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "shared.xlsx"
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("xl/workbook.xml", WORKBOOK)
        book.writestr("xl/_rels/workbook.xml.rels", WORKBOOK_RELS)
        book.writestr("xl/worksheets/sheet1.xml", SHARED_SHEET)
        book.writestr("xl/sharedStrings.xml", SHARED_STRINGS)
        book.writestr("xl/styles.xml", STYLES)
    result = convert("xlsx_to_csv.py", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "# Sheet: Data\nRegion,,Rich text\n,,\n2024-01-01,computed,#DIV/0!\n"


def test_xlsx_converter_fails_cleanly_on_a_non_workbook(tmp_path: Path) -> None:
    path = tmp_path / "fake.xlsx"
    path.write_bytes(b"not a zip")
    result = convert("xlsx_to_csv.py", path)
    assert result.returncode == 1 and "cannot read fake.xlsx as xlsx" in result.stderr


# -- html ------------------------------------------------------------------------------------------------

HTML = """<!doctype html><html><head><title>T</title><style>p {color: red}</style>
<script>document.write("hidden")</script></head><body>
<h1>Quarterly   report</h1>
<p>Revenue grew <strong>12%</strong> in <em>Q1</em>. See <a href="https://example.com/r">the data</a>.<br>Next line.</p>
<ul><li>North: 42</li><li>South: <code>17</code></li></ul>
<ol><li>first</li><li>second</li></ol>
<table><tr><th>Region</th><th>Revenue</th></tr><tr><td>North</td><td>42</td></tr></table>
<blockquote><p>Quoted</p></blockquote>
<pre>def f():
    return 1</pre>
<img src="chart.png" alt="Chart"><!-- a comment -->
<p>Tom &amp; Jerry &lt;3</p>
</body></html>"""


def test_html_to_markdown(tmp_path: Path) -> None:
    path = tmp_path / "summary.html"
    path.write_text(HTML)
    result = convert("html_to_md.py", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "# Quarterly report\n\n"
        "Revenue grew **12%** in *Q1*. See [the data](https://example.com/r).\nNext line.\n\n"
        "- North: 42\n- South: `17`\n\n"
        "1. first\n2. second\n\n"
        "| Region | Revenue |\n|---|---|\n| North | 42 |\n\n"
        "> Quoted\n\n"
        "```\ndef f():\n    return 1\n```\n\n"
        "![Chart](chart.png)\n\n"
        "Tom & Jerry <3\n"
    )
    assert "hidden" not in result.stdout and "color" not in result.stdout


# -- docx ------------------------------------------------------------------------------------------------

DOCUMENT = """<?xml version="1.0" encoding="UTF-8"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Annual Report</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Revenue</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Revenue was </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>42</w:t></w:r>
<w:del><w:r><w:delText>41</w:delText></w:r></w:del><w:r><w:tab/><w:t>units</w:t><w:br/><w:t>second line</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>North</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>South</w:t></w:r></w:p>
<w:p/>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Total</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>North</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>42</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:sectPr/></w:body></w:document>"""


def make_docx(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as doc:
        doc.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        doc.writestr("word/document.xml", DOCUMENT)


def test_docx_to_text(tmp_path: Path) -> None:
    path = tmp_path / "report.docx"
    make_docx(path)
    result = convert("docx_to_text.py", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "# Annual Report\n\n## Revenue\n\nRevenue was 42\tunits\nsecond line\n\n- North\n- South\n\n"
        "Region | Total\nNorth | 42\n"
    )


def test_converters_reject_bad_stdin() -> None:
    for script in ("xlsx_to_csv.py", "html_to_md.py", "docx_to_text.py"):
        result = subprocess.run(
            [sys.executable, str(SCRIPTS / script)], input="not json", capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2 and '"path"' in result.stderr, script


# -- through the pipeline, configured by the example eval file ----------------------------------------------


@pytest.fixture
def example_suite():
    return load_eval(EXAMPLES / "evals" / "dataset.eval.yaml")


def test_example_eval_file_configures_suite_converters_and_an_override(example_suite) -> None:
    assert [c.type for c in example_suite.preprocessors] == ["xlsx", "html", "docx"]
    for converter in example_suite.preprocessors:
        assert Path(converter.command[-1]).is_file()
    code = next(g for g in example_suite.tests[0].graders if isinstance(g, CodeGraderSpec))
    own = {c.type: c.timeout for c in code.preprocessors}
    assert own == {"xlsx": 10.0, "html": 60.0, "docx": 30.0}


def test_example_converters_turn_a_file_answer_into_gradable_text(tmp_path: Path, example_suite) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_workbook(ws / "report.xlsx")
    (ws / "summary.html").write_text(HTML)
    make_docx(ws / "notes.docx")
    test = example_suite.tests[0]
    ctx = GradingContext(
        suite=example_suite,
        test=test,
        transcript=TranscriptInfo(
            messages=[
                Message(
                    role="assistant",
                    content=[
                        TextBlock(text="Done."),
                        FileBlock(media_type="xlsx", path="report.xlsx"),
                        FileBlock(media_type="text/html", path="summary.html"),
                        FileBlock(media_type=DOCX, path="notes.docx"),
                    ],
                )
            ],
            workspace_path=str(ws),
        ),
        recorder=MemoryRecorder(),
    )
    prepared = prepare_answer(ctx, list(example_suite.preprocessors))
    assert prepared.warnings == []
    assert "[[ file: report.xlsx ]]\n# Sheet: Revenue\nQuarter,Revenue,Closed,Share,Note" in prepared.text
    assert "[[ file: summary.html ]]\n# Quarterly report" in prepared.text
    assert "[[ file: notes.docx ]]\n# Annual Report" in prepared.text

    code = next(g for g in test.graders if isinstance(g, CodeGraderSpec))
    result = CodeGrader(code).grade(ctx)
    assert result.status == "ok", result.assertions
    assert result.score == 1.0
    assert [a.text for a in result.assertions] == [
        "Converted answer mentions Revenue",
        "report.xlsx is intact",
        "summary.html is intact",
        "notes.docx is intact",
    ]
