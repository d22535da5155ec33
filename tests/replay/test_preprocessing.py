"""The preprocessing pipeline: file blocks in the agent's answer become text graders can read."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from evalstore.replay.content import FileBlock, ImageBlock, Message, TextBlock
from evalstore.replay.evalfile.specs import AssertionSpec, CodeGraderSpec, ConverterSpec, EvalSuite, EvalTest
from evalstore.replay.grading.engine import grade_test
from evalstore.replay.grading.graders.base import GradeOptions, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.code import CodeGrader
from evalstore.replay.grading.graders.deterministic import AssertionGrader
from evalstore.replay.grading.preprocessing import BINARY_WITHOUT_CONVERTER, prepare_answer
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.codec import sha256_hex
from evalstore.store.events import PreprocessingRecorded

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def make_ctx(
    tmp_path: Path,
    content: str | list,
    *,
    recorder: MemoryRecorder | None = None,
    workspace: Path | None = None,
    suite_converters: list[ConverterSpec] | None = None,
    no_cache: bool = False,
    output_text: str | None = None,
    role: str = "assistant",
) -> GradingContext:
    suite = EvalSuite(path=str(tmp_path / "dataset.eval.yaml"), name="suite", preprocessors=suite_converters or [])
    ws = workspace if workspace is not None else tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return GradingContext(
        suite=suite,
        test=EvalTest(id="t1", input=[Message(role="user", content="make the report")]),
        transcript=TranscriptInfo(
            messages=[Message(role=role, content=content)], workspace_path=str(ws), output_text=output_text
        ),
        recorder=recorder or MemoryRecorder(),
        options=GradeOptions(no_cache=no_cache),
    )


def write_script(tmp_path: Path, name: str, body: str) -> Path:
    script = tmp_path / name
    script.write_text(textwrap.dedent(body))
    return script


def converter(script: Path, type_: str = "xlsx", media_type: str = XLSX, **limits) -> ConverterSpec:
    return ConverterSpec(type=type_, media_type=media_type, command=[sys.executable, str(script)], **limits)


def conversions(recorder: MemoryRecorder) -> list[PreprocessingRecorded]:
    return [e for _, e in recorder.events if isinstance(e, PreprocessingRecorded)]


# -- candidate text ------------------------------------------------------------------------------


def test_string_answer_is_used_as_is(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "  The answer is 42.\n")
    prepared = prepare_answer(ctx, [])
    assert prepared.text == "  The answer is 42.\n"  # untrimmed, as AgentV's candidate; {{output}} is trimmed
    assert prepared.warnings == [] and prepared.preprocessing_event_ids == []


def test_without_assistant_message_the_recorded_output_text_is_used(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "hello", role="user", output_text="imported answer\n")
    assert prepare_answer(ctx, []).text == "imported answer\n"


def test_text_files_are_read_as_utf8_and_images_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_bytes("line one\r\nline two – ünïcode\r\n".encode())
    ctx = make_ctx(
        tmp_path,
        [
            TextBlock(text="Here is the report:"),
            ImageBlock(media_type="image/png", source="data:image/png;base64,AAAA"),
            FileBlock(media_type="text/markdown", path="notes.md"),
        ],
        workspace=ws,
    )
    prepared = prepare_answer(ctx, [])
    assert prepared.text == "Here is the report:\n[[ file: notes.md ]]\nline one\nline two – ünïcode\n"
    (event,) = conversions(ctx.recorder)
    assert event.status == "read_as_text"
    assert event.artifact_sha256 == sha256_hex((ws / "notes.md").read_bytes())
    assert event.argv is None and event.converter_type is None
    # AgentV's default read: CRLF to LF, nothing trimmed.
    assert ctx.recorder.get_blob(event.output_sha256).decode() == "line one\nline two – ünïcode\n"
    assert prepared.preprocessing_event_ids == [ctx.recorder.events[0][0]]


def test_captured_bytes_come_from_the_blob_store_not_the_disk(tmp_path: Path) -> None:
    recorder = MemoryRecorder()
    digest = recorder.put_blob(b"captured,42\n")
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/csv", path="gone.csv", sha256=digest)], recorder=recorder)
    assert prepare_answer(ctx, []).text == "[[ file: gone.csv ]]\ncaptured,42\n"


@pytest.mark.parametrize("status", ["missing", "refused"])
def test_uncaptured_file_gives_a_warning_with_its_reason(tmp_path: Path, status: str) -> None:
    block = FileBlock(media_type="text/csv", path="big.csv", status=status, reason="over the size limit")
    ctx = make_ctx(tmp_path, [TextBlock(text="see file"), block])
    prepared = prepare_answer(ctx, [])
    line = f"[file preprocessing warning] big.csv (text/csv): file was {status} when captured: over the size limit"
    assert prepared.warnings == [line]
    assert prepared.text == f"see file\n{line}"
    assert conversions(ctx.recorder)[0].status == "not_evaluable"


# -- error paths: the block is skipped, a warning explains, the grade goes on ----------------------


def test_binary_file_without_converter_is_not_evaluable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "report.xlsx").write_bytes(b"PK\x03\x04\x00\x00binary")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="report.xlsx")], workspace=ws)
    prepared = prepare_answer(ctx, [])
    assert prepared.text == f"[file preprocessing warning] report.xlsx ({XLSX}): {BINARY_WITHOUT_CONVERTER}"
    assert conversions(ctx.recorder)[0].status == "not_evaluable"


def test_invalid_utf8_without_converter_is_not_evaluable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "latin1.txt").write_bytes("café".encode("latin-1"))
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/plain", path="latin1.txt")], workspace=ws)
    assert BINARY_WITHOUT_CONVERTER in prepare_answer(ctx, []).warnings[0]


def test_missing_file_gives_a_warning(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [TextBlock(text="done"), FileBlock(media_type="text/plain", path="nope.txt")])
    prepared = prepare_answer(ctx, [])
    assert prepared.text.startswith("done\n[file preprocessing warning] nope.txt (text/plain): file not found")


def test_special_files_in_the_workspace_are_not_read(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "adir").mkdir(parents=True)
    os.mkfifo(ws / "pipe")
    blocks = [FileBlock(media_type="text/plain", path="pipe"), FileBlock(media_type="text/plain", path="adir")]
    prepared = prepare_answer(make_ctx(tmp_path, blocks, workspace=ws), [])
    assert len(prepared.warnings) == 2
    assert all(w.endswith(("not a regular file: pipe", "not a regular file: adir")) for w in prepared.warnings)


def test_remote_path_is_not_fetched(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/plain", path="https://example.com/a.txt")])
    assert prepare_answer(ctx, []).warnings == [
        "[file preprocessing warning] https://example.com/a.txt (text/plain): remote file paths are not supported"
    ]


def test_converter_failure_reports_its_stderr(tmp_path: Path) -> None:
    script = write_script(tmp_path, "bad.py", "import sys\nsys.stderr.write('cannot parse sheet\\n')\nsys.exit(2)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    prepared = prepare_answer(ctx, [converter(script)])
    assert prepared.warnings == [f"[file preprocessing warning] r.xlsx ({XLSX}): cannot parse sheet"]
    (event,) = conversions(ctx.recorder)
    assert event.status == "failed" and event.stderr == "cannot parse sheet\n" and event.output_sha256 is None


def test_converter_failure_without_stderr_names_the_exit_code(tmp_path: Path) -> None:
    script = write_script(tmp_path, "bad.py", "import sys\nsys.exit(3)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    assert prepare_answer(ctx, [converter(script)]).warnings[0].endswith("preprocessor exited with code 3")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def test_hanging_converter_times_out_and_its_process_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = write_script(
        tmp_path,
        "hang.py",
        f"""
        import subprocess, sys, time
        child = subprocess.Popen(["sleep", "30"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(30)
        """,
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    started = time.monotonic()
    prepared = prepare_answer(ctx, [converter(script, timeout=1.0)])
    assert time.monotonic() - started < 10
    assert "converter timed out after 1 s" in prepared.warnings[0]
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the converter's grandchild outlived the timeout"
    assert conversions(ctx.recorder)[0].status == "failed"


def test_background_child_holding_stdout_does_not_hang_the_grade(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    script = write_script(
        tmp_path,
        "daemon.py",
        f"""
        import subprocess
        child = subprocess.Popen(["sleep", "30"])  # inherits our stdout and stderr
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("converted text")
        """,
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    started = time.monotonic()
    prepared = prepare_answer(ctx, [converter(script, timeout=20)])
    assert time.monotonic() - started < 10
    assert prepared.text == "[[ file: r.xlsx ]]\nconverted text"
    background = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(background)


def test_converter_output_over_the_cap_fails_the_conversion(tmp_path: Path) -> None:
    script = write_script(tmp_path, "flood.py", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    prepared = prepare_answer(ctx, [converter(script, max_output_bytes=100_000, timeout=20)])
    assert "converter output exceeded 100000 bytes" in prepared.warnings[0]
    assert "xxxx" not in prepared.text


def test_converter_that_cannot_start_is_a_warning(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws)
    spec = ConverterSpec(type="xlsx", media_type=XLSX, command=[str(tmp_path / "no-such-binary")])
    assert "cannot start" in prepare_answer(ctx, [spec]).warnings[0]


# -- the converter protocol ------------------------------------------------------------------------

ECHO_CONVERTER = """
import json, sys
request = json.load(sys.stdin)
data = open(request["path"], "rb").read()
print(json.dumps({"request": request, "size": len(data)}))
print("converted\\r\\nby echo  ")
"""


def test_converter_gets_a_private_copy_and_agentv_stdin(tmp_path: Path) -> None:
    script = write_script(tmp_path, "echo.py", ECHO_CONVERTER)
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "out" / "report.xlsx").write_bytes(b"PK\x03\x04 fake workbook")
    ctx = make_ctx(tmp_path, [FileBlock(media_type="XLSX", path="out/report.xlsx")], workspace=ws)
    prepared = prepare_answer(ctx, [converter(script)])
    header, first, *rest = prepared.text.split("\n")
    assert header == "[[ file: out/report.xlsx ]]"
    reply = json.loads(first)
    request = reply["request"]
    assert list(request) == ["path", "original_path", "media_type"]
    assert request["original_path"] == "out/report.xlsx" and request["media_type"] == "XLSX"
    assert Path(request["path"]).name == "report.xlsx"
    assert not Path(request["path"]).resolve().is_relative_to(ws.resolve())
    assert not Path(request["path"]).exists(), "the private copy is removed after the conversion"
    assert reply["size"] == len(b"PK\x03\x04 fake workbook")
    assert rest == ["converted\r", "by echo"]  # AgentV trims a converter's output and keeps its CRs
    (event,) = conversions(ctx.recorder)
    assert event.status == "converted"
    assert event.argv == [sys.executable, str(script)]
    assert event.script_sha256 == sha256_hex(script.read_bytes())
    assert event.converter_type == "xlsx"


def test_a_configured_converter_wins_over_the_utf8_read(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, "upper.py", "import json,sys\nr=json.load(sys.stdin)\nprint(open(r['path']).read().upper())\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "page.html").write_text("<p>hi</p>")
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/html", path="page.html")], workspace=ws)
    assert prepare_answer(ctx, []).text.endswith("<p>hi</p>")
    html = converter(script, type_="html", media_type="text/html")
    assert prepare_answer(ctx, [html]).text.endswith("<P>HI</P>")


# -- which converters: per grader override vs suite ------------------------------------------------


def test_per_grader_override_replaces_the_suite_converter(tmp_path: Path) -> None:
    suite_script = write_script(tmp_path, "suite.py", "print('from the suite converter')\n")
    own_script = write_script(tmp_path, "own.py", "print('from the grader override')\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    suite_conv = converter(suite_script)
    ctx = make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws, suite_converters=[suite_conv])
    # A deterministic assertion asking for converted text gets the suite's converters (merged at parse time).
    contains = AssertionSpec(name="c", type="contains", value="from the suite converter", preprocessors=[suite_conv])
    suite_result = AssertionGrader(contains).grade(ctx)
    assert suite_result.score == 1.0
    # A grader whose effective converters carry an override uses the override.
    echo = write_script(tmp_path, "grader.py", "import json,sys\nprint(json.load(sys.stdin)['output'])\n")
    spec = CodeGraderSpec(
        name="g", command=[sys.executable, str(echo)], cwd=str(tmp_path), preprocessors=[converter(own_script)]
    )
    result = CodeGrader(spec).grade(ctx)
    assert result.assertions[0].text == "[[ file: r.xlsx ]]\nfrom the grader override"


# -- reuse by fingerprint ----------------------------------------------------------------------------

COUNTING_CONVERTER = """
import json, sys
request = json.load(sys.stdin)
with open({counter!r}, "a") as counter:
    counter.write("run\\n")
print("rows: " + open(request["path"]).read())
"""


def test_same_fingerprint_reuses_the_recorded_conversion(tmp_path: Path) -> None:
    counter = tmp_path / "counter.txt"
    script = write_script(tmp_path, "count.py", COUNTING_CONVERTER.format(counter=str(counter)))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_text("q1,42")
    recorder = MemoryRecorder()
    block = [FileBlock(media_type=XLSX, path="r.xlsx")]

    first = prepare_answer(make_ctx(tmp_path, block, workspace=ws, recorder=recorder), [converter(script)])
    second = prepare_answer(make_ctx(tmp_path, block, workspace=ws, recorder=recorder), [converter(script)])

    assert counter.read_text() == "run\n", "the second grade must not run the converter"
    assert first.text == second.text == "[[ file: r.xlsx ]]\nrows: q1,42"
    original, reused = conversions(recorder)
    assert reused.reused_from == first.preprocessing_event_ids[0]
    assert second.preprocessing_event_ids[0] != first.preprocessing_event_ids[0]
    assert reused.output_sha256 == original.output_sha256 and reused.fingerprint == original.fingerprint
    assert reused.status == "converted"

    # --no-cache runs it again.
    prepare_answer(make_ctx(tmp_path, block, workspace=ws, recorder=recorder, no_cache=True), [converter(script)])
    assert counter.read_text() == "run\nrun\n"

    # A changed script is a different fingerprint: it runs.
    script.write_text(script.read_text() + "\n# changed\n")
    prepare_answer(make_ctx(tmp_path, block, workspace=ws, recorder=recorder), [converter(script)])
    assert counter.read_text() == "run\nrun\nrun\n"

    # Different bytes: a different fingerprint too.
    (ws / "r.xlsx").write_text("q1,43")
    again = prepare_answer(make_ctx(tmp_path, block, workspace=ws, recorder=recorder), [converter(script)])
    assert counter.read_text() == "run\nrun\nrun\nrun\n"
    assert again.text.endswith("q1,43")


PATH_PRINTING_CONVERTER = """
import json, os, sys
request = json.load(sys.stdin)
with open({counter!r}, "a") as counter:
    counter.write("run\\n")
print(json.dumps({{"source": request["original_path"], "name": os.path.basename(request["path"]),
                  "mode": os.environ.get("SHEET_MODE"), "rows": open(request["path"]).read()}}))
"""


def test_a_conversion_is_reused_only_for_what_the_converter_was_given(tmp_path: Path, monkeypatch) -> None:
    """Equal bytes under another path (or name, or environment) are another conversion when the converter
    sees the path: it writes it into its output, which a judge would then be shown for the wrong file."""
    counter = tmp_path / "counter.txt"
    script = write_script(tmp_path, "source.py", PATH_PRINTING_CONVERTER.format(counter=str(counter)))
    ws = tmp_path / "ws"
    (ws / "generated" / "override").mkdir(parents=True)
    (ws / "generated" / "preprocessed").mkdir(parents=True)
    for folder in ("override", "preprocessed"):
        (ws / "generated" / folder / "report.xlsx").write_text("q1,42")
    (ws / "generated" / "preprocessed" / "other.xlsx").write_text("q1,42")
    recorder = MemoryRecorder()

    def convert(path: str, **options) -> str:
        block = [FileBlock(media_type=XLSX, path=path)]
        ctx = make_ctx(tmp_path, block, workspace=ws, recorder=recorder, **options)
        return prepare_answer(ctx, [converter(script)]).text

    override = convert("generated/override/report.xlsx")
    preprocessed = convert("generated/preprocessed/report.xlsx")
    assert '"source": "generated/override/report.xlsx"' in override
    assert '"source": "generated/preprocessed/report.xlsx"' in preprocessed, "converted again for its own path"
    renamed = convert("generated/preprocessed/other.xlsx")
    assert '"name": "other.xlsx"' in renamed
    assert counter.read_text() == "run\n" * 3
    first, second, third = conversions(recorder)
    assert first.artifact_sha256 == second.artifact_sha256 == third.artifact_sha256
    assert len({first.fingerprint, second.fingerprint, third.fingerprint}) == 3
    assert not any(c.reused_from for c in (first, second, third))

    # The same path again is the same conversion: reused, not run.
    assert convert("generated/preprocessed/report.xlsx") == preprocessed
    assert counter.read_text() == "run\n" * 3 and conversions(recorder)[-1].reused_from is not None

    # The environment the converter sees is part of what it was given (a secret-looking variable is not).
    monkeypatch.setenv("SHEET_MODE", "strict")
    assert '"mode": "strict"' in convert("generated/preprocessed/report.xlsx")
    assert counter.read_text() == "run\n" * 4
    monkeypatch.setenv("SHEET_API_KEY", "sk-changes-nothing")
    convert("generated/preprocessed/report.xlsx")
    assert counter.read_text() == "run\n" * 4


def test_failed_conversions_are_not_reused(tmp_path: Path) -> None:
    counter = tmp_path / "counter.txt"
    script = write_script(
        tmp_path, "fail.py", f"import sys\nopen({str(counter)!r}, 'a').write('run\\n')\nsys.exit(1)\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK")
    recorder = MemoryRecorder()
    for _ in range(2):
        prepare_answer(
            make_ctx(tmp_path, [FileBlock(media_type=XLSX, path="r.xlsx")], workspace=ws, recorder=recorder),
            [converter(script)],
        )
    assert counter.read_text() == "run\nrun\n"


# -- the path-escape guard ----------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text("TOP SECRET")
    return secret


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "symlinked_dir", "file_url"])
def test_paths_outside_the_workspace_are_refused(tmp_path: Path, outside: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    if kind == "dotdot":
        path = "../outside.txt"
    elif kind == "absolute":
        path = str(outside)
    elif kind == "symlink":
        os.symlink(outside, ws / "link.txt")
        path = "link.txt"
    elif kind == "symlinked_dir":
        os.symlink(tmp_path, ws / "up")
        path = "up/outside.txt"
    else:
        path = outside.as_uri()
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/plain", path=path)], workspace=ws)
    prepared = prepare_answer(ctx, [])
    assert "TOP SECRET" not in prepared.text
    assert "is outside the workspace" in prepared.warnings[0]
    assert conversions(ctx.recorder)[0].status == "not_evaluable"


def test_absolute_path_and_symlink_inside_the_workspace_are_allowed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("alpha")
    os.symlink(ws / "sub" / "a.txt", ws / "alias.txt")
    blocks = [
        FileBlock(media_type="text/plain", path=str(ws / "sub" / "a.txt")),
        FileBlock(media_type="text/plain", path="alias.txt"),
        FileBlock(media_type="text/plain", path="sub/../sub/a.txt"),
    ]
    prepared = prepare_answer(make_ctx(tmp_path, blocks, workspace=ws), [])
    assert prepared.warnings == []
    assert prepared.text.count("alpha") == 3


def test_converter_copy_name_cannot_escape_the_private_dir(tmp_path: Path) -> None:
    """A captured block whose path is hostile still lands in our temp dir under a plain name."""
    script = write_script(tmp_path, "where.py", "import json,sys\nprint(json.load(sys.stdin)['path'])\n")
    recorder = MemoryRecorder()
    digest = recorder.put_blob(b"data")
    block = FileBlock(media_type=XLSX, path="../../../../etc/evil.xlsx", sha256=digest)
    prepared = prepare_answer(make_ctx(tmp_path, [block], recorder=recorder), [converter(script)])
    copy = Path(prepared.text.split("\n")[1])
    assert copy.name == "evil.xlsx"
    assert copy.parent.parent.name.startswith("evalstore-convert-")
    assert not Path("/etc/evil.xlsx").exists()


def test_a_scripts_digest_follows_every_change_to_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Digests are kept per path while the file's inode, size and times stay the same; an edit of the
    # same size, even with its modification time put back, must still give the new digest.
    from evalstore.replay.grading import preprocessing
    from evalstore.replay.grading.preprocessing import script_digest
    from evalstore.store.codec import sha256_hex

    monkeypatch.setattr(preprocessing, "_SETTLED_S", -1.0)  # keep every digest, however recent the file
    script = tmp_path / "grade.py"
    long_ago = time.time() - 60
    for body in ("print(1)\n", "print(2)\n", "print(3)\n"):
        time.sleep(0.02)  # past the file system clock's granularity: the edit gets a new change time
        script.write_text(body)
        os.utime(script, (long_ago, long_ago))
        assert script_digest(["python3", str(script)]) == sha256_hex(body.encode())
        assert script_digest(["python3", str(script)]) == sha256_hex(body.encode())
    monkeypatch.setattr(preprocessing, "_SETTLED_S", 2.0)
    time.sleep(0.02)
    script.write_text("print(4)\n")  # just written: not settled, so not kept
    assert script_digest(["python3", str(script)]) == sha256_hex(b"print(4)\n")
    assert preprocessing._digests[str(script)][1] == sha256_hex(b"print(3)\n")
    assert script_digest(["python3", str(tmp_path)]) is None and script_digest([]) is None


def test_a_database_failure_while_grading_is_not_recorded_as_a_verdict(tmp_path: Path) -> None:
    """A dropped connection while a grader reads a blob: the store failed, not the grader. grade_test
    raises and records nothing, so a resume grades the test again (it was once recorded as the grader's
    execution error, which left it out of the score and raised the test's score for good)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'gone.db'}")

    class Unreachable(MemoryRecorder):
        def get_blob(self, sha256: str) -> bytes:
            with engine.connect() as conn:  # a real driver error, as a lost server gives one
                conn.execute(text("SELECT data FROM blobs"))
            raise AssertionError("unreachable")

    recorder = Unreachable()
    digest = MemoryRecorder().put_blob(b"captured,42\n")
    ctx = make_ctx(tmp_path, [FileBlock(media_type="text/csv", path="gone.csv", sha256=digest)], recorder=recorder)
    test = EvalTest(
        id="t1",
        input=[Message(role="user", content="q")],
        # an assertion that reads the answer's files (its own converters): it reads the file's blob
        graders=[
            AssertionSpec(type="contains", name="has-42", value="42", preprocessors=[converter(tmp_path / "x.py")])
        ],
    )
    with pytest.raises(OperationalError):
        grade_test(ctx.suite, test, ctx.transcript, recorder)
    assert recorder.events == []
