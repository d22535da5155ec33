"""Code graders: the stdin contract, the stdout protocol (JSON and plain text), limits and recording."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock, ToolCall
from evalstore.replay.evalfile.specs import CodeGraderSpec, ConverterSpec, EvalSuite, EvalTest
from evalstore.replay.grading.graders.base import GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.code import PLAIN_TEXT_DIFFERS, CodeGrader
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.codec import sha256_hex
from evalstore.store.events import GraderCalled

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def make_ctx(
    tmp_path: Path, content: str | list = "The answer is 42.", *, workspace: bool = True, **transcript
) -> GradingContext:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return GradingContext(
        suite=EvalSuite(path=str(tmp_path / "dataset.eval.yaml"), name="suite"),
        test=EvalTest(
            id="t1",
            input=[Message(role="user", content="What is 15 + 27?")],
            criteria="Correctly calculates 42",
            expected_output="42",
            metadata={"sourceRepo": "x", "Team": "y"},
        ),
        transcript=TranscriptInfo(
            messages=[Message(role="assistant", content=content)],
            workspace_path=str(ws) if workspace else None,
            **transcript,
        ),
        recorder=MemoryRecorder(),
    )


def script_spec(tmp_path: Path, body: str, **fields) -> CodeGraderSpec:
    script = tmp_path / "grader.py"
    script.write_text(textwrap.dedent(body))
    return CodeGraderSpec(
        name="check", command=[sys.executable, str(script)], script=str(script), cwd=str(tmp_path), **fields
    )


def run(tmp_path: Path, body: str, content: str | list = "The answer is 42.", **fields):
    ctx = make_ctx(tmp_path, content)
    return CodeGrader(script_spec(tmp_path, body, **fields)).grade(ctx), ctx


def printing(stdout: str, exit_code: int = 0, stderr: str = "") -> str:
    return f"import sys\nsys.stdout.write({stdout!r})\nsys.stderr.write({stderr!r})\nsys.exit({exit_code})\n"


# -- the plain-text fallback table -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "exit_code", "score", "text"),
    [
        ("", 0, 1.0, "exit 0"),
        ("true", 0, 1.0, "true"),
        ("pass\n", 0, 1.0, "pass"),
        ("PASS", 0, 1.0, "PASS"),
        ("1", 0, 1.0, "1"),
        ("false", 0, 0.0, "false"),
        ("fail", 0, 0.0, "fail"),
        ("0", 0, 0.0, "0"),
        ("0.25", 0, 0.25, "0.25"),
        ("1.7", 0, 1.0, "1.7"),
        ("-3", 0, 0.0, "-3"),
        ("All 3 checks passed", 0, 1.0, "All 3 checks passed"),
        ("[1, 2]", 0, 1.0, "[1, 2]"),
        ("wrong answer", 1, 0.0, "wrong answer"),
        ("", 4, 0.0, "exit 4"),
    ],
)
def test_plain_text_fallback(tmp_path: Path, stdout: str, exit_code: int, score: float, text: str) -> None:
    result, _ = run(tmp_path, printing(stdout, exit_code))
    assert result.status == "ok"
    assert result.score == pytest.approx(score)
    assert result.verdict == ("pass" if score >= 0.8 else "fail")
    assert [a.text for a in result.assertions] == [text]
    assert result.assertions[0].passed is (score >= 0.8)
    # Where AgentV reads it otherwise (exit 0 is 1.0 there, whatever was printed), the verdict says so.
    differs = exit_code == 0 and score != 1.0
    assert (PLAIN_TEXT_DIFFERS in result.evidence) is differs


def test_nonzero_exit_with_stderr_is_an_execution_error(tmp_path: Path) -> None:
    result, _ = run(tmp_path, printing("partial", 2, "Traceback: boom\nValueError: bad input\n"))
    assert (result.status, result.verdict, result.score) == ("execution_error", "skip", 0.0)
    assert result.assertions[0].text == "Code grader failed: exited with code 2"
    assert "ValueError: bad input" in result.assertions[0].evidence
    assert any("ValueError: bad input" in e for e in result.evidence)


def test_stderr_with_exit_zero_is_ignored(tmp_path: Path) -> None:
    result, _ = run(tmp_path, printing("ok", 0, "a warning"))
    assert (result.status, result.score) == ("ok", 1.0)


def test_the_verdict_is_at_0_8_whatever_min_score_says(tmp_path: Path) -> None:
    """AgentV's CodeGrader uses scoreToVerdict(score): min_score gates a required grader's test score only."""
    result, _ = run(tmp_path, printing("0.6"), min_score=0.5)
    assert (result.score, result.verdict) == (0.6, "fail")


@pytest.mark.parametrize("stdout", ['{"score": 1, "assertions": [{"text": "fine", "passed": true}]}', "[1]"])
def test_a_failed_process_is_not_read_for_a_reply(tmp_path: Path, stdout: str) -> None:
    """A non-zero exit with JSON on stdout (and no stderr) scores 0, as AgentV scores it."""
    result, _ = run(tmp_path, printing(stdout, 1))
    assert (result.status, result.score, result.verdict) == ("ok", 0.0, "fail")
    assert result.assertions[0].text == "Code evaluator failed: Code evaluator exited with code 1"


# -- the JSON protocol --------------------------------------------------------------------------------


def test_assertions_are_read_as_agentv_reads_them(tmp_path: Path) -> None:
    """Boolean(passed) in JavaScript: [] and {} are true, 0 and "" false; evidence only when a string.
    Without a score, the score is the share passed (AgentV gave 0.667 here where evalstore gave 0)."""
    items = [{"text": "a", "passed": []}, {"text": "b", "passed": {}}, {"text": "c", "passed": 0, "evidence": 42}]
    result, _ = run(tmp_path, printing(json.dumps({"assertions": items})))
    assert [(a.passed, a.evidence) for a in result.assertions] == [(True, None), (True, None), (False, None)]
    assert result.score == pytest.approx(2 / 3)


def test_json_protocol_score_assertions_and_details(tmp_path: Path) -> None:
    reply = {
        "score": 0.7,
        "assertions": [{"text": "has 42", "passed": True, "evidence": "found"}, {"text": "polite", "passed": 0}],
        "details": {"lines": 3},
    }
    result, _ = run(tmp_path, printing(json.dumps(reply)))
    assert (result.score, result.verdict, result.details) == (0.7, "fail", {"lines": 3})
    assert [(a.text, a.passed, a.evidence) for a in result.assertions] == [
        ("has 42", True, "found"),
        ("polite", False, None),
    ]


@pytest.mark.parametrize(("score", "expected"), [(3, 1.0), (-1, 0.0)])
def test_json_score_is_clamped(tmp_path: Path, score: float, expected: float) -> None:
    result, _ = run(tmp_path, printing(json.dumps({"score": score})))
    assert result.score == expected


def test_json_without_score_uses_the_pass_ratio(tmp_path: Path) -> None:
    reply = {"assertions": [{"text": "a", "passed": True}, {"text": "b", "passed": False}, {"no": "text"}]}
    result, _ = run(tmp_path, printing(json.dumps(reply)))
    assert result.score == 0.5 and len(result.assertions) == 2


def test_broken_json_is_an_execution_error(tmp_path: Path) -> None:
    result, _ = run(tmp_path, printing('{"score": 0.2'))
    assert result.status == "execution_error"
    assert "does not parse" in result.assertions[0].text


# -- limits ----------------------------------------------------------------------------------------------


def test_timeout_is_an_execution_error_naming_the_limit(tmp_path: Path) -> None:
    started = time.monotonic()
    result, ctx = run(tmp_path, "import time\ntime.sleep(30)\n", timeout=1.0)
    assert time.monotonic() - started < 10
    assert (result.status, result.verdict) == ("execution_error", "skip")
    assert "timed out after 1 s" in result.assertions[0].text
    (call,) = [e for _, e in ctx.recorder.events if isinstance(e, GraderCalled)]
    assert call.outcome == "timeout" and call.exit_code is None


def test_command_that_cannot_start_is_an_execution_error(tmp_path: Path) -> None:
    spec = CodeGraderSpec(name="g", command=[str(tmp_path / "missing-grader")], cwd=str(tmp_path))
    result = CodeGrader(spec).grade(make_ctx(tmp_path))
    assert result.status == "execution_error" and "cannot start" in result.assertions[0].text


# -- the stdin payload -----------------------------------------------------------------------------------

DUMP = """
import json, os, sys
payload = json.load(sys.stdin)
payload["_env_workspace"] = os.environ.get("AGENTV_WORKSPACE_PATH")
payload["_cwd"] = os.getcwd()
open("payload.json", "w").write(json.dumps(payload))
"""


def test_stdin_payload_follows_the_agentv_contract(tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        "The answer is 42.",
        token_usage={"input": 10, "output": 5},
        cost_usd=0.01,
        duration_ms=1200.0,
        file_changes="diff --git a/x b/x",
    )
    ctx.transcript.messages.insert(
        0, Message(role="assistant", content=None, tool_calls=[ToolCall(tool="Read", input={"filePath": "a"})])
    )
    CodeGrader(script_spec(tmp_path, DUMP, config={"maxLines": 3})).grade(ctx)
    payload = json.loads((tmp_path / "payload.json").read_text())
    assert payload["output"] == payload["answer"] == "The answer is 42."
    assert payload["criteria"] == "Correctly calculates 42"
    assert payload["input"] == [{"role": "user", "content": "What is 15 + 27?"}]
    assert payload["expected_output"] == [{"role": "assistant", "content": "42"}]
    assert payload["messages"][-1] == {"role": "assistant", "content": "The answer is 42."}
    # AgentV's Trace.messages: the input, then the agent's output (buildTraceMessages)
    assert payload["messages"][0] == {"role": "user", "content": "What is 15 + 27?"}
    assert payload["messages"][1]["tool_calls"][0]["input"] == {"file_path": "a"}
    assert payload["trace_summary"] == {
        "event_count": 1,
        "tool_calls": {"Read": 1},
        "error_count": 0,
        "llm_call_count": 2,
    }  # no tool_durations: AgentV leaves them out when no call has a duration
    assert payload["token_usage"] == {"input": 10, "output": 5}
    assert (payload["cost_usd"], payload["duration_ms"]) == (0.01, 1200.0)
    trace = payload["trace"]
    assert trace["messages"] == payload["messages"]
    assert [(e["event_id"], e["ordinal"], e["type"]) for e in trace["events"]] == [
        ("message-0", 0, "message"),
        ("message-1", 1, "message"),
        ("message-1-tool-0", 2, "tool_call"),
        ("message-2", 3, "message"),
        ("final-response", 4, "final_response"),
    ]
    assert trace["events"][2] == {
        "event_id": "message-1-tool-0",
        "parent_event_id": "message-1",
        "ordinal": 2,
        "type": "tool_call",
        "tool": {"name": "Read", "input": {"file_path": "a"}, "status": "ok"},
        "metadata": {"message_index": 1, "tool_index": 0},
    }
    assert trace["events"][4]["message"] == {"role": "assistant", "content": "The answer is 42."}
    assert {k: trace[k] for k in payload["trace_summary"]} == payload["trace_summary"]
    assert (trace["token_usage"], trace["cost_usd"], trace["duration_ms"]) == ({"input": 10, "output": 5}, 0.01, 1200.0)
    assert trace["metadata"] == {"eval_case_id": ctx.test.id}  # provenance, as AgentV's
    assert payload["file_changes"] == "diff --git a/x b/x"
    assert payload["workspace_path"] == str(tmp_path / "ws") == payload["_env_workspace"]
    assert payload["metadata"] == {"source_repo": "x", "Team": "y"}, "AgentV's deep snake_case rule"
    assert payload["config"] == {"max_lines": 3}
    assert payload["files"] == [] and "output_path" not in payload
    assert payload["_cwd"] == str(tmp_path)


def test_graders_of_one_test_share_a_payload_only_when_their_config_is_the_same(tmp_path: Path) -> None:
    # The stdin of a test's code graders is encoded once and shared; a grader with a config of its own
    # must still get that config, and one with the same config the same bytes.
    ctx = make_ctx(tmp_path, workspace=False)
    script = tmp_path / "grader.py"
    script.write_text("import sys\nprint(sys.stdin.read().count('max_lines'))\n")
    for name, config in (("a", {"maxLines": 3}), ("b", {"maxLines": 3}), ("c", None), ("d", {"maxLines": 4})):
        spec = CodeGraderSpec(
            name=name, command=[sys.executable, str(script)], script=str(script), cwd=str(tmp_path), config=config
        )
        CodeGrader(spec).grade(ctx)
    calls = {e.grader: e for _, e in ctx.recorder.of_type(GraderCalled)}
    stdin = {name: ctx.recorder.get_blob(call.request_sha256) for name, call in calls.items()}
    assert stdin["a"] == stdin["b"]
    assert json.loads(stdin["a"])["config"] == {"max_lines": 3}
    assert json.loads(stdin["c"])["config"] is None
    assert json.loads(stdin["d"])["config"] == {"max_lines": 4}


def test_no_workspace_means_no_workspace_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTV_WORKSPACE_PATH", "/leaked/from/parent")
    ctx = make_ctx(tmp_path, workspace=False)
    CodeGrader(script_spec(tmp_path, DUMP)).grade(ctx)
    payload = json.loads((tmp_path / "payload.json").read_text())
    assert payload["workspace_path"] is None and payload["_env_workspace"] is None


def test_large_answer_goes_to_output_path(tmp_path: Path) -> None:
    big = "x" * 60_000
    body = """
    import json, sys
    payload = json.load(sys.stdin)
    text = json.load(open(payload["output_path"]))
    print(json.dumps({"score": 1 if payload["output"] is None and len(text) == 60000 else 0}))
    """
    result, _ = run(tmp_path, body, content=big)
    assert result.score == 1.0


def test_grader_output_is_the_prepared_answer(tmp_path: Path) -> None:
    conv = tmp_path / "conv.py"
    conv.write_text("print('Q1,42')\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "r.xlsx").write_bytes(b"PK\x03\x04")
    ctx = make_ctx(tmp_path, [TextBlock(text="see attached"), FileBlock(media_type=XLSX, path="r.xlsx")])
    spec = script_spec(
        tmp_path,
        "import json,sys\nprint(json.load(sys.stdin)['output'])\n",
        preprocessors=[ConverterSpec(type="xlsx", media_type=XLSX, command=[sys.executable, str(conv)])],
    )
    result = CodeGrader(spec).grade(ctx)
    assert result.assertions[0].text == "see attached\n[[ file: r.xlsx ]]\nQ1,42"
    assert len(result.preprocessing_event_ids) == 1


# -- materialized raw files ------------------------------------------------------------------------------

CHECK_FILES = """
import hashlib, json, sys
payload = json.load(sys.stdin)
assertions = []
for entry in payload["files"]:
    if entry["path"] is None:
        assertions.append({"text": entry["original_path"] + ": " + entry["error"], "passed": False})
        continue
    data = open(entry["path"], "rb").read()
    name = entry["original_path"].split("/")[-1]
    ok = hashlib.sha256(data).hexdigest() == entry["sha256"] and entry["path"].endswith(name)
    text = entry["original_path"] + " " + entry["media_type"]
    assertions.append({"text": text, "passed": ok, "evidence": entry["path"]})
print(json.dumps({"assertions": assertions}))
"""


def test_code_grader_gets_raw_files_it_can_verify(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    raw = bytes(range(256)) * 4
    (ws / "out" / "report.xlsx").write_bytes(raw)
    ctx = make_ctx(
        tmp_path,
        [
            TextBlock(text="done"),
            FileBlock(media_type=XLSX, path="out/report.xlsx"),
            FileBlock(media_type="text/plain", path="../escape.txt"),
        ],
    )
    captured = ctx.recorder.put_blob(b"captured bytes")
    ctx.transcript.messages.insert(
        0, Message(role="assistant", content=[FileBlock(media_type="text/csv", path="early.csv", sha256=captured)])
    )
    result = CodeGrader(script_spec(tmp_path, CHECK_FILES)).grade(ctx)
    texts = [(a.text, a.passed) for a in result.assertions]
    assert texts[0] == ("early.csv text/csv", True)
    assert texts[1] == (f"out/report.xlsx {XLSX}", True)
    assert texts[2][0].startswith("../escape.txt: file path '../escape.txt' is outside the workspace")
    assert not texts[2][1]
    copy = Path(result.assertions[1].evidence)
    assert not copy.exists(), "the private temp dir is removed after grading"
    assert not copy.resolve().is_relative_to(ws.resolve())
    # The grader reads the text answer and the raw files, as in AgentV: nothing was converted.
    assert result.evidence == [] and result.preprocessing_event_ids == []


# -- recording ---------------------------------------------------------------------------------------------


def test_grader_call_is_recorded_with_its_blobs(tmp_path: Path) -> None:
    result, ctx = run(tmp_path, printing("fine", 0, "note on stderr"))
    ((call_id, call),) = [(i, e) for i, e in ctx.recorder.events if isinstance(e, GraderCalled)]
    assert result.grader_call_event_ids == [call_id]
    assert call.call == "process" and call.grader == "check" and call.grader_type == "code-grader"
    assert call.argv == [sys.executable, str(tmp_path / "grader.py")]
    assert call.script_sha256 == hashlib.sha256((tmp_path / "grader.py").read_bytes()).hexdigest()
    stdin = json.loads(ctx.recorder.get_blob(call.request_sha256))
    assert stdin["output"] == "The answer is 42."
    assert ctx.recorder.get_blob(call.reply_sha256) == b"fine"
    assert ctx.recorder.get_blob(call.stderr_sha256) == b"note on stderr"
    assert call.exit_code == 0 and call.outcome == "ok" and call.latency_ms > 0
    assert call.request_sha256 == sha256_hex(ctx.recorder.get_blob(call.request_sha256))


def test_stdin_writes_integral_floats_as_javascript_does(tmp_path: Path) -> None:
    """JSON.stringify writes 1200, not Python's 1200.0 (a duration recorded as a float)."""
    ctx = make_ctx(tmp_path, "The answer is 42.", duration_ms=1200.0, cost_usd=0.5)
    raw = "import sys\nopen('stdin.json', 'w').write(sys.stdin.read())\nprint('1')\n"
    CodeGrader(script_spec(tmp_path, raw, config={"threshold": 1.0})).grade(ctx)
    text = (tmp_path / "stdin.json").read_text()
    assert '"duration_ms": 1200,' in text and '"threshold": 1' in text and '"cost_usd": 0.5,' in text
    assert "1200.0" not in text


def test_the_trace_summary_counts_the_agents_output_not_the_input_history(tmp_path: Path) -> None:
    """An AgentV transcript.jsonl starts with the test's input; computeTraceSummary sees only the output."""
    ctx = make_ctx(tmp_path, "The answer is 42.")
    ctx.test.input[:] = [
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello"),
        Message(role="user", content="What is 15 + 27?"),
    ]
    ctx.transcript.messages[:0] = [m.model_copy() for m in ctx.test.input]
    CodeGrader(script_spec(tmp_path, DUMP)).grade(ctx)
    payload = json.loads((tmp_path / "payload.json").read_text())
    assert payload["trace_summary"]["llm_call_count"] == 1  # the history's assistant turn is not the agent's
    assert len(payload["messages"]) == 4  # the messages are the whole transcript still


# -- what a reply may hold that the store cannot, or must not -------------------------------------------


def test_a_lone_surrogate_in_a_reply_is_replaced_not_a_stopped_run(tmp_path: Path) -> None:
    """``"\\ud800"`` parses to a string UTF-8 cannot encode: storing it stopped the whole run (exit 3)."""
    reply = '{"score": 1, "details": {"x": "a\\ud800b"}, "assertions": [{"text": "t\\udfff", "passed": true}]}'
    result, _ = run(tmp_path, printing(reply))
    assert result.status == "ok" and result.details == {"x": "a\ufffdb"}
    assert [a.text for a in result.assertions] == ["t\ufffd"]
    json.dumps(result.details, ensure_ascii=False).encode("utf-8")  # what the store does with it


def test_a_secret_the_grader_echoes_is_stored_as_its_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its environment holds the user's keys: whatever it prints of them, in its reply or on stderr."""
    key = 'sk-canary-"quoted"-é-4f0e2b71c9'
    monkeypatch.setenv("CANARY_API_KEY", key)
    monkeypatch.setenv("CANARY_GREETING", "hello-world-not-secret")
    body = """\
        import json, os, sys
        key = os.environ["CANARY_API_KEY"]
        sys.stderr.write("debug " + key + " " + os.environ["CANARY_GREETING"])
        print(json.dumps({"score": 1, "details": {"k": key}, "assertions": [{"text": "key " + key, "passed": True,
              "evidence": key}]}))
        sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
    """
    result, ctx = run(tmp_path, body)
    assert result.details == {"k": "${{ CANARY_API_KEY }}"}
    assert [(a.text, a.evidence) for a in result.assertions] == [("key ${{ CANARY_API_KEY }}", "${{ CANARY_API_KEY }}")]
    stored = b"\n".join(ctx.recorder.blobs.values())
    assert key.encode() not in stored and json.dumps(key)[1:-1].encode() not in stored
    assert b"${{ CANARY_API_KEY }}" in stored and b"hello-world-not-secret" in stored  # stderr, its other text kept


# -- what AgentV makes of a code grader that could not grade -----------------------------------------------


def test_a_test_whose_graders_agentv_scores_0_is_no_execution_error_of_agentvs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV's code grader scores every failure 0 (`fail`) and a grader that throws scores 0 as well, so such a
    test is AgentV's `quality_failure`: evalstore's `execution_error` is labelled `quality_failure_in_agentv`
    (stops no dependent, counts for no `fail_on_error`), alone, in a composite, or carried by a replay."""
    from evalstore.replay import failures
    from evalstore.replay.evalfile.specs import AggregatorSpec, AssertionSpec, CompositeSpec
    from evalstore.replay.grading.engine import grade_test
    from evalstore.replay.grading.graders.deterministic import AssertionGrader

    crash = script_spec(tmp_path, printing("", 1, "Traceback: KeyError"))
    broken = AssertionSpec(name="broken", type="contains", value="42")
    monkeypatch.setattr(AssertionGrader, "grade", lambda self, ctx: 1 / 0)
    composite = CompositeSpec(
        name="both",
        assertions=[crash.model_copy(update={"name": "member"})],
        aggregator=AggregatorSpec(type="weighted_average"),
    )
    ctx = make_ctx(tmp_path)

    def graded(*graders, carried=None):  # type: ignore[no-untyped-def]
        test = ctx.test.model_copy(update={"graders": list(graders)})
        return grade_test(ctx.suite, test, ctx.transcript, MemoryRecorder(), carried=carried, only=[])

    for graders in ([crash], [broken], [composite], [crash, broken, composite]):
        done = graded(*graders)
        assert done.scored.status == "execution_error", graders
        assert done.scored.row_fields == failures.GRADER_SCORED, graders
        assert not failures.agentv_execution_error(done.scored.status, done.scored.row_fields)

    # A replay carrying the crashed grader's verdict says the same.
    (verdict,) = graded(crash).verdicts
    carried = graded(crash, carried={"check": verdict})
    assert carried.verdicts[0][1].origin == "carried" and carried.scored.row_fields == failures.GRADER_SCORED
