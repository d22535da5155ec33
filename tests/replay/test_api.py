"""The Python API grades in-memory and stored transcripts against an eval file without writing anything."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalstore.replay.api import grade_stored, grade_transcript
from evalstore.replay.errors import NotFoundError
from evalstore.store.events import PreprocessingRecorded, VerdictRecorded

CONVERTER = Path(__file__).resolve().parents[2] / "examples" / "preprocessors" / "scripts" / "html_to_md.py"


def _suite(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "check.py").write_text(
        "import json, sys\np = json.load(sys.stdin)\nprint(1 if 'Total revenue' in p['output'] else 0)\n"
    )
    eval_file = tmp_path / "suite.eval.yaml"
    eval_file.write_text(
        textwrap.dedent(
            f"""
            name: api-suite
            preprocessors: &converters
              - type: html
                command: [python3, {CONVERTER}]
            tests:
              - id: t1
                input: Write the summary
                # both read the file as converted text: they ask for it with preprocessors of their own
                assertions:
                  - {{name: says-total, type: contains, value: "Total revenue", preprocessors: *converters}}
                  - {{name: check, type: code-grader, command: [python3, check.py], preprocessors: *converters}}
            """
        )
    )
    return eval_file


def test_grade_transcript_in_memory_with_a_workspace_file(tmp_path: Path) -> None:
    eval_file = _suite(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "summary.html").write_text("<p>Total revenue: <b>12</b></p>")
    grade = grade_transcript(
        eval_file,
        "t1",
        [{"role": "assistant", "content": [{"type": "file", "media_type": "text/html", "path": "summary.html"}]}],
        workspace=workspace,
    )
    assert grade.scored.score == 1.0 and grade.scored.passed
    assert [(v.grader, v.score) for _, v in grade.verdicts] == [("says-total", 1.0), ("check", 1.0)]
    conversions = grade.recorder.of_type(PreprocessingRecorded)
    assert conversions and conversions[0][1].status == "converted"


def test_grade_transcript_without_the_file_fails_the_checks(tmp_path: Path) -> None:
    eval_file = _suite(tmp_path)
    grade = grade_transcript(eval_file, "t1", [{"role": "assistant", "content": "no report"}])
    assert grade.scored.score == 0.0 and not grade.scored.passed


def test_unknown_test_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no test 'nope'"):
        grade_transcript(_suite(tmp_path), "nope", [])


def test_grade_stored_reads_artifact_bytes_from_the_store_and_writes_nothing(tmp_path: Path, sqlite_store) -> None:
    from evalstore.replay.content import Message
    from evalstore.replay.recording import StoreRecorder
    from evalstore.store.codec import canonical_json
    from evalstore.store.events import ArtifactStored, RunStarted, TranscriptRecorded

    eval_file = _suite(tmp_path)
    html = b"<p>Total revenue: <b>7</b></p>"
    rec = StoreRecorder(sqlite_store, "run-1")
    rec.record(RunStarted(run_id="run-1", kind="imported", tool_version="test"))
    digest = rec.put_blob(html)
    rec.record(
        ArtifactStored(test_id="t1", path="gone/summary.html", media_type="text/html", sha256=digest, size=len(html))
    )
    messages = [
        Message(
            role="assistant",
            content=[
                {
                    "type": "file",
                    "media_type": "text/html",
                    "path": "gone/summary.html",
                    "sha256": digest,
                    "status": "stored",
                }
            ],
        )
    ]
    blob = canonical_json([m.model_dump(mode="json", exclude_none=True) for m in messages]).encode()
    rec.record(TranscriptRecorded(test_id="t1", messages_sha256=rec.put_blob(blob)))
    rec.flush()
    before = sqlite_store.stream_version("run-1")

    grade = grade_stored(sqlite_store, "run-1", "t1", eval_file)

    assert grade.scored.score == 1.0
    assert all(isinstance(v, VerdictRecorded) for _, v in grade.verdicts)
    assert sqlite_store.stream_version("run-1") == before
