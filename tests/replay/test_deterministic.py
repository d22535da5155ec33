"""Deterministic assertions on the prepared answer text."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.evalfile.specs import AssertionSpec, ConverterSpec, EvalSuite, EvalTest
from evalstore.replay.grading.graders.base import GraderThrew, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.deterministic import AssertionGrader
from evalstore.replay.recording import MemoryRecorder


def make_ctx(tmp_path: Path, content: str | list, converters: list[ConverterSpec] | None = None) -> GradingContext:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return GradingContext(
        suite=EvalSuite(path=str(tmp_path / "e.eval.yaml"), name="s", preprocessors=converters or []),
        test=EvalTest(id="t", input=[]),
        transcript=TranscriptInfo(messages=[Message(role="assistant", content=content)], workspace_path=str(ws)),
        recorder=MemoryRecorder(),
    )


def grade(tmp_path: Path, type_: str, value: Any, output: str, flags: str | None = None):
    spec = AssertionSpec(name=type_, type=type_, value=value, flags=flags)
    return AssertionGrader(spec).grade(make_ctx(tmp_path, output))


ANSWER = "  The Answer is 42.\nSee report.csv  "


@pytest.mark.parametrize(
    ("type_", "value", "flags", "passed", "text"),
    [
        ("contains", "42", None, True, 'Output contains "42"'),
        ("contains", "43", None, False, 'Output does not contain "43"'),
        ("contains", "answer", None, False, 'Output does not contain "answer"'),
        ("icontains", "answer", None, True, 'Output contains "answer" (case-insensitive)'),
        ("icontains", "nope", None, False, 'Output does not contain "nope" (case-insensitive)'),
        ("contains-any", ["x", "42"], None, True, 'Output contains "42"'),
        ("contains-any", ["x", "y"], None, False, 'Output does not contain any of: "x", "y"'),
        ("contains-all", ["42", "report"], None, True, "Output contains all 2 expected strings"),
        ("contains-all", ["42", "x", "y"], None, False, 'Output missing: "x", "y"'),
        ("icontains-any", ["ANSWER"], None, True, 'Output contains "ANSWER" (case-insensitive)'),
        ("icontains-any", ["zz"], None, False, 'Output does not contain any of: "zz" (case-insensitive)'),
        ("icontains-all", ["THE", "REPORT"], None, True, "Output contains all 2 expected strings (case-insensitive)"),
        ("icontains-all", ["the", "zz"], None, False, 'Output missing (case-insensitive): "zz"'),
        ("starts-with", "The Answer", None, True, 'Output starts with "The Answer"'),
        ("starts-with", "Answer", None, False, 'Output does not start with "Answer"'),
        ("ends-with", "report.csv", None, True, 'Output ends with "report.csv"'),
        ("ends-with", "42.", None, False, 'Output does not end with "42."'),
        ("regex", r"\d+", None, True, r"Output matches pattern /\d+/"),
        ("regex", r"^the answer", None, False, r"Output does not match pattern /^the answer/"),
        # The answer is checked untrimmed, as AgentV checks its candidate: it starts with two spaces.
        ("regex", r"^the answer", "i", False, r"Output does not match pattern /^the answer/i (flags: i)"),
        ("regex", r"^\s*the answer", "i", True, r"Output matches pattern /^\s*the answer/i (flags: i)"),
        ("regex", r"^See", None, False, r"Output does not match pattern /^See/"),
        ("regex", r"^See", "m", True, r"Output matches pattern /^See/m (flags: m)"),
        ("regex", r"42\..See", None, False, r"Output does not match pattern /42\..See/"),
        ("regex", r"42\..See", "s", True, r"Output matches pattern /42\..See/s (flags: s)"),
        ("equals", "The Answer is 42.\nSee report.csv", None, True, f'Output equals "{ANSWER.strip()}"'),
        ("equals", "42", None, False, 'Output does not equal "42"'),
    ],
)
def test_assertions(tmp_path: Path, type_: str, value: Any, flags: str | None, passed: bool, text: str) -> None:
    result = grade(tmp_path, type_, value, ANSWER, flags)
    assert result.score == (1.0 if passed else 0.0)
    assert result.verdict == ("pass" if passed else "fail")
    assert [(a.text, a.passed) for a in result.assertions] == [(text, passed)]


@pytest.mark.parametrize(
    ("output", "passed"),
    [('{"a": [1, 2]}', True), ("[1]", True), ("42", True), ("{a: 1}", False), ("NaN", False), ("", False)],
)
def test_is_json(tmp_path: Path, output: str, passed: bool) -> None:
    result = grade(tmp_path, "is-json", None, output)
    assert result.score == (1.0 if passed else 0.0)
    assert result.assertions[0].text == ("Output is valid JSON" if passed else "Output is not valid JSON")


def test_single_value_for_a_list_assertion_is_one_item(tmp_path: Path) -> None:
    assert grade(tmp_path, "contains-any", "42", ANSWER).score == 1.0


@pytest.mark.parametrize(
    ("type_", "value", "flags", "message"),
    [
        ("regex", "(unclosed", None, "Invalid regular expression: /(unclosed/"),
        ("regex", "a", "q", "Invalid flags supplied to RegExp constructor 'q'"),
        ("contains", None, None, "needs a value"),
        ("contains-all", [], None, "needs a list of values"),
    ],
)
def test_a_misconfigured_assertion_throws_as_agentvs_does(
    tmp_path: Path, type_: str, value: Any, flags: str | None, message: str
) -> None:
    """AgentV's grader throws (``new RegExp`` refuses the pattern); its orchestrator then scores the grader
    0, a fail counted in the mean (engine.grader_threw), not an execution error."""
    with pytest.raises(GraderThrew, match=re.escape(message)):
        grade(tmp_path, type_, value, ANSWER, flags)


HTML_TO_TEXT = ConverterSpec(type="html", media_type="text/html", command=[sys.executable, "-c", "print(1)"])


def test_assertions_see_the_text_answer_as_in_agentv(tmp_path: Path) -> None:
    """AgentV checks the text blocks only: a file-only answer fails `contains`, whatever the file holds and
    whatever the suite's converters (they are the LLM graders'); no conversion is run."""
    conv = tmp_path / "conv.py"
    conv.write_text("print('Quarter,Revenue\\nQ1,42')\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK\x03\x04")
    xlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    converters = [ConverterSpec(type="xlsx", media_type=xlsx, command=[sys.executable, str(conv)])]
    ctx = make_ctx(tmp_path, [FileBlock(media_type=xlsx, path="r.xlsx")], converters)
    result = AssertionGrader(AssertionSpec(name="c", type="contains", value="Q1,42")).grade(ctx)
    assert (result.score, result.preprocessing_event_ids) == (0.0, [])
    assert result.assertions[0].text == 'Output does not contain "Q1,42"'


def test_an_assertion_with_its_own_preprocessors_sees_converted_files(tmp_path: Path) -> None:
    """The evalstore extension: `preprocessors:` on the assertion asks for the answer with its files converted."""
    conv = tmp_path / "conv.py"
    conv.write_text("print('Quarter,Revenue\\nQ1,42')\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK\x03\x04")
    xlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    converters = [ConverterSpec(type="xlsx", media_type=xlsx, command=[sys.executable, str(conv)])]
    ctx = make_ctx(tmp_path, [FileBlock(media_type=xlsx, path="r.xlsx")])
    spec = AssertionSpec(name="c", type="contains", value="Q1,42", preprocessors=converters)
    result = AssertionGrader(spec).grade(ctx)
    assert result.score == 1.0
    assert len(result.preprocessing_event_ids) == 1


def test_warnings_reach_the_evidence(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [TextBlock(text="ok"), FileBlock(media_type="text/plain", path="missing.txt")])
    spec = AssertionSpec(name="c", type="contains", value="ok", preprocessors=[HTML_TO_TEXT])
    result = AssertionGrader(spec).grade(ctx)
    assert result.score == 1.0
    assert result.evidence and "missing.txt" in result.evidence[0]
    # without preprocessors of its own the assertion reads the text only: no file, no warning
    assert AssertionGrader(AssertionSpec(name="c", type="contains", value="ok")).grade(ctx).evidence == []
