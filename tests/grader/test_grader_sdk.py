"""evalstore.grader, the Python code-grader SDK: real grader scripts run as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalstore.grader import CodeGraderInput, GraderError, Result, parse_input, to_protocol

PAYLOAD = {
    "input": [{"role": "user", "content": "What is 15 + 27?"}],
    "input_files": ["data/numbers.csv"],
    "criteria": "Correctly calculates 42",
    "output": "The answer is 42.",
    "answer": "The answer is 42.",
    "expected_output": [{"role": "assistant", "content": "42"}],
    "messages": [
        {"role": "user", "content": "What is 15 + 27?"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "The answer is 42."}],
            "tool_calls": [{"tool": "calc", "input": {"a": 15}}],
        },
    ],
    "trace": {"messages": [], "events": [{"tool": "calc"}], "metrics": {"duration_ms": 12}},
    "trace_summary": {"event_count": 1, "tool_calls": {"calc": 1}, "error_count": 0, "llm_call_count": 1},
    "token_usage": {"input": 10, "output": 5},
    "cost_usd": 0.001,
    "duration_ms": 1234,
    "start_time": "2026-01-01T00:00:00Z",
    "end_time": "2026-01-01T00:00:01Z",
    "file_changes": "diff --git a/x b/x",
    "workspace_path": "/tmp/ws",
    "metadata": {"team": "a"},
    "config": {"strict": True},
    "files": [{"path": "out.txt", "local_path": "/tmp/x/out.txt"}],
    "a_key_added_later": 7,
}


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "grade.py"
    path.write_text("from evalstore.grader import *\n\n" + textwrap.dedent(body), encoding="utf-8")
    return path


def _run(script: Path, stdin: str | dict) -> subprocess.CompletedProcess[str]:
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    return subprocess.run(
        [sys.executable, str(script)], input=text, capture_output=True, text=True, timeout=60, check=False
    )


def test_every_payload_field_is_typed() -> None:
    p = parse_input(PAYLOAD)
    assert p.input[0].role == "user" and p.input[0].text == "What is 15 + 27?"
    assert p.messages[1].text == "The answer is 42." and p.messages[1].tool_calls[0]["tool"] == "calc"
    assert p.expected_output[0].content == "42"
    assert p.output == p.answer == p.output_text == "The answer is 42."
    assert p.input_files == ["data/numbers.csv"] and p.criteria == "Correctly calculates 42"
    assert p.trace is not None and p.trace["events"] == [{"tool": "calc"}]
    assert p.trace_summary is not None and p.trace_summary.tool_calls == {"calc": 1}
    assert p.trace_summary.llm_call_count == 1
    assert p.token_usage == {"input": 10, "output": 5} and p.cost_usd == 0.001 and p.duration_ms == 1234.0
    assert (p.start_time, p.end_time) == ("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")
    assert p.file_changes == "diff --git a/x b/x" and p.workspace_path == "/tmp/ws"
    assert p.metadata == {"team": "a"} and p.config == {"strict": True}
    assert p.files[0]["local_path"] == "/tmp/x/out.txt"
    assert p.raw["a_key_added_later"] == 7
    # Every field of the dataclass is documented by a field of the same name in the wire payload.
    assert set(CodeGraderInput.__dataclass_fields__) - {"raw"} <= set(PAYLOAD) | {"output_path"}


def test_output_path_is_read_when_output_was_too_large(tmp_path: Path) -> None:
    (tmp_path / "output.json").write_text(json.dumps("a very long answer"), encoding="utf-8")
    p = parse_input({"output": None, "answer": None, "output_path": str(tmp_path / "output.json")})
    assert p.output is None and p.output_text == "a very long answer"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, {"score": 1.0, "assertions": []}),
        (False, {"score": 0.0, "assertions": []}),
        (0.25, {"score": 0.25, "assertions": []}),
        (7, {"score": 1.0, "assertions": []}),
        (
            {"assertions": [{"text": "a", "passed": True}, {"text": "b", "passed": False}]},
            {"score": 0.5, "assertions": [{"text": "a", "passed": True}, {"text": "b", "passed": False}]},
        ),
        (
            Result(score=0.9, details={"k": 1}),
            {"score": 0.9, "assertions": [], "details": {"k": 1}},
        ),
    ],
)
def test_return_values_become_the_protocol(value: object, expected: dict) -> None:
    assert to_protocol(value) == expected


@pytest.mark.parametrize("value", [None, "pass", float("nan"), {"score": "high"}, {"assertions": [{"passed": True}]}])
def test_unusable_return_values_are_refused(value: object) -> None:
    with pytest.raises(GraderError):
        to_protocol(value)


def test_a_decorated_script_reads_stdin_and_prints_the_protocol(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        @code_grader
        def grade(p: CodeGraderInput) -> Result:
            r = Result()
            r.check("answer has 42", "42" in p.output_text, evidence=p.criteria)
            r.check("one calc call", p.trace_summary.tool_calls.get("calc") == 1)
            r.check("workspace given", p.workspace_path == "/tmp/ws")
            return r
        """,
    )
    done = _run(script, PAYLOAD)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "score": 1.0,
        "assertions": [
            {"text": "answer has 42", "passed": True, "evidence": "Correctly calculates 42"},
            {"text": "one calc call", "passed": True},
            {"text": "workspace given", "passed": True},
        ],
    }
    done = _run(script, {**PAYLOAD, "output": "no", "workspace_path": None})
    assert json.loads(done.stdout)["score"] == pytest.approx(1 / 3)


def test_an_expected_output_of_content_segments_reads_as_its_text(tmp_path: Path) -> None:
    # An eval file's `expected_output: [{type: text, value: ...}]` reaches a code grader as AgentV sends it,
    # segments holding `value` (not a transcript block's `text`): the SDK reads both.
    from evalstore.replay.content import expected_messages

    expected = expected_messages([{"type": "text", "value": "42"}, {"type": "text", "value": "forty-two"}])
    assert expected == [
        {"role": "assistant", "content": [{"type": "text", "value": "42"}, {"type": "text", "value": "forty-two"}]}
    ]
    script = _script(
        tmp_path,
        """
        @code_grader
        def grade(p: CodeGraderInput) -> Result:
            r = Result()
            r.check(repr([m.text for m in p.expected_output]), p.expected_output[0].text == "42\\nforty-two")
            r.check(repr(p.messages[1].text), p.messages[1].text == "The answer is 42.")
            return r
        """,
    )
    done = _run(script, {**PAYLOAD, "expected_output": expected})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == 1.0, done.stdout


@pytest.mark.parametrize(("returned", "score"), [("True", 1.0), ("False", 0.0), ("0.3", 0.3)])
def test_bools_and_numbers_from_a_script(tmp_path: Path, returned: str, score: float) -> None:
    script = _script(tmp_path, f"@code_grader\ndef grade(p):\n    return {returned}\n")
    done = _run(script, PAYLOAD)
    assert done.returncode == 0 and json.loads(done.stdout) == {"score": score, "assertions": []}


def test_an_exception_is_a_clean_nonzero_exit_with_stderr(tmp_path: Path) -> None:
    script = _script(tmp_path, "@code_grader\ndef grade(p):\n    raise ValueError('no workspace to test')\n")
    done = _run(script, PAYLOAD)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == "code grader grade failed: ValueError: no workspace to test"
    assert "Traceback" not in done.stderr


def test_bad_stdin_is_a_clean_error(tmp_path: Path) -> None:
    script = _script(tmp_path, "@code_grader\ndef grade(p):\n    return 1\n")
    done = _run(script, "not json")
    assert done.returncode == 1 and "stdin is not JSON" in done.stderr and "Traceback" not in done.stderr
    done = _run(script, "[1, 2]")
    assert done.returncode == 1 and "must be a JSON object" in done.stderr


def test_imported_elsewhere_the_decorator_runs_nothing(tmp_path: Path) -> None:
    _script(tmp_path, "@code_grader\ndef grade(p):\n    return p.output == 'x'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import grade  # type: ignore[import-not-found]

        assert grade.grade.main(json.dumps({"output": "x"})) == {"score": 1.0, "assertions": []}
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("grade", None)


def test_importing_the_sdk_loads_neither_the_store_nor_sqlalchemy_nor_pydantic() -> None:
    code = (
        "import sys, evalstore.grader\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'pydantic', 'alembic', 'click')"
        " or m.startswith(('evalstore.store', 'evalstore.replay', 'evalstore.cli'))]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_target_client_is_none_without_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalstore.grader import target_client

    monkeypatch.delenv("AGENTV_TARGET_PROXY_URL", raising=False)
    monkeypatch.delenv("AGENTV_TARGET_PROXY_TOKEN", raising=False)
    assert target_client() is None
    monkeypatch.setenv("AGENTV_TARGET_PROXY_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("AGENTV_TARGET_PROXY_TOKEN", "t")
    client = target_client()
    assert client is not None and client.url == "http://127.0.0.1:9"
