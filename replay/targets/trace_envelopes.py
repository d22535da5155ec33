"""The ``replay`` provider with ``execution_traces:``, as AgentV 4.42.4 reads them (``replay-trace-envelopes.ts``
over ``trace-envelope.ts``): a file of ``agentv.trace.v1`` envelopes (one JSON document, an array of them, or
JSONL), each checked as AgentV's strict wire schema checks it, looked up by the identity it names (its
``eval`` block, else its ``replay.lookup_key``), and answered as ``traceEnvelopeToMessages`` projects it:

- one assistant message per chat span (``gen_ai.operation.name: chat`` or OpenInference ``LLM``), in span order
  (start time, a parent before its child, end time, span id), its content the span's
  ``gen_ai.output.messages``, its tool calls the tool spans whose parent it is (name, call id, arguments,
  result, status, times), its usage, times and span ids;
- the run's usage, cost, duration and times from the root span.

A trace whose content was not captured (no chat span, or no content on the last) cannot be replayed, as in
AgentV. What AgentV keeps apart in its raw response (the envelope's source and capture) is not kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cmp_to_key
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalstore.replay.content import Message

SCHEMA_VERSION = "agentv.trace.v1"
NonNegativeInt = Field(default=None, ge=0)


class _Strict(BaseModel):
    # zod's .strict(): a key the schema does not name is an error.
    model_config = ConfigDict(extra="forbid")


class _Eval(_Strict):
    eval_id: str | None = None
    eval_path: str | None = None
    suite: str | None = None
    test_id: str
    target: str
    source_target: str | None = None
    attempt: int | None = NonNegativeInt
    variant: str | None = None
    run_id: str | None = None
    category: str | None = None
    experiment: str | None = None


class _Replay(_Strict):
    lookup_key: dict[str, Any] | None = None
    fixture_id: str | None = None
    source_fixture_path: str | None = None


class _Status(_Strict):
    code: Literal["UNSET", "OK", "ERROR"]
    message: str | None = None


class _Event(_Strict):
    name: str
    time_unix_nano: str | None = None
    attributes: dict[str, Any] | None = None


class Span(_Strict):
    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    name: str
    kind: str
    start_time_unix_nano: str
    end_time_unix_nano: str
    status: _Status
    attributes: dict[str, Any]
    events: list[_Event] | None = None


class _Resource(_Strict):
    attributes: dict[str, Any] | None = None


class _Scope(_Strict):
    name: str | None = None
    version: str | None = None


class _Body(_Strict):
    format: Literal["otlp_openinference_spans"]
    trace_id: str
    root_span_id: str
    resource: _Resource | None = None
    scope: _Scope | None = None
    spans: list[Span]


class _Source(_Strict):
    kind: str
    path: str | None = None
    provider: str | None = None
    format: str | None = None
    version: str | None = None
    metadata: dict[str, Any] | None = None


class _Capture(_Strict):
    content: Literal["none", "metadata", "full"]
    redaction_level: Literal["none", "partial", "full"]
    redacted_fields: list[str] | None = None
    policy: dict[str, Any] | None = None


class _SourceRef(_Strict):
    event_id: str | None = None
    message_id: str | None = None
    span_id: str | None = None
    trace_id: str | None = None
    raw_kind: str | None = None
    path: str | None = None
    line: int | None = NonNegativeInt
    metadata: dict[str, Any] | None = None


class _Warning(_Strict):
    code: str
    severity: Literal["info", "warning", "error"]
    span_id: str | None = None
    source_ref: _SourceRef | None = None
    message: str
    details: dict[str, Any] | None = None


class _Score(_Strict):
    name: str
    type: str
    score: float
    weight: float | None = None
    verdict: str | None = None
    source: str | None = None
    evaluated_at: str | None = None
    target_span_id: str | None = None
    evidence: dict[str, Any] | None = None


class _ExportMetadata(_Strict):
    duplicate_policy: Literal["skip", "update", "error"] | None = None
    identity_warnings: list[dict[str, Any]] | None = None


class Envelope(_Strict):
    """One ``agentv.trace.v1`` document (``TraceEnvelopeWireSchema``; its projection identity and identity
    warnings taken as objects without their inner schema)."""

    schema_version: Literal["agentv.trace.v1"]
    artifact_id: str
    created_at: str
    eval: _Eval
    projection_identity: dict[str, Any] | None = None
    export_metadata: _ExportMetadata | None = None
    replay: _Replay | None = None
    trace: _Body
    source: _Source
    capture: _Capture
    conversion_warnings: list[_Warning] | None = None
    artifacts: dict[str, str] | None = None
    scores: list[_Score] | None = None


@dataclass(frozen=True)
class Record:
    envelope: Envelope
    location: str
    """The file, with ``:LINE`` for a JSONL line."""

    @property
    def suite(self) -> str | None:
        return _first(self.envelope.eval.suite, self._key("suite"))

    @property
    def eval_path(self) -> str | None:
        return _first(self.envelope.eval.eval_path, self._key("eval_path"))

    @property
    def test_id(self) -> str:
        return self.envelope.eval.test_id

    @property
    def source_target(self) -> str:
        return _first(self.envelope.eval.source_target, self._key("source_target"), self.envelope.eval.target)

    @property
    def attempt(self) -> int:
        if self.envelope.eval.attempt is not None:
            return self.envelope.eval.attempt
        value = (self._lookup_key()).get("attempt")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    @property
    def variant(self) -> str | None:
        return _first(self.envelope.eval.variant, self._key("variant"))

    def _lookup_key(self) -> dict[str, Any]:
        return (self.envelope.replay.lookup_key if self.envelope.replay else None) or {}

    def _key(self, name: str) -> str | None:
        """``lookupKeyString``: a non-blank string of the replay lookup key."""
        value = self._lookup_key().get(name)
        return value if isinstance(value, str) and value.strip() else None


class TraceError(ValueError):
    """A file of envelopes that cannot be read (its message is AgentV's)."""


def read_records(path: Path) -> list[Record]:
    """Every envelope of the file (``readTraceEnvelopeReplayRecords``): the whole file as one JSON document
    (an object or an array of them), else JSON lines; each checked against the wire schema."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"Execution trace replay source not found or unreadable: {path}: {exc}") from None
    documents: list[tuple[Any, int | None]] = []
    if raw.strip():
        try:
            parsed = json.loads(raw.strip())
            documents = [(d, None) for d in parsed] if isinstance(parsed, list) else [(parsed, None)]
        except json.JSONDecodeError:
            for number, line in enumerate(raw.replace("\r\n", "\n").split("\n"), start=1):
                if not line.strip():
                    continue
                try:
                    documents.append((json.loads(line), number))
                except json.JSONDecodeError as exc:
                    raise TraceError(f"Invalid execution trace JSONL at {path}:{number}: {exc.msg}") from None
    records = []
    for document, line_number in documents:
        location = str(path) if line_number is None else f"{path}:{line_number}"
        try:
            envelope = Envelope.model_validate(document)
        except ValidationError as exc:
            raise TraceError(f"Invalid execution trace replay record at {location}: {_issues(exc)}") from None
        records.append(Record(envelope, location))
    return records


def project(record: Record) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``traceEnvelopeReplayRecordToProviderResponse``: the messages (as content-model dicts) and the run's
    usage, cost, duration and times. Raises :class:`TraceError` for a trace that cannot be replayed."""
    envelope = record.envelope
    messages = _messages(envelope)
    if not messages:
        raise TraceError(
            f"Execution trace replay source {record.location} cannot project to provider Message[]: no chat spans found"
        )
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is None or "content" not in last:
        raise TraceError(
            f"Execution trace replay source {record.location} is missing assistant output content; replay "
            "requires a full-content execution trace before grading"
        )
    root = next((s for s in envelope.trace.spans if s.span_id == envelope.trace.root_span_id), None)
    summary: dict[str, Any] = {}
    if root is not None:
        duration = _number(root.attributes, "agentv.trace.duration_ms")
        summary = {
            "token_usage": _usage(root.attributes),
            "cost_usd": _number(root.attributes, "agentv.trace.cost_usd"),
            "duration_ms": duration if duration is not None else _duration_ms(root),
            "start_time": _iso(root.start_time_unix_nano),
            "end_time": _iso(root.end_time_unix_nano),
        }
    return messages, {k: v for k, v in summary.items() if v is not None}


def _messages(envelope: Envelope) -> list[dict[str, Any]]:
    """``traceEnvelopeToMessages``: each chat span an assistant message carrying the tool spans under it."""
    spans = sorted(envelope.trace.spans, key=cmp_to_key(_compare_spans))
    by_id = {s.span_id: s for s in spans}
    tools_of: dict[str, list[Span]] = {}
    for span in spans:
        if _is_tool(span):
            tools_of.setdefault(span.parent_span_id or envelope.trace.root_span_id, []).append(span)
    out = []
    for span in spans:
        if not _is_chat(span):
            continue
        message: dict[str, Any] = {"role": "assistant"}
        if "gen_ai.output.messages" in span.attributes:
            message["content"] = span.attributes["gen_ai.output.messages"]
        tools = tools_of.get(span.span_id)
        if tools:
            message["tool_calls"] = [_tool_call(t) for t in tools]
        message.update(_times(span))
        usage = _usage(span.attributes)
        if usage is not None:
            message["token_usage"] = usage
        parent_call = _parent_tool_call(span, by_id)
        metadata = {"span_id": span.span_id, "trace_id": span.trace_id, "parent_span_id": span.parent_span_id}
        metadata["parent_tool_call_id"] = parent_call
        message["metadata"] = {k: v for k, v in metadata.items() if v is not None}
        out.append(message)
    return out


def _tool_call(span: Span) -> dict[str, Any]:
    """``toolCallFromSpan``."""
    attributes = span.attributes
    call: dict[str, Any] = {
        "tool": _first(
            _string(attributes, "gen_ai.tool.name"),
            _string(attributes, "tool.name"),
            re.sub(r"^execute_tool\s+", "", span.name),
        ),
        "id": _first(_string(attributes, "gen_ai.tool.call.id"), _string(attributes, "tool.id"), span.span_id),
    }
    if attributes.get("gen_ai.tool.call.arguments") is not None:
        call["input"] = attributes["gen_ai.tool.call.arguments"]
    if attributes.get("gen_ai.tool.call.result") is not None:
        call["output"] = attributes["gen_ai.tool.call.result"]
    call["status"] = "error" if span.status.code == "ERROR" else "ok"
    call.update(_times(span))
    return call


def _parent_tool_call(span: Span, by_id: dict[str, Span]) -> str | None:
    """``nearestAncestorToolCallId``: the call id of the nearest tool span above this one."""
    seen: set[str] = set()
    parent = span.parent_span_id
    while parent and parent not in seen:
        seen.add(parent)
        ancestor = by_id.get(parent)
        if ancestor is None:
            return None
        if _is_tool(ancestor):
            return str(_tool_call(ancestor)["id"])
        parent = ancestor.parent_span_id
    return None


def _times(span: Span) -> dict[str, Any]:
    times = {
        "start_time": _iso(span.start_time_unix_nano),
        "end_time": _iso(span.end_time_unix_nano),
        "duration_ms": _duration_ms(span),
    }
    return {k: v for k, v in times.items() if v is not None}


def _is_tool(span: Span) -> bool:
    a = span.attributes
    return a.get("gen_ai.operation.name") == "execute_tool" or a.get("openinference.span.kind") == "TOOL"


def _is_chat(span: Span) -> bool:
    a = span.attributes
    return a.get("gen_ai.operation.name") == "chat" or a.get("openinference.span.kind") == "LLM"


def _nanos(value: str) -> int | None:
    """``BigInt(value)``: an integer written in decimal (blank is 0), else None."""
    text = value.strip()
    if not text:
        return 0
    try:
        return int(text, 10)
    except ValueError:
        return None


def _compare_nanos(first: str, second: str) -> int:
    """``compareUnixNanoStrings``: as integers, else as strings."""
    left, right = _nanos(first), _nanos(second)
    if left is None or right is None:
        return (first > second) - (first < second)
    return (left > right) - (left < right)


def _compare_spans(first: Span, second: Span) -> int:
    """``compareSpanTime``: start, then a parent before its child, then end, then span id."""
    by_start = _compare_nanos(first.start_time_unix_nano, second.start_time_unix_nano)
    if by_start:
        return by_start
    if first.span_id == second.parent_span_id:
        return -1
    if second.span_id == first.parent_span_id:
        return 1
    by_end = _compare_nanos(first.end_time_unix_nano, second.end_time_unix_nano)
    if by_end:
        return by_end
    return (first.span_id > second.span_id) - (first.span_id < second.span_id)


def _iso(value: str | None) -> str | None:
    """``unixNanoToIso``: milliseconds, UTC, as ``Date.toISOString`` writes them."""
    nanos = _nanos(value) if value else None
    if not value or nanos is None:
        return None
    millis = nanos // 1_000_000 if nanos >= 0 else -((-nanos) // 1_000_000)
    try:
        moment = datetime.fromtimestamp(millis / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def _duration_ms(span: Span) -> float | int | None:
    """``durationMsFromSpan``: end minus start in milliseconds (fractional), None when it runs backwards."""
    start, end = _nanos(span.start_time_unix_nano), _nanos(span.end_time_unix_nano)
    if start is None or end is None or end < start:
        return None
    value = (end - start) / 1_000_000
    return int(value) if value.is_integer() else value


def _number(attributes: dict[str, Any], key: str) -> Any:
    value = attributes.get(key)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value
        in (
            float("inf"),
            float("-inf"),
        )
    ):
        return None
    return value


def _usage(attributes: dict[str, Any]) -> dict[str, Any] | None:
    """``tokenUsageFromAttributes``: input and output both, with cached and reasoning when present."""
    usage = {
        "input": _number(attributes, "gen_ai.usage.input_tokens"),
        "output": _number(attributes, "gen_ai.usage.output_tokens"),
    }
    if usage["input"] is None or usage["output"] is None:
        return None
    usage["cached"] = _number(attributes, "gen_ai.usage.cache_read.input_tokens")
    usage["reasoning"] = _number(attributes, "gen_ai.usage.reasoning.output_tokens")
    return {k: v for k, v in usage.items() if v is not None}


def _first(*values: Any) -> Any:
    """JavaScript's ``a ?? b ?? c``: the first that is not None (an empty string counts)."""
    return next((v for v in values if v is not None), None)


def _string(attributes: dict[str, Any], key: str) -> str | None:
    value = attributes.get(key)
    return value if isinstance(value, str) else None


def _issues(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<record>'}: {e['msg']}" for e in exc.errors())


def as_messages(messages: list[dict[str, Any]], where: str) -> list[Message]:
    """The projected messages in the content model; content that is not text or content blocks is refused."""
    try:
        return [Message.model_validate(m) for m in messages]
    except ValidationError:
        raise TraceError(
            f"{where}: evalstore keeps message content that is a string or a list of content blocks"
        ) from None
