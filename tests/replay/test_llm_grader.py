"""The LLM grader against the scripted judge server: prompts byte for byte, modes, retries, parse
repair, the judge cache, and the API key's path."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from judge_server import (
    JudgeServer,
    Reply,
    Request,
    freeform,
    hang,
    malformed_body,
    rate_limited,
    rubric,
    score_ranges,
    server_error,
)

from evalstore.replay.content import Message, ToolCall
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, LlmGraderSpec, RubricItem
from evalstore.replay.grading.engine import grade_graders
from evalstore.replay.grading.graders.base import GradeOptions, GraderResult, GradingContext, TranscriptInfo
from evalstore.replay.grading.graders.llm import LlmGrader
from evalstore.replay.grading.judge import JudgePool, JudgeTarget, RetryPolicy
from evalstore.replay.grading.judge.calls import cache_key
from evalstore.replay.grading.judge.modes import FREEFORM_SCHEMA, RUBRIC_SYSTEM, SCORE_RANGE_SYSTEM
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.events import GraderCalled, encode

KEY_ENV = "EVALSTORE_TEST_JUDGE_KEY"
SECRET = "sk-test-6f1c0b9e2d7a4c55"

PERSONA = """\
You are an expert grader. Your goal is to grade the answer based on how well it achieves the criteria for the \
original task.

Use the reference_answer as a gold standard for a high-quality response (if provided). The reference_answer \
may be a simple text response, or it may contain a sequence of expected agent messages including tool calls. \
When it contains multiple messages, the last message represents the final expected answer. The answer does \
not need to match it verbatim, but should capture the key points and follow the same spirit.

Be concise and focused in your evaluation. Provide succinct, specific feedback rather than verbose explanations.
"""


def make_pool(server: JudgeServer, *, timeout: float = 2.0, concurrency: int = 8, **extra: Any) -> JudgePool:
    targets = {
        name: JudgeTarget(
            name=name,
            provider="openai-compatible",
            base_url=server.base_url,
            model=f"{name}-model",
            api_key_env=KEY_ENV,
            temperature=0.0,
            max_tokens=512,
            timeout=timeout,
            **extra,
        )
        for name in ("judge", "strict")
    }
    return JudgePool(targets, default="judge", concurrency=concurrency, retry=RetryPolicy(max_retries=2, backoff=0.01))


@pytest.fixture
def pool(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgePool]:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with make_pool(judge_server) as p:
        yield p


def math_test(spec: LlmGraderSpec | None = None, **fields: Any) -> EvalTest:
    spec = spec or LlmGraderSpec(name="llm-grader")
    values: dict[str, Any] = {
        "id": "add",
        "input": [Message(role="user", content="What is 15 + 27?")],
        "expected_output": [{"role": "assistant", "content": "42"}],
        "criteria": "Correctly adds the numbers",
        "graders": [spec],
    }
    values.update(fields)
    return EvalTest(**values)


def context(
    test: EvalTest,
    pool: JudgePool | None,
    *,
    recorder: MemoryRecorder | None = None,
    answer: str = "The answer is 42.",
    options: GradeOptions | None = None,
    tool_calls: list[ToolCall] | None = None,
    file_changes: str | None = None,
) -> GradingContext:
    suite = EvalSuite(path="/evals/math.eval.yaml", name="math", tests=[test])
    transcript = TranscriptInfo(
        messages=[Message(role="assistant", content=answer, tool_calls=tool_calls)], file_changes=file_changes
    )
    return GradingContext(
        suite=suite,
        test=test,
        transcript=transcript,
        recorder=recorder or MemoryRecorder(),
        target="agent",
        options=options or GradeOptions(),
        judges=pool,
    )


def grade(ctx: GradingContext) -> GraderResult:
    spec = ctx.test.graders[0]
    assert isinstance(spec, LlmGraderSpec)
    return LlmGrader(spec).grade(ctx)


def calls(recorder: MemoryRecorder) -> list[tuple[str, GraderCalled]]:
    return [(i, e) for i, e in recorder.events if isinstance(e, GraderCalled)]


# -- prompts --------------------------------------------------------------------------------------


def test_default_template_is_rendered_byte_for_byte(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(freeform(0.9, [("adds correctly", True)]))
    ctx = context(
        math_test(),
        pool,
        tool_calls=[ToolCall(tool="Bash", input={"command": "python -c 'print(15 + 27)'"})],
        file_changes="--- a/sum.txt\n+++ b/sum.txt\n+42",
    )
    result = grade(ctx)

    (request,) = judge_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "judge-model"
    assert request.body["temperature"] == 0.0 and request.body["max_tokens"] == 512
    assert request.system == FREEFORM_SCHEMA
    assert request.user == (
        PERSONA
        + """
[[ ## criteria ## ]]
Correctly adds the numbers

[[ ## question ## ]]
What is 15 + 27?

[[ ## reference_answer ## ]]
42

[[ ## answer ## ]]
The answer is 42.

[[ ## file_changes ## ]]
--- a/sum.txt
+++ b/sum.txt
+42

[[ ## tool_calls ## ]]
- Bash: python -c 'print(15 + 27)'"""
    )
    assert (result.status, result.verdict, result.score) == ("ok", "pass", 0.9)
    assert result.grader_target == "judge"


def test_bare_inline_prompt_is_criteria_inside_the_default_template(judge_server: JudgeServer, pool: JudgePool):
    grade(context(math_test(LlmGraderSpec(name="polite", prompt="Is the answer polite?")), pool))
    user = judge_server.requests[0].user
    assert user.startswith(PERSONA)
    assert "[[ ## criteria ## ]]\nIs the answer polite?\n\n[[ ## question ## ]]\nWhat is 15 + 27?" in user


PROMPT_FILE = """\
Q: {{ input }}
A: {{output}}
REF: {{ expected_output }}
CRIT: {{criteria}}
META: {{ metadata }}
METAJ: {{metadata_json}}
RUB: {{ rubrics }}
RUBJ: {{rubrics_json}}
FC: {{file_changes}}
TC: {{ tool_calls }}
UNKNOWN: {{ reviewer }} {{reviewer}}"""

DEXTER_EVAL = """\
name: dexter
metadata:
  source_repo: https://github.com/virattt/dexter
  tags: [finance]
tests:
  - id: apple-finance
    criteria: Answers from the provided data
    input:
      company: Apple
      ticker: AAPL
    expected_output: AAPL closed at 100.
    metadata:
      tags: [apple]
      difficulty: easy
    assertions:
      - type: llm-grader
        prompt: file://prompts/dexter-grader.md
        rubrics:
          - operator: correctness
            criteria: Uses the provided ticker.
          - operator: contradiction
            criteria: Does not contradict the source data.
            weight: 2
"""


def test_prompt_file_gets_every_variable_with_suite_metadata_object_input_and_rubric_alias(
    judge_server: JudgeServer, pool: JudgePool, tmp_path: Path
):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "dexter-grader.md").write_text(PROMPT_FILE, encoding="utf-8")
    (tmp_path / "dexter.eval.yaml").write_text(DEXTER_EVAL, encoding="utf-8")
    suite = load_eval(tmp_path / "dexter.eval.yaml")
    test = suite.tests[0]
    spec = test.graders[0]
    assert isinstance(spec, LlmGraderSpec) and spec.prompt_file
    judge_server.script(rubric({"rubric-1": True, "rubric-2": True}))
    ctx = GradingContext(
        suite=suite,
        test=test,
        transcript=TranscriptInfo(
            messages=[
                Message(
                    role="assistant",
                    content="Reading data",
                    tool_calls=[ToolCall(tool="Read", input={"file_path": "data/aapl.csv"})],
                ),
                Message(role="assistant", content="  Apple (AAPL) closed at 100.  "),
            ],
            file_changes="+ notes.md",
        ),
        recorder=MemoryRecorder(),
        target="agent",
        judges=pool,
    )
    result = LlmGrader(spec).grade(ctx)

    (request,) = judge_server.requests
    assert request.system == RUBRIC_SYSTEM  # as AgentV: a custom template gets the same system prompt
    assert (
        request.user
        == """\
Q: {
  "company": "Apple",
  "ticker": "AAPL"
}
A: Apple (AAPL) closed at 100.
REF: AAPL closed at 100.
CRIT: Answers from the provided data
META: {
  "tags": [
    "finance",
    "apple"
  ],
  "difficulty": "easy",
  "source_repo": "https://github.com/virattt/dexter"
}
METAJ: {"tags":["finance","apple"],"difficulty":"easy","source_repo":"https://github.com/virattt/dexter"}
RUB: [
  {
    "id": "rubric-1",
    "outcome": "Uses the provided ticker.",
    "operator": "correctness",
    "weight": 1,
    "required": true
  },
  {
    "id": "rubric-2",
    "outcome": "Does not contradict the source data.",
    "operator": "contradiction",
    "weight": 2,
    "required": true
  }
]
RUBJ: [{"id":"rubric-1","outcome":"Uses the provided ticker.","operator":"correctness","weight":1,"required":true},\
{"id":"rubric-2","outcome":"Does not contradict the source data.","operator":"contradiction","weight":2,"required":true}]
FC: + notes.md
TC: - Read: data/aapl.csv
UNKNOWN: {{ reviewer }} {{reviewer}}"""
    )
    assert (result.status, result.verdict, result.score) == ("ok", "pass", 1.0)
    unknown = [e for e in result.evidence if "unknown variable" in e]
    assert len(unknown) == 1 and "{{reviewer}}" in unknown[0]


def test_prompt_file_without_answer_variable_is_an_execution_error_and_sends_nothing(
    judge_server: JudgeServer, pool: JudgePool, tmp_path: Path
):
    prompt = tmp_path / "judge.md"
    prompt.write_text("Grade against {{criteria}}", encoding="utf-8")
    result = grade(context(math_test(LlmGraderSpec(name="g", prompt_file=str(prompt))), pool))
    assert (result.status, result.verdict, result.score) == ("execution_error", "skip", 0.0)
    assert "uses neither {{output}} nor {{expected_output}}" in result.assertions[0].text
    assert judge_server.requests == []


# -- modes ----------------------------------------------------------------------------------------


def test_freeform_keeps_eight_assertions_and_repairs_string_booleans(judge_server: JudgeServer, pool: JudgePool):
    reply = {
        "score": 1.0,
        "assertions": [{"text": f"aspect {i}", "passed": "true" if i % 2 else "false"} for i in range(10)],
        "details": {"tokens_checked": 3},
    }
    judge_server.script("Sure! Here is my grading:\n```json\n" + json.dumps(reply) + "\n```")
    result = grade(context(math_test(), pool))
    assert (result.score, result.verdict) == (1.0, "pass")
    assert [a.text for a in result.assertions] == [f"aspect {i}" for i in range(8)]
    assert [a.passed for a in result.assertions] == [False, True] * 4
    assert result.details == {"tokens_checked": 3}

    judge_server.script(freeform(0.79))
    assert grade(context(math_test(), pool)).verdict == "fail"


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"score": 1.2}, '"score" must be between 0 and 1'),
        ({"score": "0.9"}, '"score" must be a number'),
        ({"score": 0.9, "assertions": [{"text": "x", "passed": True, "evidence": None}]}, "evidence must be a string"),
        ({"score": 0.9, "assertions": None}, '"assertions" must be a list'),
    ],
)
def test_a_freeform_reply_agentvs_schema_refuses_is_asked_again_not_clamped(
    judge_server: JudgeServer, pool: JudgePool, bad: dict, why: str
):
    """AgentV validates a reply with zod (freeformEvaluationSchema): a score of 1.2 is not clamped to 1
    but refused, asked again (3 attempts), then repaired; here the repair gives a valid reply."""
    judge_server.script(json.dumps(bad), json.dumps(bad), json.dumps(bad), freeform(0.75))
    result = grade(context(math_test(), pool))
    assert (result.score, result.verdict) == (0.75, "fail")
    assert len(judge_server.requests) == 4
    assert why in judge_server.requests[-1].user  # the repair request names the problem


def test_a_rubric_reply_needs_reasoning_as_agentvs_schema_does(judge_server: JudgeServer, pool: JudgePool):
    test = EvalTest(
        id="http",
        graders=[LlmGraderSpec(name="rubrics", rubrics=HTTP_RUBRICS[:1])],
        input=[Message(role="user", content="Write a guide")],
        criteria="A guide",
    )
    no_reasoning = {"checks": [{"id": "structure", "satisfied": True}], "overall_reasoning": "ok"}
    valid = {"checks": [{"id": "structure", "satisfied": True, "reasoning": "headings"}], "overall_reasoning": "ok"}
    judge_server.script(*[json.dumps(no_reasoning)] * 3, json.dumps(valid))
    result = grade(context(test, pool, answer="# Codes"))
    assert (result.score, result.verdict) == (1.0, "pass") and len(judge_server.requests) == 4
    assert "checks[0].reasoning must be a string" in judge_server.requests[-1].user


HTTP_RUBRICS = [
    RubricItem(id="structure", outcome="Has clear headings"),
    RubricItem(id="success-codes", outcome="Covers 2xx codes", weight=2.0, operator="correctness"),
    RubricItem(id="server-errors", outcome="Explains 5xx codes", weight=1.5, required=False),
]


def test_rubric_prompt_lists_items_with_labels_and_operator_guidance(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(rubric({"structure": True, "success-codes": True, "server-errors": True}))
    test = math_test(
        LlmGraderSpec(name="rubrics", rubrics=HTTP_RUBRICS),
        input=[Message(role="user", content="Write a guide to HTTP status codes")],
        expected_output=None,
        criteria="A comprehensive guide",
    )
    grade(context(test, pool, answer="# Codes\n200 OK"))
    (request,) = judge_server.requests
    assert request.system == RUBRIC_SYSTEM
    assert (
        request.user
        == """\
You are an expert grader. Evaluate the candidate answer against each rubric item below.

[[ ## question ## ]]
Write a guide to HTTP status codes

[[ ## criteria ## ]]
A comprehensive guide

[[ ## answer ## ]]
# Codes
200 OK

[[ ## rubrics ## ]]

Operator guidance:
- Correctness: mark satisfied only when the answer positively supports or fulfills the outcome. Omission or \
contradiction should not satisfy it.

- [structure] (REQUIRED): Has clear headings
- [success-codes] (REQUIRED) (weight: 2) (operator: correctness): Covers 2xx codes
- [server-errors] (weight: 1.5): Explains 5xx codes

For each rubric, determine if it is satisfied and provide brief reasoning."""
    )


def test_rubric_score_is_satisfied_weight_over_returned_weight_and_required_items_gate(
    judge_server: JudgeServer, pool: JudgePool
):
    test = math_test(LlmGraderSpec(name="rubrics", rubrics=HTTP_RUBRICS))
    judge_server.script(rubric({"structure": True, "success-codes": False, "server-errors": True, "bogus": True}))
    result = grade(context(test, pool))
    assert result.score == pytest.approx(2.5 / 4.5)
    assert result.verdict == "fail"
    assert [(a.text, a.passed, a.evidence) for a in result.assertions] == [
        ("[structure] Has clear headings", True, "reasoning for structure"),
        ("[success-codes] Covers 2xx codes", False, "reasoning for success-codes"),
        ("[server-errors] Explains 5xx codes", True, "reasoning for server-errors"),
    ]
    assert result.details == {
        "mode": "rubric",
        "failed_required": ["success-codes"],
        "overall_reasoning": "overall reasoning",
    }

    # An item the judge leaves out drops out of the denominator.
    judge_server.script(rubric({"structure": True, "success-codes": True}))
    result = grade(context(test, pool))
    assert (result.score, result.verdict) == (1.0, "pass")

    # A high score still fails when a required item is unsatisfied.
    heavy = [RubricItem(id="a", outcome="A", weight=9.0, required=False), RubricItem(id="b", outcome="B")]
    judge_server.script(rubric({"a": True, "b": False}))
    result = grade(context(math_test(LlmGraderSpec(name="r", rubrics=heavy)), pool))
    assert (result.score, result.verdict) == (0.9, "fail")


RANGE_RUBRICS = [
    RubricItem(
        id="accuracy",
        outcome="Accurate",
        weight=2.0,
        min_score=0.8,
        score_ranges=[
            {"score_range": [0, 4], "outcome": "bad"},
            {"score_range": [5, 7], "outcome": "ok"},
            {"score_range": [8, 10], "outcome": "great"},
        ],
    ),
    RubricItem(
        id="brevity",
        outcome="Brief",
        operator="correctness",
        score_ranges=[{"score_range": [0, 5], "outcome": "long"}, {"score_range": [6, 10], "outcome": "short"}],
    ),
]


def test_score_range_prompt_and_weighted_scoring(judge_server: JudgeServer, pool: JudgePool):
    test = math_test(
        LlmGraderSpec(name="ranges", rubrics=RANGE_RUBRICS),
        input=[Message(role="user", content="Summarize the article")],
        expected_output=None,
        criteria="Accurate and brief",
    )
    judge_server.script(score_ranges({"accuracy": 7, "brevity": 10}))
    result = grade(context(test, pool, answer="Climate change is accelerating."))
    (request,) = judge_server.requests
    assert request.system == SCORE_RANGE_SYSTEM
    assert (
        request.user
        == """\
You are an expert grader. Score the candidate answer on each criterion below using the provided score ranges.
For each criterion, output an integer score from 0 to 10 based on which score range best matches the answer.

[[ ## question ## ]]
Summarize the article

[[ ## criteria ## ]]
Accurate and brief

[[ ## answer ## ]]
Climate change is accelerating.

[[ ## scoring_criteria ## ]]

### Criterion: accuracy (weight: 2) [REQUIRED: min score 0.8]
Description: Accurate
Score ranges:
  - Score 0-4: bad
  - Score 5-7: ok
  - Score 8-10: great

### Criterion: brevity
Operator: correctness
Description: Brief
Score ranges:
  - Score 0-5: long
  - Score 6-10: short

Correctness: mark satisfied only when the answer positively supports or fulfills the outcome. Omission or \
contradiction should not satisfy it.

For each criterion, provide an integer score 0-10 that matches one of its defined score ranges."""
    )
    # (0.7 * 2 + 1.0 * 1) / 3 = 0.8, but accuracy is under its min_score: the verdict fails.
    assert result.score == pytest.approx(0.8)
    assert result.verdict == "fail"
    assert [(a.text, a.passed) for a in result.assertions] == [
        ("[accuracy] Accurate - Score: 7/10 (ok)", False),
        ("[brevity] Brief - Score: 10/10 (short)", True),
    ]
    assert result.details == {
        "raw_scores": {"accuracy": 7, "brevity": 10},
        "normalization": "score / 10",
        "aggregation": "weighted_average",
        "below_min_score": ["accuracy"],
    }

    judge_server.script(score_ranges({"accuracy": 9, "brevity": 3}))
    result = grade(context(test, pool))
    assert result.score == pytest.approx(0.7)
    assert [a.passed for a in result.assertions] == [True, False]

    judge_server.script(score_ranges({"accuracy": 10, "brevity": 8}))
    result = grade(context(test, pool))
    assert (result.score, result.verdict) == (pytest.approx(28 / 30), "pass")


# -- retries and failures -------------------------------------------------------------------------


def outcomes(recorder: MemoryRecorder) -> list[str]:
    return [e.outcome for _, e in calls(recorder)]


def test_429_waits_as_long_as_retry_after_says(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(rate_limited("1"), freeform(0.9))
    recorder = MemoryRecorder()
    start = time.monotonic()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert time.monotonic() - start >= 0.95
    assert len(judge_server.requests) == 2
    assert (result.status, result.score) == ("ok", 0.9)
    assert outcomes(recorder) == ["error", "ok"]
    first = calls(recorder)[0][1]
    assert first.error == "HTTP 429 from judge 'judge'" and first.attempt_number == 1
    assert recorder.get_blob(first.reply_sha256) == b'{"error":{"message":"rate limited"}}'
    assert result.grader_call_event_ids == [i for i, _ in calls(recorder)]


def test_500_then_success(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(server_error(), freeform(0.8))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert (result.status, result.verdict) == ("ok", "pass")
    assert outcomes(recorder) == ["error", "ok"]
    assert [e.attempt_number for _, e in calls(recorder)] == [1, 2]


def test_hung_connection_times_out_and_is_retried(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.script(hang(), freeform(1.0))
    recorder = MemoryRecorder()
    with make_pool(judge_server, timeout=0.3) as pool:
        start = time.monotonic()
        result = grade(context(math_test(), pool, recorder=recorder))
        assert time.monotonic() - start >= 0.3
    assert result.status == "ok"
    assert outcomes(recorder) == ["timeout", "ok"]
    assert calls(recorder)[0][1].error.startswith("timed out after 0.3s")


def test_a_timed_out_attempt_is_told_before_the_next(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch):
    """A hung judge is the whole timeout per attempt: each retry after one says so (the CLI prints it)."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.script(hang(), hang(), freeform(1.0))
    told: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: told.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("evalstore.replay.grading.judge.client")
    logger.addHandler(handler)
    try:
        with make_pool(judge_server, timeout=0.3) as pool:
            result = grade(context(math_test(), pool))
    finally:
        logger.removeHandler(handler)
    assert result.status == "ok"
    assert [line.split(": ", 1)[0] for line in told] == ["judge 'judge'", "judge 'judge'"]
    assert all("timed out after 0.3s" in line for line in told)
    assert [line.rsplit("(", 1)[1] for line in told] == ["2 of 3)", "3 of 3)"]
    assert SECRET not in "".join(told)


def test_retries_are_capped_and_the_final_failure_is_an_execution_error(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(server_error(503))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == 3  # the first request and max_retries=2
    assert (result.status, result.verdict, result.score) == ("execution_error", "skip", 0.0)
    assert result.assertions[0].text == "Judge call failed: HTTP 503 from judge 'judge'"
    assert any("internal error" in e for e in result.evidence)
    assert outcomes(recorder) == ["error"] * 3


def test_a_reply_without_json_is_retried_then_repaired(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script("I cannot decide.", "Still thinking.", "Verdict: {score: high}", freeform(0.85))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert (result.status, result.score) == ("ok", 0.85)
    assert outcomes(recorder) == ["parse_error", "parse_error", "parse_error", "ok"]
    first, repair = judge_server.requests[0], judge_server.requests[3]
    assert repair.system == first.system
    assert repair.user.startswith("The following evaluation response has useful grading content but invalid JSON")
    assert repair.user.endswith("Invalid response:\nVerdict: {score: high}")
    assert "not valid JSON" in repair.user
    # Each parse attempt has its own key (an unchanged replay walks the same attempts from the cache).
    keys = [e.cache_key for _, e in calls(recorder)]
    assert len(set(keys)) == 4
    assert [e.parse_attempt for _, e in calls(recorder)] == [1, 2, 3, 1]


def test_a_judge_that_never_answers_in_shape_gives_an_execution_error_with_its_last_reply(
    judge_server: JudgeServer, pool: JudgePool
):
    judge_server.script("no json at all")
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == 4  # three attempts and one repair
    assert (result.status, result.verdict, result.score) == ("execution_error", "skip", 0.0)
    assert result.assertions[0].text == (
        "Grader parse failure after 3 attempts: the judge reply contains no JSON object"
    )
    assert "judge's last reply: no json at all" in result.evidence
    assert outcomes(recorder) == ["parse_error"] * 4
    assert len(result.grader_call_event_ids) == 4


def test_a_body_that_is_not_json_is_recorded_raw_and_counts_as_a_parse_failure(
    judge_server: JudgeServer, pool: JudgePool
):
    judge_server.script(malformed_body(), freeform(0.6))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert (result.status, result.score, result.verdict) == ("ok", 0.6, "fail")
    first = calls(recorder)[0][1]
    assert first.outcome == "parse_error"
    assert recorder.get_blob(first.reply_sha256) == b"{this is not json"


# -- the judge cache ------------------------------------------------------------------------------


def test_cache_hit_reuses_the_recorded_reply_without_a_request(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(freeform(0.9, [("adds", True)]))
    recorder = MemoryRecorder()
    first = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == 1
    judge_server.script(freeform(0.1))  # a fresh call would now score differently

    second = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == 1
    assert second.cache_hit and not first.cache_hit
    assert (second.score, second.verdict, second.assertions) == (first.score, first.verdict, first.assertions)
    (original_id, original), (hit_id, hit) = calls(recorder)
    assert hit.cache_hit and hit.reused_from == original_id
    assert hit.cache_key == original.cache_key and hit.reply_sha256 == original.reply_sha256
    assert hit.request_sha256 == original.request_sha256 and hit.usage is None
    assert second.grader_call_event_ids == [hit_id]


def test_a_reply_recorded_before_endpoints_were_keyed_is_still_reused(judge_server: JudgeServer, pool: JudgePool):
    """A store written by an earlier evalstore keyed its replies without the judge's endpoint: an unchanged
    regrade of it still reuses them (and records the hit under the endpoint's key), calling no judge."""
    judge_server.script(freeform(0.9, [("adds", True)]))
    recorder = MemoryRecorder()
    first = grade(context(math_test(), pool, recorder=recorder))
    ((original_id, original),) = calls(recorder)
    messages = json.loads(recorder.get_blob(original.request_sha256))
    legacy = cache_key(messages, original.model, original.parameters)
    assert original.cache_key == cache_key(
        messages, original.model, original.parameters, endpoint=judge_server.base_url + "/chat/completions"
    )
    recorder.events[0] = (original_id, original.model_copy(update={"cache_key": legacy}))
    judge_server.script(freeform(0.1))

    second = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == 1 and second.cache_hit and second.score == first.score
    (_, hit) = calls(recorder)[1]
    assert hit.reused_from == original_id and hit.cache_key == original.cache_key


@pytest.mark.parametrize(
    ("script", "score", "status"),
    [
        (["I cannot decide.", freeform(0.85)], 0.85, "ok"),  # valid JSON at the second attempt
        (["I cannot decide.", "Still thinking.", "Verdict: {score: high}", freeform(0.6)], 0.6, "ok"),  # the repair
        (["no json at all"], 0.0, "execution_error"),  # never valid JSON
    ],
)
def test_an_unchanged_regrade_repeats_every_attempt_from_the_cache(
    judge_server: JudgeServer, pool: JudgePool, script: list[Any], score: float, status: str
):
    judge_server.script(*script)
    recorder = MemoryRecorder()
    first = grade(context(math_test(), pool, recorder=recorder))
    sent = len(judge_server.requests)
    assert sent == len(script) if status == "ok" else sent == 4
    judge_server.script(freeform(0.1))  # a fresh call would now score differently

    second = grade(context(math_test(), pool, recorder=recorder))
    assert len(judge_server.requests) == sent
    assert (second.score, second.status, second.assertions) == (first.score, first.status, first.assertions)
    assert (first.score, first.status, first.cache_hit, second.cache_hit) == (score, status, False, True)
    hits = calls(recorder)[sent:]
    assert len(hits) == sent and all(h.cache_hit for _, h in hits)
    assert [h.outcome for _, h in hits] == [e.outcome for _, e in calls(recorder)[:sent]]
    assert [h.reused_from for _, h in hits] == [i for i, _ in calls(recorder)[:sent]]

    third = grade(context(math_test(), pool, recorder=recorder, options=GradeOptions(no_cache=True)))
    assert len(judge_server.requests) == sent + 1 and (third.score, third.cache_hit) == (0.1, False)


def test_a_failed_call_is_not_cached(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(server_error(503))
    recorder = MemoryRecorder()
    grade(context(math_test(), pool, recorder=recorder))
    judge_server.script(freeform(0.7))
    result = grade(context(math_test(), pool, recorder=recorder))
    assert (result.score, result.cache_hit, len(judge_server.requests)) == (0.7, False, 4)


def test_no_cache_calls_the_judge_again_and_records_beside_the_old_call(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script(freeform(0.9))
    recorder = MemoryRecorder()
    grade(context(math_test(), pool, recorder=recorder))
    judge_server.script(freeform(0.3))
    result = grade(context(math_test(), pool, recorder=recorder, options=GradeOptions(no_cache=True)))
    assert len(judge_server.requests) == 2
    assert (result.score, result.cache_hit) == (0.3, False)
    (_, old), (_, new) = calls(recorder)
    assert old.cache_key == new.cache_key and not new.cache_hit and new.outcome == "ok"


def test_a_changed_prompt_misses_the_cache(judge_server: JudgeServer, pool: JudgePool):
    recorder = MemoryRecorder()
    grade(context(math_test(), pool, recorder=recorder))
    grade(context(math_test(criteria="Adds the numbers and shows the work"), pool, recorder=recorder))
    assert len(judge_server.requests) == 2


# -- configuration and secrets --------------------------------------------------------------------


def test_api_key_is_sent_as_bearer_but_never_recorded(judge_server: JudgeServer, pool: JudgePool):
    judge_server.script("garbage", freeform(0.9))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert result.status == "ok"
    assert {r.headers["authorization"] for r in judge_server.requests} == {f"Bearer {SECRET}"}
    for _, event in recorder.events:
        assert SECRET not in json.dumps(encode(event))
    for blob in recorder.blobs.values():
        assert SECRET.encode() not in blob
    assert SECRET not in json.dumps(pool.targets["judge"].redacted())
    assert SECRET not in repr(pool.resolve(pool.targets["judge"]))


def _echo_auth(status: int):  # type: ignore[no-untyped-def]
    """A judge that echoes the request's Authorization header: in a 401 body, or inside its verdict."""

    def answer(request: Request) -> Reply | str:
        auth = request.headers.get("authorization", "")
        if status != 200:
            return Reply(status=status, body=json.dumps({"error": f"invalid credentials: {auth}"}).encode())
        verdict = {"score": 0.9, "assertions": [{"text": f"saw {auth}", "passed": True, "evidence": auth}]}
        return json.dumps(verdict)

    return answer


def _nothing_stored_holds(recorder: MemoryRecorder, result: GraderResult, *secrets: str) -> None:
    stored = [json.dumps(encode(e)) for _, e in recorder.events]
    stored += [b.decode("utf-8", errors="replace") for b in recorder.blobs.values()]
    stored.append(json.dumps([a.model_dump() for a in result.assertions]) + json.dumps(result.evidence))
    stored.append(json.dumps(result.details, default=str))
    for secret in secrets:
        assert not [text for text in stored if secret in text], secret


@pytest.mark.parametrize("status", [401, 200])
def test_a_judge_echoing_the_key_gets_it_masked_everywhere_stored(
    judge_server: JudgeServer, pool: JudgePool, status: int
):
    judge_server.respond_with(_echo_auth(status))
    recorder = MemoryRecorder()
    result = grade(context(math_test(), pool, recorder=recorder))
    assert result.status == ("ok" if status == 200 else "execution_error")
    replies = [recorder.blobs[e.reply_sha256].decode() for _, e in calls(recorder) if e.reply_sha256]
    assert replies and all("***redacted***" in r for r in replies)  # the echo is kept, masked
    _nothing_stored_holds(recorder, result, SECRET)


def test_basic_credentials_in_the_judge_url_are_masked_in_their_base64_form_too(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
):
    import base64

    user, password = "judge-user", "pa55-canary-7d1e"
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    target = JudgeTarget(
        name="judge",
        provider="openai-compatible",
        base_url=judge_server.base_url.replace("://", f"://{user}:{password}@"),
        model="m",
        timeout=2.0,
    )
    judge_server.respond_with(_echo_auth(401))
    with JudgePool({"judge": target}, default="judge", retry=RetryPolicy(max_retries=0)) as pool:
        recorder = MemoryRecorder()
        result = grade(context(math_test(), pool, recorder=recorder))
    assert {r.headers["authorization"] for r in judge_server.requests} == {f"Basic {basic}"}
    _nothing_stored_holds(recorder, result, basic, password)


def test_request_and_parameters_are_recorded(judge_server: JudgeServer, pool: JudgePool):
    recorder = MemoryRecorder()
    grade(context(math_test(), pool, recorder=recorder))
    ((_, event),) = calls(recorder)
    assert (event.grader, event.grader_type, event.call, event.test_id, event.target) == (
        "llm-grader",
        "llm-grader",
        "judge",
        "add",
        "agent",
    )
    assert event.model == "judge-model" and event.parameters == {"temperature": 0.0, "max_tokens": 512}
    sent = judge_server.requests[0].body["messages"]
    assert json.loads(recorder.get_blob(event.request_sha256)) == sent
    assert json.loads(recorder.get_blob(event.reply_sha256)) == {"score": 1.0, "assertions": []}
    assert event.usage == {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    assert event.latency_ms is not None and event.latency_ms > 0


def test_an_unset_key_variable_is_an_execution_error_naming_it(
    judge_server: JudgeServer, pool: JudgePool, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(KEY_ENV)
    result = grade(context(math_test(), pool))
    assert result.status == "execution_error"
    assert f"environment variable {KEY_ENV} (the API key) is not set" in result.assertions[0].text
    assert judge_server.requests == []


def test_no_judge_configured_is_an_execution_error():
    result = grade(context(math_test(), None))
    assert (result.status, result.verdict) == ("execution_error", "skip")
    assert "EVALSTORE_JUDGE_BASE_URL" in result.assertions[0].text


def test_grader_target_and_cli_overrides_choose_the_judge(judge_server: JudgeServer, pool: JudgePool):
    result = grade(context(math_test(LlmGraderSpec(name="g", target="strict")), pool))
    assert result.grader_target == "strict" and judge_server.requests[-1].body["model"] == "strict-model"

    options = GradeOptions(judge_target="judge", judge_model="override-model")
    result = grade(context(math_test(LlmGraderSpec(name="g", target="strict")), pool, options=options))
    assert result.grader_target == "judge" and judge_server.requests[-1].body["model"] == "override-model"

    # A target not defined: AgentV's factory throws, and the grader is recorded as one that threw.
    (result,) = grade_graders(context(math_test(), pool), [LlmGraderSpec(name="g", target="missing")])
    assert (result.score, result.verdict, result.status) == (0.0, "fail", "ok")
    assert result.assertions[0].text == (
        "Grader 'g' failed: llm-grader evaluator 'g': target 'missing' not found in targets"
    )
    assert "judge target 'missing' is not defined (judges available: judge, strict)" in result.evidence[-1]


def test_a_graders_temperature_is_sent_when_it_names_its_own_target(judge_server: JudgeServer, pool: JudgePool):
    """AgentV builds a grader with its own ``target:`` with its ``temperature``; one without a target is graded
    by the default grader, which leaves the grader's temperature unused (builtin-graders.ts)."""
    grade(context(math_test(LlmGraderSpec(name="g", target="strict", temperature=0.7, max_steps=3)), pool))
    assert judge_server.requests[-1].body["temperature"] == 0.7
    grade(context(math_test(LlmGraderSpec(name="g", temperature=0.7)), pool))
    assert judge_server.requests[-1].body["temperature"] == 0.0  # the judge target's own


def test_concurrency_limit_is_shared_across_threads(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.latency = 0.2
    barrier = threading.Barrier(6)

    with make_pool(judge_server, concurrency=2) as pool:

        def one(i: int) -> GraderResult:
            ctx = context(math_test(id=f"t{i}"), pool)
            barrier.wait(timeout=5)
            return grade(ctx)

        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=6) as executor:
            results = list(executor.map(one, range(6)))
        elapsed = time.monotonic() - start
    assert all(r.status == "ok" for r in results)
    assert judge_server.max_in_flight <= 2
    assert elapsed >= 0.55  # three waves of two 0.2 s requests


def test_the_judge_gets_the_prompt_trimmed_as_agentvs_provider_sends_it(judge_server: JudgeServer, pool: JudgePool):
    """AgentV's openai provider sends request.question.trim(): JavaScript's trim, both ends, every prompt."""
    judge_server.script(freeform(0.9))
    grade(context(math_test(), pool, answer="   "))
    assert judge_server.requests[-1].user.endswith("[[ ## answer ## ]]")  # the empty answer's newline is gone
    custom = LlmGraderSpec(name="custom", prompt="\n\n  \ufeffGrade {{output}}\n\x85\ufeff")
    grade(context(math_test(custom), pool))
    assert judge_server.requests[-1].user == "Grade The answer is 42.\n\x85"  # U+0085 is not JavaScript whitespace


def test_a_score_range_item_that_says_required_is_gated_at_ten(judge_server: JudgeServer, pool: JudgePool):
    """AgentV's calculateScoreRangeResult: min_score, else 10/10 for ``required: true`` (as written)."""
    ranges = [{"score_range": [0, 6], "outcome": "weak"}, {"score_range": [7, 10], "outcome": "strong"}]
    spec = LlmGraderSpec(
        name="ranges", rubrics=[RubricItem(id="a", outcome="A", score_ranges=ranges, required_written=True)]
    )
    judge_server.script(json.dumps({"checks": [{"id": "a", "score": 8}]}))
    result = grade(context(math_test(spec), pool))
    assert (result.score, result.verdict, result.assertions[0].passed) == (0.8, "fail", False)
    unwritten = LlmGraderSpec(name="ranges", rubrics=[RubricItem(id="a", outcome="A", score_ranges=ranges)])
    result = grade(context(math_test(unwritten), pool))
    assert (result.score, result.verdict, result.assertions[0].passed) == (0.8, "pass", True)


def test_the_judge_calls_of_a_tests_llm_graders_are_in_flight_together(judge_server: JudgeServer, pool: JudgePool):
    """The second grader asks while the first waits for its reply (grading/overlap.py): with each reply
    taking a second, both requests are at the judge at once, as they never are one after another."""
    from evalstore.replay.grading.engine import grade_test

    judge_server.script(Reply(content=json.dumps({"score": 1.0, "assertions": []}), delay=1.0))
    test = math_test(graders=[LlmGraderSpec(name="first"), LlmGraderSpec(name="second", target="strict")])
    recorder = MemoryRecorder()
    ctx = context(test, pool)
    graded = grade_test(ctx.suite, test, ctx.transcript, recorder, judges=pool)
    assert [v.score for _, v in graded.verdicts] == [1.0, 1.0]
    assert judge_server.max_in_flight == 2
    # The log reads as if they had run one after another: each grader's call, then its verdict.
    assert [(type(e).__name__, getattr(e, "grader", None)) for _, e in recorder.events] == [
        ("GraderCalled", "first"),
        ("VerdictRecorded", "first"),
        ("GraderCalled", "second"),
        ("VerdictRecorded", "second"),
        ("TestScored", None),
    ]
