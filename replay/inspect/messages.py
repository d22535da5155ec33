"""An Inspect AI sample's messages as the content model (``replay/content.py``) graders read.

Text and image content become blocks; other content (reasoning, audio, video, documents, data) is
kept in the message's ``metadata.inspect_content``, as the source wrote it. An assistant's tool calls
become the content model's tool calls, each with the result of the tool message that answers it.
Attachment references (``attachment://ID``) are resolved here, for graders; the stored sample record
keeps them as references.
"""

from __future__ import annotations

from typing import Any

ATTACHMENT = "attachment://"


def resolved(value: Any, attachments: dict[str, str]) -> Any:
    """``value`` with every ``attachment://ID`` string replaced by the attachment's content."""
    if isinstance(value, str):
        if value.startswith(ATTACHMENT):
            return attachments.get(value[len(ATTACHMENT) :], value)
        return value
    if isinstance(value, list):
        return [resolved(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: resolved(v, attachments) for k, v in value.items()}
    return value


def text_of(content: Any) -> str:
    """A message's text: its text blocks joined by newlines (Inspect's ``ChatMessage.text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text")
    return ""


def content_messages(messages: list[dict[str, Any]], attachments: dict[str, str]) -> list[dict[str, Any]]:
    """Inspect ``ChatMessage`` dicts as content-model message dicts."""
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for raw in messages:
        m = resolved(raw, attachments)
        role = m.get("role", "user")
        msg: dict[str, Any] = {"role": role}
        meta: dict[str, Any] = {}
        content = m.get("content")
        if isinstance(content, list):
            blocks: list[dict[str, Any]] = []
            other = []
            for c in content:
                kind = c.get("type") if isinstance(c, dict) else None
                if kind == "text":
                    blocks.append({"type": "text", "text": c.get("text", "")})
                elif kind == "image":
                    blocks.append({"type": "image", "source": c.get("image")})
                else:
                    other.append(c)
            msg["content"] = blocks
            if other:
                meta["inspect_content"] = other
        else:
            msg["content"] = content if isinstance(content, str) else ""
        for call in m.get("tool_calls") or []:
            entry = {"tool": call.get("function"), "input": call.get("arguments"), "id": call.get("id")}
            calls[str(call.get("id"))] = entry
            msg.setdefault("tool_calls", []).append(entry)
        if role == "tool":
            if m.get("function"):
                msg["name"] = m["function"]
            answered = calls.get(str(m.get("tool_call_id")))
            if answered is not None:
                answered["output"] = text_of(content)
                answered["status"] = "error" if m.get("error") else "ok"
            meta["tool_call_id"] = m.get("tool_call_id")
            if m.get("error"):
                meta["error"] = m["error"]
        for key in ("id", "source", "model"):
            if m.get(key) is not None:
                meta[key] = m[key]
        if m.get("metadata"):
            meta["metadata"] = m["metadata"]
        if meta:
            msg["metadata"] = meta
        out.append(msg)
    return out
