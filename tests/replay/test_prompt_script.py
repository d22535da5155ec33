"""Executable prompt templates (``prompt: {command: [...], config}``), as AgentV 4.42.4 runs them: parsed with
the script found through the search roots, run in the script's folder with the eval context on stdin, its
trimmed stdout the template; the execution recorded, and reused when its inputs are byte-identical."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_server import JudgeServer, freeform
from test_llm_grader import KEY_ENV, SECRET, calls, context, grade, make_pool, math_test

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import LlmGraderSpec
from evalstore.replay.grading.judge import JudgePool
from evalstore.replay.recording import MemoryRecorder

TEMPLATE_SCRIPT = """\
import json, os, sys
payload = json.load(sys.stdin)
with open(os.environ["TEMPLATE_LOG"], "a") as log:
    log.write(json.dumps({"cwd": os.getcwd(), "payload": payload}) + "\\n")
rubric = (payload["config"] or {}).get("rubric", "be right")
print("  Grade strictly ({}).\\n\\nQuestion: {{{{input}}}}\\nAnswer: {{{{output}}}}\\nExpected: {{{{expected_output}}}}\\n".format(rubric))
"""


@pytest.fixture
def pool(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgePool]:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with make_pool(judge_server) as p:
        yield p


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "prompts" / "grader.py"
    path.parent.mkdir()
    path.write_text(TEMPLATE_SCRIPT)
    monkeypatch.setenv("TEMPLATE_LOG", str(tmp_path / "template.log"))
    return path


def _log(tmp_path: Path) -> list[dict]:
    log = tmp_path / "template.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _spec(script: Path, config: dict | None = None) -> LlmGraderSpec:
    return LlmGraderSpec(name="custom", prompt_command=[sys.executable, str(script)], prompt_config=config)


def test_the_scripts_output_is_the_template_the_judge_gets(
    judge_server: JudgeServer, pool: JudgePool, script: Path, tmp_path: Path
) -> None:
    judge_server.script(freeform(0.9))
    recorder = MemoryRecorder()
    result = grade(context(math_test(_spec(script, {"rubric": "mentions 42"})), pool, recorder=recorder))
    assert (result.status, result.score) == ("ok", 0.9)
    assert judge_server.requests[0].user == (
        "Grade strictly (mentions 42).\n\nQuestion: What is 15 + 27?\nAnswer: The answer is 42.\nExpected: 42"
    )
    [ran] = _log(tmp_path)
    assert ran["cwd"] == str(script.parent)  # the script's own folder, as AgentV runs it
    payload = ran["payload"]
    assert list(payload) == [
        "criteria",
        "expected_output",
        "output",
        "answer",
        "messages",
        "input_files",
        "input",
        "metadata",
        "trace",
        "file_changes",
        "workspace_path",
        "config",
    ]
    assert payload["criteria"] == "Correctly adds the numbers"
    assert payload["output"] == payload["answer"] == "The answer is 42."
    assert payload["expected_output"] == [{"role": "assistant", "content": "42"}]
    assert payload["input"] == [{"role": "user", "content": "What is 15 + 27?"}]
    assert payload["config"] == {"rubric": "mentions 42"}
    assert payload["metadata"] is None and payload["file_changes"] is None

    (process_id, process), (judge_id, judge) = calls(recorder)
    assert (process.call, judge.call) == ("process", "judge")
    assert process.argv == [sys.executable, str(script)] and process.cwd == str(script.parent)
    assert process.script_sha256 is not None and process.outcome == "ok"
    assert json.loads(recorder.get_blob(process.request_sha256)) == payload
    assert result.grader_call_event_ids == [process_id, judge_id]


def test_an_unchanged_regrade_runs_neither_the_script_nor_the_judge(
    judge_server: JudgeServer, pool: JudgePool, script: Path, tmp_path: Path
) -> None:
    judge_server.script(freeform(0.9))
    recorder = MemoryRecorder()
    first = grade(context(math_test(_spec(script)), pool, recorder=recorder))
    second = grade(context(math_test(_spec(script)), pool, recorder=recorder))
    assert len(_log(tmp_path)) == 1 and len(judge_server.requests) == 1
    assert second.cache_hit and not first.cache_hit
    assert second.score == first.score
    recorded = [e for _, e in calls(recorder) if e.call == "process"]
    assert [e.cache_hit for e in recorded] == [False, True]

    script.write_text(TEMPLATE_SCRIPT.replace("Grade strictly", "Grade gently"))  # an edited script runs again
    third = grade(context(math_test(_spec(script)), pool, recorder=recorder))
    assert len(_log(tmp_path)) == 2 and len(judge_server.requests) == 2
    assert not third.cache_hit


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("import sys\nsys.stderr.write('boom')\nsys.exit(3)", "Code evaluator exited with code 3: boom"),
        ("print('   ')", "Prompt template produced empty output"),
    ],
)
def test_a_script_that_fails_fails_the_grader_and_asks_no_judge(
    judge_server: JudgeServer, pool: JudgePool, tmp_path: Path, body: str, error: str
) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(body)
    recorder = MemoryRecorder()
    result = grade(context(math_test(_spec(bad)), pool, recorder=recorder))
    assert (result.status, result.verdict) == ("execution_error", "skip")
    # AgentV's template that fails throws, and its grader scores 0: no execution error of AgentV's.
    assert result.scored_by_agentv
    assert result.assertions[0].text == f"grader 'custom': Prompt template execution failed: {error}"
    assert judge_server.requests == []
    [(call_id, call)] = calls(recorder)
    assert call.call == "process" and call.outcome == "error" and result.grader_call_event_ids == [call_id]


def test_the_eval_file_names_the_script_and_its_config(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write = tmp_path / "prompts" / "custom.ts"
    write.parent.mkdir()
    write.write_text("console.log('{{output}}')")
    evals = tmp_path / "evals"
    evals.mkdir()
    suite_file = evals / "suite.eval.yaml"
    suite_file.write_text(
        textwrap.dedent(
            """
            tests:
              - id: t
                input: hi
                criteria: c
                assertions:
                  - name: custom
                    type: llm-grader
                    prompt:
                      command: [bun, run, ../prompts/custom.ts]
                      config: {strictMode: true}
            """
        )
    )
    grader = load_eval(suite_file).tests[0].graders[0]
    assert isinstance(grader, LlmGraderSpec)
    assert grader.prompt_command == ["bun", "run", str(write)]
    assert grader.prompt_config == {"strictMode": True}
    assert ("grader_script", str(write), "../prompts/custom.ts") in load_eval(suite_file).referenced_files

    suite_file.write_text(suite_file.read_text().replace("custom.ts", "custom-grader.ts"))
    with pytest.raises(EvalFileError, match=r"prompt command file not found: \.\./prompts/custom-grader\.ts") as err:
        load_eval(suite_file)
    assert err.value.field == "tests[0].assertions[0].prompt.command"
