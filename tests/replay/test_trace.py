"""The trace read models (replay/trace.py), as AgentV 4.42's trace.ts derives them from messages."""

from __future__ import annotations

from evalstore.replay.content import Message, ToolCall
from evalstore.replay.trace import Trace, agent_output

QUESTION = [Message(role="user", content="Fix the bug")]


def calls_message(*calls: ToolCall, **extra) -> Message:
    return Message(role="assistant", content="", tool_calls=list(calls), **extra)


def test_summary_counts_the_agents_calls_and_turns() -> None:
    output = [
        calls_message(ToolCall(tool="Read", duration_ms=5), ToolCall(tool="Grep")),
        calls_message(ToolCall(tool="Read", start_time="2026-01-01T00:00:01Z", end_time="2026-01-01T00:00:01.25Z")),
        Message(role="assistant", content="done"),
    ]
    summary = Trace.of(output, QUESTION).summary()
    assert summary == {
        "event_count": 3,
        "tool_calls": {"Read": 2, "Grep": 1},
        "error_count": 0,
        "llm_call_count": 3,
        # a duration as given, else end - start; a call with neither has none
        "tool_durations": {"Read": [5, 250]},
    }


def test_no_durations_no_tool_durations_key() -> None:
    summary = Trace.of([calls_message(ToolCall(tool="Bash"))], QUESTION).summary()
    assert "tool_durations" not in summary


def test_output_is_the_transcript_without_its_input() -> None:
    transcript = [*QUESTION, calls_message(ToolCall(tool="Read")), Message(role="assistant", content="ok")]
    assert agent_output(transcript, QUESTION) == transcript[1:]
    trace = Trace.of(transcript, QUESTION)
    assert trace.messages == transcript and trace.output == transcript[1:]
    # a transcript of the output only gets the input in front, as AgentV's buildTraceMessages does
    assert Trace.of(transcript[1:], QUESTION).messages == transcript


def test_span_bounds_are_the_earliest_start_and_latest_end_as_iso_with_milliseconds() -> None:
    output = [
        calls_message(
            ToolCall(tool="Read", start_time="2026-01-01T00:00:02+00:00", end_time="2026-01-01T00:00:03.5Z"),
            start_time="2026-01-01T00:00:01Z",
        ),
        Message(role="assistant", content="ok", end_time="2026-01-01T00:00:04Z"),
    ]
    trace = Trace.of(output, QUESTION)
    assert trace.span_bounds() == ("2026-01-01T00:00:01.000Z", "2026-01-01T00:00:04.000Z")
    model = trace.read_model()
    assert (model["start_time"], model["end_time"]) == trace.span_bounds()
    # the target's own times, when recorded, stand over the spans (mergeExecutionMetrics)
    timed = Trace.of(output, QUESTION, start_time="2026-02-02T00:00:00.000Z").read_model()
    assert timed["start_time"] == "2026-02-02T00:00:00.000Z"


def test_read_model_events_follow_agentv() -> None:
    call = ToolCall(tool="Read", input={"path": "a"}, output="text", id="c1", end_time="2026-01-01T00:00:00Z")
    trace = Trace.of(
        [calls_message(call), Message(role="assistant", content="done")],
        QUESTION,
        token_usage={"input": 3, "output": 4},
        cost_usd=0.5,
        duration_ms=10,
        final_output="done",
        metadata={"eval_case_id": "t"},
    )
    model = trace.read_model()
    assert list(model) == [
        "event_count",
        "tool_calls",
        "error_count",
        "llm_call_count",
        "messages",
        "events",
        "token_usage",
        "cost_usd",
        "duration_ms",
        "end_time",  # the tool call's end: the span bound (no start anywhere, so no start_time)
        "metadata",
    ]
    types = [(e["event_id"], e["type"]) for e in model["events"]]
    assert types == [
        ("message-0", "message"),
        ("message-1", "message"),
        ("message-1-tool-0", "tool_call"),
        ("message-1-tool-0-result", "tool_result"),
        ("message-2", "message"),
        ("final-response", "final_response"),
    ]
    result = model["events"][3]
    assert result == {
        "event_id": "message-1-tool-0-result",
        "parent_event_id": "message-1-tool-0",
        "ordinal": 3,
        "type": "tool_result",
        "timestamp": "2026-01-01T00:00:00Z",
        "tool": {"name": "Read", "call_id": "c1", "output": "text", "status": "ok"},
        "metadata": {"message_index": 1, "tool_index": 0},
    }
    assert model["events"][-1]["parent_event_id"] == "message-2"


def test_exploration_ratio_counts_agentvs_exploration_tools() -> None:
    trace = Trace.of([calls_message(ToolCall(tool="Read"), ToolCall(tool="Edit"), ToolCall(tool="grep"))], QUESTION)
    assert trace.exploration_ratio() == 2 / 3
    assert Trace.of([Message(role="assistant", content="x")], QUESTION).exploration_ratio() is None
