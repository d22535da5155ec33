"""Conversation tests (``mode: conversation``): read, and refused, as AgentV 4.42.4 reads them; graded from a
recorded conversation turn by turn, aggregated as AgentV aggregates (deterministic graders here; the judge and
``evalstore run`` are in tests/e2e/test_e2e_conversation.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalstore.replay.content import Message
from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.grading.conversation import TURN_ERROR, context_text, recorded_turns, windowed
from evalstore.replay.grading.engine import grade_test
from evalstore.replay.grading.errored import left_out_of_score
from evalstore.replay.grading.graders.base import GradeOptions, TranscriptInfo
from evalstore.replay.grading.scoring import explain_score
from evalstore.replay.recording import MemoryRecorder
from evalstore.store.events import VerdictRecorded


def _suite(tmp_path: Path, test: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "chat.eval.yaml"
    path.write_text("tests:\n" + textwrap.indent(textwrap.dedent(test), "  "))
    return load_eval(path)


TEST = """\
- id: t
  mode: conversation
  aggregation: {aggregation}
  on_turn_failure: {policy}
  input: [{{role: system, content: Be brief.}}]
  turns:
    - input: one
      assertions: [{{type: contains, value: "1"}}]
    - input: two
      assertions: [{{type: contains, value: "2"}}]
    - input: three
      assertions: [{{type: contains, value: "3"}}]
"""


def _conversation(*answers: str | None) -> list[Message]:
    messages = [Message(role="system", content="Be brief.")]
    for question, answer in zip(("one", "two", "three"), answers):
        if answer is None:
            messages.append(
                Message.model_validate(
                    {"role": "user", "content": question, "metadata": {TURN_ERROR: "target 'agent': boom"}}
                )
            )
        else:
            messages += [Message(role="user", content=question), Message(role="assistant", content=answer)]
    return messages


def _grade(  # type: ignore[no-untyped-def]
    tmp_path: Path,
    messages: list[Message],
    aggregation: str = "mean",
    policy: str = "continue",
    threshold: float | None = None,
):
    suite = _suite(tmp_path, TEST.format(aggregation=aggregation, policy=policy))
    recorder = MemoryRecorder()
    transcript = TranscriptInfo(messages=messages, event_id="tr")
    grade = grade_test(
        suite, suite.tests[0], transcript, recorder, target="agent", options=GradeOptions(threshold=threshold)
    )
    verdicts = {v.grader: v for _, v in grade.verdicts}
    return grade.scored, verdicts


@pytest.mark.parametrize(("aggregation", "score"), [("mean", 2 / 3), ("min", 0.0), ("max", 1.0)])
def test_turn_scores_are_aggregated_as_the_test_says(tmp_path: Path, aggregation: str, score: float) -> None:
    scored, verdicts = _grade(tmp_path, _conversation("1", "nope", "3"), aggregation)
    assert [(n, v.score, v.grader_type) for n, v in verdicts.items()] == [
        ("turn-1", 1.0, "rubrics"),
        ("turn-2", 0.0, "rubrics"),
        ("turn-3", 1.0, "rubrics"),
    ]
    assert scored.score == pytest.approx(score)
    assert all(isinstance(v, VerdictRecorded) and v.transcript_event_id == "tr" for v in verdicts.values())
    assert verdicts["turn-2"].details == {
        "scores": [
            {
                "name": "contains-2",
                "type": "contains",
                "score": 0.0,
                "weight": 1.0,
                "verdict": "fail",
                "assertions": verdicts["turn-2"].details["scores"][0]["assertions"],  # type: ignore[index]
            }
        ]
    }


def test_stop_skips_the_turns_after_a_failed_one_even_when_recorded(tmp_path: Path) -> None:
    scored, verdicts = _grade(tmp_path, _conversation("1", "nope", "3"), "mean", "stop")
    assert [(v.score, v.verdict) for v in verdicts.values()] == [(1.0, "pass"), (0.0, "fail"), (0.0, "skip")]
    assert verdicts["turn-3"].assertions[0].text == "Skipped due to previous turn failure"
    assert (scored.score, scored.status) == (pytest.approx(1 / 3), "quality_failure")
    # The skipped turn counts (its 0 is in the 1/3): no table or `why` may say it was left out as an error.
    assert not left_out_of_score(verdicts["turn-3"].status)
    assert explain_score(verdicts.values(), 0.8) == ""


def test_an_imported_turn_agentv_skipped_counts_and_is_no_execution_error(tmp_path: Path) -> None:
    """AgentV writes a turn ``on_turn_failure: stop`` skipped as ``verdict: skip``, the verdict of a grader
    that failed to run; but it scores 0 and counts in the conversation's score. The import recorded it as an
    execution error, and ``show`` said it was left out of a score it was part of."""
    import json

    from evalstore.replay.agentv.importing import import_results
    from evalstore.store import EventStore

    def turn(n: int, score: float, verdict: str, text: str) -> dict:
        return {
            "name": f"turn-{n}",
            "type": "rubrics",
            "score": score,
            "verdict": verdict,
            "assertions": [{"text": text, "passed": verdict == "pass"}],
        }

    row = {
        "timestamp": "2026-11-30T00:00:00.000Z",
        "test_id": "chat",
        "suite": "s",
        "target": "agent",
        "score": 1 / 3,
        "execution_status": "quality_failure",
        "input": [{"role": "user", "content": "one"}],
        "output": [{"role": "assistant", "content": "1"}],
        "scores": [
            turn(1, 1.0, "pass", "has 1"),
            turn(2, 0.0, "fail", "no 2"),
            turn(3, 0.0, "skip", "Skipped due to previous turn failure"),
        ],
    }
    broken = {
        **row,
        "test_id": "broken",
        "score": 0.0,
        "execution_status": "execution_error",
        "scores": [
            {
                "name": "checker",
                "type": "code-grader",
                "score": 0.0,
                "verdict": "skip",
                "assertions": [{"text": "Code grader failed: exit 1", "passed": False}],
            }
        ],
    }
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in (row, broken)))
    store = EventStore.open(f"sqlite:///{tmp_path / 's.db'}")
    try:
        run_id = import_results(store, results).run_id
        status = {(v["test_id"], v["grader"]): v["status"] for v in store.query("verdicts", run_id=run_id)}
    finally:
        store.close()
    assert status[("chat", "turn-3")] == "ok" and status[("chat", "turn-2")] == "ok"
    assert status[("broken", "checker")] == "execution_error"  # a failed grader's skip is still one


@pytest.mark.parametrize(("aggregation", "status"), [("mean", "quality_failure"), ("max", "ok")])
def test_a_failed_agent_call_is_a_turn_scored_0_and_the_status_is_the_scores(
    tmp_path: Path, aggregation: str, status: str
) -> None:
    """AgentV's conversation runner (orchestrator.ts ``runConversationMode``): the turn scores 0 with the
    provider's error (its message, without the target evalstore's error names), the later turns go on, and
    the test's status is its score's (``classifyQualityStatus``): never an execution error, so no error of its
    own (once ``execution_error``, ``turn-2: Provider error``)."""
    scored, verdicts = _grade(tmp_path, _conversation("1", None, "3"), aggregation)
    assert [(n, v.score, v.verdict, v.status) for n, v in verdicts.items()] == [
        ("turn-1", 1.0, "pass", "ok"),
        ("turn-2", 0.0, "fail", "ok"),
        ("turn-3", 1.0, "pass", "ok"),
    ]
    assert [a.text for a in verdicts["turn-2"].assertions] == ["Provider error: boom"]
    assert verdicts["turn-2"].details is None  # AgentV's turn has no scores of its graders
    assert (scored.status, scored.passed, scored.error) == (status, status == "ok", None)


@pytest.mark.parametrize("threshold", [None, 0.0])
def test_stop_ends_the_conversation_at_a_failed_agent_call_whatever_the_threshold(
    tmp_path: Path, threshold: float | None
) -> None:
    """AgentV stops after a failed call (``if (onTurnFailure === 'stop') stopped = true``), not only below the
    threshold: at a threshold of 0 the turn's 0 would not stop it (it once did not)."""
    scored, verdicts = _grade(tmp_path, _conversation("1", None, "3"), "mean", "stop", threshold)
    assert [(v.score, v.verdict) for v in verdicts.values()] == [(1.0, "pass"), (0.0, "fail"), (0.0, "skip")]
    assert verdicts["turn-3"].assertions[0].text == "Skipped due to previous turn failure"
    assert scored.score == pytest.approx(1 / 3)
    assert (scored.status, scored.error) == ("quality_failure" if threshold is None else "ok", None)


def test_a_turn_the_recorded_conversation_never_reached_is_an_execution_error(tmp_path: Path) -> None:
    """A replay has no answer for it (the run stopped before it, and the regraded turns no longer would):
    evalstore's own case, where AgentV would have asked the agent."""
    scored, verdicts = _grade(tmp_path, _conversation("1", None))
    assert verdicts["turn-3"].status == "execution_error"
    assert "the recorded conversation ends before this turn" in verdicts["turn-3"].assertions[0].text
    assert (scored.status, scored.passed) == ("execution_error", False)
    assert scored.error == "turn-3: the recorded conversation ends before this turn: nothing to grade"


def test_recorded_turns_and_what_graders_see() -> None:
    suite_test = type("T", (), {"input": [Message(role="system", content="S")], "turns": [1, 2, 3]})()
    messages = _conversation("a1", "a2")
    turns = recorded_turns(suite_test, messages)  # type: ignore[arg-type]
    assert [t.answer.content if t and t.answer else None for t in turns] == ["a1", "a2", None]
    assert turns[2] is None
    history = turns[1].history  # type: ignore[union-attr]
    assert context_text(history) == "system: Be brief.\n\nuser: one\n\nassistant: a1\n\nuser: two\n\nassistant: a2"
    assert [m.content for m in windowed(history, 1)] == ["Be brief.", "two", "a2"]


@pytest.mark.parametrize(
    ("test", "field", "message"),
    [
        (
            "- {id: t, input: x, criteria: c, turns: [{input: a}]}",
            "tests[0].turns",
            "'turns' requires mode: conversation",
        ),
        ("- {id: t, input: x, criteria: c, aggregation: min}", "tests[0].aggregation", "'aggregation' requires mode"),
        ("- {id: t, input: x, mode: conversation}", "tests[0].mode", "requires a non-empty 'turns' array"),
        (
            "- {id: t, input: x, mode: conversation, turns: [{input: a}], expected_output: y}",
            "tests[0].expected_output",
            "Top-level 'expected_output' is not allowed with mode: conversation",
        ),
        ("- {id: t, input: x, mode: conversation, turns: [{input: ''}]}", "tests[0].turns[0].input", "non-empty input"),
        ("- {id: t, input: x, mode: conversation, turns: [x]}", "tests[0].turns[0]", "Turn must be an object"),
        (
            "- {id: t, input: x, mode: conversation, turns: [{input: a}], aggregation: median}",
            "tests[0].aggregation",
            "`median` is not one of mean, min, max",
        ),
    ],
)
def test_what_agentv_validate_refuses_is_refused(tmp_path: Path, test: str, field: str, message: str) -> None:
    with pytest.raises(EvalFileError, match=message) as err:
        _suite(tmp_path, test)
    assert err.value.field == field


def test_turn_assertions_are_graded_as_agentv_builds_them(tmp_path: Path) -> None:
    suite = _suite(
        tmp_path,
        """\
        - id: t
          mode: conversation
          input: hi
          vars: {n: 3}
          turns:
            - input: {ask: "{{ n }}"}
              assertions: [{type: contains, value: x}, "Is kind", "Is short"]
            - input: b
              expected_output: "ok"
            - input: c
        """,
    )
    (test,) = suite.tests
    assert test.graders == []  # no implicit grader: the turns are graded
    first, second, third = test.turns
    assert first.input == '{"ask":3}'  # vars filled, then JSON as AgentV sends it
    assert [(g.name, g.type) for g in first.graders] == [("turn-rubrics", "llm-grader"), ("contains-x", "contains")]
    rubrics = first.graders[0].rubrics  # type: ignore[union-attr]
    assert [(r.id, r.outcome, r.required) for r in rubrics] == [
        ("criterion-1", "Is kind", False),
        ("criterion-2", "Is short", False),
    ]
    assert [g.name for g in second.graders] == ["llm-grader"]  # an expected output alone: the default grader
    assert third.graders == []
