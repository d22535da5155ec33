"""AgentV transcript sidecars -> message dicts in our content-model shape (replay/content.py).

Four sources, best first: ``transcript-raw.jsonl`` / ``outputs/transcript.jsonl`` (``agentv.transcript.v1`` rows;
the only one that keeps ContentFile blocks), ``transcript.json`` (``agentv.normalized_transcript.v1`` turns;
file blocks dropped by AgentV), and ``trace.json`` (a trace envelope carrying ``agentv.transcript.message``
span events, or an older trace read model with ``messages``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalstore.replay.agentv.wire import as_dict, iter_json_lines, read_json
from evalstore.replay.content import Message, dump_messages
from evalstore.replay.errors import ImportFormatError

_MESSAGE_EXTRAS = ("start_time", "end_time", "duration_ms", "token_usage", "metadata")
_TOOL_EXTRAS = ("start_time", "end_time", "duration_ms")
_TRANSCRIPT_EVENT = "agentv.transcript.message"


def _block(raw: Any) -> dict[str, Any] | None:
    """One content block, or None for kinds outside AgentV's content model (thinking, tool_use...)."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("type")
    if kind == "text" and isinstance(raw.get("text"), str):
        return {"type": "text", "text": raw["text"]}
    if kind == "image":
        return {
            "type": "image",
            "media_type": raw.get("media_type") or raw.get("mime_type"),
            "source": raw.get("source") or raw.get("value"),
        }
    if kind == "file":
        path = raw.get("path") or raw.get("value")
        if isinstance(path, str) and path:
            block = {"type": "file", "media_type": raw.get("media_type"), "path": path}
            if isinstance(raw.get("text"), str):
                # An authored input file segment carries its content (formats 2); the prompt embeds it.
                block["text"] = raw["text"]
            return block
    return None


def _tool_call(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    tool = raw.get("tool") or raw.get("name") or raw.get("tool_name")
    if not isinstance(tool, str):
        return None
    call: dict[str, Any] = {"tool": tool, "input": raw.get("input"), "output": raw.get("output")}
    if raw.get("id") is not None:
        call["id"] = str(raw["id"])
    if raw.get("status") is not None:
        call["status"] = str(raw["status"])
    call.update({k: raw[k] for k in _TOOL_EXTRAS if raw.get(k) is not None})
    return call


def normalise_message(raw: Any) -> dict[str, Any] | None:
    """An AgentV ``Message`` dict in content-model shape; None when it is not a message at all."""
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        return None
    message: dict[str, Any] = {"role": raw["role"]}
    content = raw.get("content")
    if isinstance(content, str):
        message["content"] = content
    elif isinstance(content, list):
        message["content"] = [b for b in (_block(item) for item in content) if b is not None]
    elif content is not None:
        # extractLastAssistantContent JSON-stringifies any other object; keep it readable the same way.
        message["content"] = json.dumps(content, ensure_ascii=False)
    calls = [c for c in (_tool_call(t) for t in raw.get("tool_calls") or []) if c is not None]
    if calls:
        message["tool_calls"] = calls
    if isinstance(raw.get("name"), str):
        message["name"] = raw["name"]
    message.update({k: raw[k] for k in _MESSAGE_EXTRAS if raw.get(k) is not None})
    try:
        return dump_messages([Message.model_validate(message)])[0]
    except ValidationError as exc:
        raise ValueError(f"message does not fit the content model: {exc.errors()[0]['msg']}") from exc


def normalise_messages(raw: Any) -> list[dict[str, Any]]:
    """A ``Message[]`` (or a bare string answer) as message dicts."""
    if isinstance(raw, str):
        return [{"role": "assistant", "content": raw}]
    if isinstance(raw, list):
        return [m for m in (normalise_message(item) for item in raw) if m is not None]
    return []


def input_messages(raw: Any) -> list[dict[str, Any]]:
    """The row's ``input``: a Message[] or a plain string question."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return normalise_messages(raw) if isinstance(raw, list) else []


def last_assistant_text(messages: list[dict[str, Any]]) -> str:
    """AgentV's candidate answer: the last assistant message's text (files and images ignored)."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return Message.model_validate(message).text()
    return ""


def file_refs(messages: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(path, media_type) of every file block in assistant messages, in order."""
    refs: list[tuple[str, str | None]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        refs.extend((b["path"], b.get("media_type")) for b in content if b.get("type") == "file")
    return refs


class ForeignTranscript(ValueError):
    """A transcript sidecar whose message rows all belong to another target than the result's."""


def read_transcript_jsonl(
    path: Path, test_id: str | None = None, target: str | None = None
) -> list[dict[str, Any]] | None:
    """``agentv.transcript.v1`` rows in message order; None if the file holds no message rows. Rows of
    another test or target are not this result's; a file holding only another target's raises
    :class:`ForeignTranscript` (AgentV 4.42 writes every target of a test to one folder, so the last
    target to finish overwrites the others' files).

    A v5 ``transcript-raw.jsonl`` may instead hold raw provider log lines (``agentv.raw_provider_log_line.v1``);
    those are not messages, and the caller falls back to ``transcript.json``.
    """
    rows: list[tuple[int, int, dict[str, Any]]] = []
    others: set[str] = set()
    for number, row, error in iter_json_lines(path):
        if error is not None or row is None:
            raise ImportFormatError(f"{path}:{number}: {error}")
        if "role" not in row or (test_id is not None and row.get("test_id") not in (None, test_id)):
            continue
        if target is not None and isinstance(row.get("target"), str) and row["target"] != target:
            others.add(row["target"])
            continue
        try:
            message = normalise_message(row)
        except ValueError as exc:
            raise ImportFormatError(f"{path}:{number}: {exc}") from exc
        if message is not None:
            index = row.get("message_index")
            rows.append((index if isinstance(index, int) else number, number, message))
    if not rows and others:
        raise ForeignTranscript(f"{path.name} holds target {', '.join(sorted(others))}'s transcript, not {target}'s")
    if not rows:
        return None
    return [m for _, _, m in sorted(rows, key=lambda r: (r[0], r[1]))]


def _turn_to_message(turn: dict[str, Any]) -> dict[str, Any] | None:
    role = turn.get("type") or turn.get("role")
    raw: dict[str, Any] = {"role": role, "content": [], "tool_calls": []}
    for block in turn.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            result = as_dict(block.get("result"))
            raw["tool_calls"].append(
                {
                    "tool": block.get("name") or block.get("tool_name"),
                    "input": block.get("input"),
                    "output": result.get("output"),
                    "id": block.get("id"),
                    "status": result.get("status"),
                    "duration_ms": result.get("duration_ms"),
                }
            )
        else:
            raw["content"].append(block)
    if turn.get("ts"):
        raw["start_time"] = turn["ts"]
    return normalise_message(raw)


def read_normalized_transcript(path: Path) -> list[dict[str, Any]] | None:
    """``transcript.json`` turns as messages (tool_use blocks become tool calls)."""
    doc = read_json(path)
    turns = doc.get("turns") if isinstance(doc, dict) else None
    if not isinstance(turns, list):
        return None
    try:
        return [m for m in (_turn_to_message(t) for t in turns if isinstance(t, dict)) if m is not None]
    except ValueError as exc:
        raise ImportFormatError(f"{path}: {exc}") from exc


def read_trace(path: Path) -> list[dict[str, Any]] | None:
    """Messages from ``trace.json``: transcript-message span events, else a read model's ``messages``."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        return None
    entries: list[tuple[int, str, Any]] = []
    trace = as_dict(doc.get("trace"))
    for span in trace.get("spans") or []:
        for event in (span.get("events") if isinstance(span, dict) else None) or []:
            if not isinstance(event, dict) or event.get("name") != _TRANSCRIPT_EVENT:
                continue
            attributes = event.get("attributes") or {}
            index = attributes.get(f"{_TRANSCRIPT_EVENT}.index")
            entries.append(
                (
                    index if isinstance(index, int) else len(entries),
                    str(event.get("time_unix_nano") or ""),
                    attributes.get(_TRANSCRIPT_EVENT),
                )
            )
    try:
        if entries:
            entries.sort(key=lambda e: (e[0], e[1].zfill(24)))
            return normalise_messages([e[2] for e in entries])
        if isinstance(doc.get("messages"), list):
            return normalise_messages(doc["messages"])
    except ValueError as exc:
        raise ImportFormatError(f"{path}: {exc}") from exc
    return None
