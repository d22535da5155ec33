"""The trace: what the agent did, as AgentV 4.42's graders read it.

A recorded transcript holds the messages (``content.py``: each assistant message's tool calls with their
arguments, results, status and timings, each message's timings and token usage) and the target's metrics
(token usage, cost, duration, start and end). This module derives from them, once, the read models AgentV
grades with (``packages/core/src/evaluation/trace.ts``):

- :func:`agent_output`: the provider's output (``context.output``): the agent's messages without the
  test's input a full transcript starts with;
- :class:`Trace`: ``computeTraceSummary`` of that output (tool-call counts, tool durations, LLM calls,
  the span bounds) with the target's metrics, as ``buildTraceFromMessages`` merges them;
- :meth:`Trace.read_model`: AgentV's ``Trace`` object (summary, messages, structured events, metrics,
  provenance), the ``trace`` a code grader reads on stdin, and :meth:`Trace.summary_wire` its
  ``trace_summary``.

Every grader of what the agent *did* (``tool-trajectory``, ``execution-metrics``, ``latency``, ``cost``,
``token-usage``, ``skill-trigger``, code graders) reads a :class:`Trace`, so a run, an import and a replay
grade the same trace the same way, without the agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evalstore.replay.content import Message, ToolCall, dump_messages

EXPLORATION_TOOLS = (
    "read",
    "grep",
    "glob",
    "search",
    "list",
    "Read",
    "Grep",
    "Glob",
    "WebSearch",
    "WebFetch",
)
"""AgentV's ``DEFAULT_EXPLORATION_TOOLS``: the calls ``explorationRatio`` counts as exploring."""


def agent_output(messages: Sequence[Message], input_messages: Sequence[Message]) -> list[Message]:
    """The messages the agent produced (AgentV's provider ``output``): a transcript that starts with the
    test's input (an AgentV ``transcript.jsonl`` or a result row's ``trace.messages`` do) without it."""
    n = len(input_messages)
    if n and len(messages) > n and [m.role for m in messages[:n]] == [m.role for m in input_messages]:
        return list(messages[n:])
    return list(messages)


def tool_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Every tool call of the messages, in order."""
    return [call for m in messages for call in (m.tool_calls or [])]


def _instant(value: Any) -> datetime | None:
    """An ISO 8601 time as JavaScript's ``new Date`` reads it; None for one it cannot."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    """``Date.prototype.toISOString``: UTC, milliseconds, ``Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Trace:
    """One test's trace as AgentV's graders see it (``EvaluationContext.output``, ``trace``,
    ``tokenUsage``, ``costUsd``, ``durationMs``, ``startTime``, ``endTime``)."""

    messages: list[Message]
    """The whole transcript (``Trace.messages``): the input, then the agent's output."""
    output: list[Message]
    """The agent's messages (``context.output``)."""
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None
    start_time: str | None = None
    end_time: str | None = None
    final_output: str | None = None
    """The graded answer text (``candidate``), the final response event's content."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Provenance (``target``, ``eval_case_id``)."""
    recorded: bool = True
    """False when the source kept no messages (AgentV result rows imported without their run folder): the
    agent's calls are unknown, not none, and the graders that count them say so, as AgentV's do for a
    response graded without a trace (``gradePreparedEvalCase``)."""

    @classmethod
    def of(
        cls,
        messages: Sequence[Message],
        input_messages: Sequence[Message],
        *,
        token_usage: dict[str, Any] | None = None,
        cost_usd: float | None = None,
        duration_ms: float | None = None,
        start_time: str | None = None,
        end_time: str | None = None,
        final_output: str | None = None,
        metadata: dict[str, Any] | None = None,
        recorded: bool = True,
    ) -> Trace:
        output = agent_output(messages, input_messages)
        full = list(messages) if len(output) < len(messages) else _with_input(input_messages, output)
        return cls(
            messages=full,
            output=output,
            token_usage=token_usage,
            cost_usd=cost_usd,
            duration_ms=duration_ms,
            start_time=start_time,
            end_time=end_time,
            final_output=final_output,
            metadata=dict(metadata or {}),
            recorded=recorded,
        )

    @property
    def calls(self) -> list[ToolCall]:
        """The agent's tool calls, in order."""
        return tool_calls(self.output)

    def summary(self) -> dict[str, Any]:
        """``computeTraceSummary(output)`` in wire shape: ``event_count`` (tool calls), ``tool_calls`` (per
        tool), ``error_count`` (0: AgentV counts none from messages), ``llm_call_count`` (assistant
        messages), ``tool_durations`` (only when a call has a duration, or a start and an end)."""
        counts: dict[str, int] = {}
        durations: dict[str, list[float | int]] = {}
        for call in self.calls:
            counts[call.tool] = counts.get(call.tool, 0) + 1
            duration = _number(call.duration_ms)
            if duration is None:
                start, end = _instant(call.start_time), _instant(call.end_time)
                if start is not None and end is not None:
                    duration = _ms(end) - _ms(start)
            if duration is not None:
                durations.setdefault(call.tool, []).append(duration)
        summary: dict[str, Any] = {
            "event_count": sum(counts.values()),
            "tool_calls": counts,
            "error_count": 0,
            "llm_call_count": sum(1 for m in self.output if m.role == "assistant"),
        }
        if durations:
            summary["tool_durations"] = durations
        return summary

    def span_bounds(self) -> tuple[str | None, str | None]:
        """The earliest start and latest end of the agent's messages and tool calls, as AgentV writes them."""
        starts: list[datetime] = []
        ends: list[datetime] = []
        for message in self.output:
            for holder in (message, *(message.tool_calls or [])):
                start, end = _instant(getattr(holder, "start_time", None)), _instant(getattr(holder, "end_time", None))
                if start is not None:
                    starts.append(start)
                if end is not None:
                    ends.append(end)
        return (iso(min(starts)) if starts else None, iso(max(ends)) if ends else None)

    def summary_wire(self) -> dict[str, Any]:
        """A code grader's ``trace_summary``: the summary's fields, in AgentV's order."""
        summary = self.summary()
        keys = ("event_count", "tool_calls", "error_count", "tool_durations", "llm_call_count")
        return {k: summary[k] for k in keys if k in summary}

    def read_model(self) -> dict[str, Any]:
        """AgentV's ``Trace`` (``buildTraceFromMessages``) in wire shape: the summary, the transcript, its
        events (each message, each tool call and its result, the final response), the metrics and the
        provenance. A code grader's stdin ``trace``."""
        summary = self.summary()
        start, end = self.span_bounds()
        model: dict[str, Any] = {
            "event_count": summary["event_count"],
            "tool_calls": summary["tool_calls"],
            "error_count": summary["error_count"],
            "llm_call_count": summary["llm_call_count"],
        }
        if "tool_durations" in summary:
            model["tool_durations"] = summary["tool_durations"]
        model.update(
            {
                "messages": dump_messages(self.messages),
                "events": self.events(),
                "token_usage": self.token_usage,
                "cost_usd": self.cost_usd,
                "duration_ms": self.duration_ms,
                "start_time": self.start_time or start,
                "end_time": self.end_time or end,
                "metadata": self.metadata,
            }
        )
        return {k: v for k, v in model.items() if v is not None}

    def events(self) -> list[dict[str, Any]]:
        """``Trace.events`` as AgentV derives them from the transcript."""
        events: list[dict[str, Any]] = []

        def add(event: dict[str, Any]) -> None:
            # AgentV's key order: ids, ordinal, then the rest; absent values left out as JSON.stringify does.
            ids: dict[str, Any] = {k: event.pop(k) for k in ("event_id", "parent_event_id") if k in event}
            events.append(_present({**ids, "ordinal": len(events), **event}))

        final_index = next(
            (i for i in range(len(self.messages) - 1, -1, -1) if self.messages[i].role == "assistant"), None
        )
        for index, message in enumerate(self.messages):
            event_id = f"message-{index}"
            add(
                {
                    "event_id": event_id,
                    "type": "message",
                    "timestamp": _get(message, "start_time"),
                    "duration_ms": _get(message, "duration_ms"),
                    "message": _trace_message(message),
                    "metadata": {"message_index": index},
                }
            )
            for tool_index, call in enumerate(message.tool_calls or []):
                tool_event = f"{event_id}-tool-{tool_index}"
                where = {"message_index": index, "tool_index": tool_index}
                tool = {"name": call.tool, "call_id": call.id, "input": call.input, "output": call.output}
                add(
                    {
                        "event_id": tool_event,
                        "parent_event_id": event_id,
                        "type": "tool_call",
                        "timestamp": call.start_time,
                        "duration_ms": call.duration_ms,
                        "tool": {**_present(tool), "status": call.status or "ok"},
                        "metadata": where,
                    }
                )
                if call.output is not None:
                    result = {"name": call.tool, "call_id": call.id, "output": call.output}
                    add(
                        {
                            "event_id": f"{tool_event}-result",
                            "parent_event_id": tool_event,
                            "type": "tool_result",
                            "timestamp": call.end_time,
                            "tool": {**_present(result), "status": call.status or "ok"},
                            "metadata": where,
                        }
                    )
        if final_index is not None:
            final = self.messages[final_index]
            said = _trace_message(final)
            content = self.final_output if self.final_output is not None else final.content
            add(
                {
                    "event_id": "final-response",
                    "parent_event_id": f"message-{final_index}",
                    "type": "final_response",
                    "timestamp": _get(final, "end_time") or _get(final, "start_time") or self.end_time,
                    "message": _present({**said, "content": _content_wire(content)}),
                    "metadata": {"message_index": final_index},
                }
            )
        return events

    def exploration_ratio(self, tools: Sequence[str] = EXPLORATION_TOOLS) -> float | None:
        """AgentV's ``explorationRatio``: the share of tool calls that explore; None without calls."""
        summary = self.summary()
        if summary["event_count"] == 0:
            return None
        return sum(summary["tool_calls"].get(t, 0) for t in tools) / summary["event_count"]


def _with_input(input_messages: Sequence[Message], output: list[Message]) -> list[Message]:
    """AgentV's ``buildTraceMessages``: the input, then the output, unless the output is a whole
    conversation already (it has a user or system turn) or repeats the one input message."""
    if not output:
        return list(input_messages)
    if any(m.role in ("user", "system") for m in output):
        return output
    if len(input_messages) == 1 and _same_content(input_messages[0], output[0]):
        return output
    return [*input_messages, *output]


def _same_content(first: Message, second: Message) -> bool:
    return first.role == second.role and _content_wire(first.content) == _content_wire(second.content)


def _content_wire(content: Any) -> Any:
    if isinstance(content, list):
        return [b.model_dump(mode="json", exclude_none=True) if hasattr(b, "model_dump") else b for b in content]
    return content


def _trace_message(message: Message) -> dict[str, Any]:
    return _present(
        {
            "role": message.role,
            "name": message.name,
            "content": _content_wire(message.content),
            "token_usage": _get(message, "token_usage"),
            "metadata": _get(message, "metadata"),
        }
    )


def _get(model: Any, key: str) -> Any:
    value = getattr(model, key, None)
    if value is None and model.model_extra:
        value = model.model_extra.get(key)
    return value


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
