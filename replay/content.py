"""The content model: messages whose content is a string or a list of text, image and file blocks.

Wire shape follows AgentV (snake_case). A file block never holds bytes: it names a path. Once evalstore
has captured the file, the block also carries ``sha256`` (the blob with the bytes) or ``status`` saying
why no bytes are available (``missing``, ``refused``).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalstore.replay.jsontext import js_number, stringify
from evalstore.replay.jstext import js_trim


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class TextBlock(_Block):
    type: Literal["text"] = "text"
    text: str = ""


class ImageBlock(_Block):
    type: Literal["image"] = "image"
    media_type: str | None = None
    source: str | None = None


class FileBlock(_Block):
    type: Literal["file"] = "file"
    media_type: str | None = None
    path: str
    display_path: str | None = None
    """An input file's path as the eval wrote it (less leading separators), where ``path`` is where it was
    found: what AgentV names the file by in a prompt (``<file path="...">``). None when it is ``path``."""
    sha256: str | None = None
    """Digest of the captured bytes in the blob store, once evalstore has them."""
    status: Literal["stored", "missing", "refused"] | None = None
    reason: str | None = None


Block = Annotated[TextBlock | ImageBlock | FileBlock, Field(discriminator="type")]


Number = Annotated[int | float, Field(union_mode="left_to_right")]
"""A number kept as written (``12`` stays ``12``, not ``12.0``): stored messages and the payloads built from
them keep their bytes."""


class ToolCall(BaseModel):
    """One tool call of an assistant message, as AgentV's ``ToolCall``: what the trace graders
    (``replay/trace.py``) read. Other fields a source gives are kept as they are."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    tool: str
    input: Any = None
    """The arguments."""
    output: Any = None
    """The result."""
    id: str | None = None
    status: str | None = None
    """ok, error, timeout, cancelled or unknown, when the provider says."""
    start_time: str | None = None
    end_time: str | None = None
    duration_ms: Number | None = None


class Message(BaseModel):
    """One message; an assistant message carries the agent's tool calls, timings and token usage."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    role: str
    content: str | list[Block] | None = None
    tool_calls: list[ToolCall] | None = None
    name: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    duration_ms: Number | None = None
    token_usage: dict[str, Any] | None = None
    """Per-message usage (``{input, output, cached?, reasoning?}``), when the provider reports it."""
    metadata: dict[str, Any] | None = None

    def blocks(self) -> list[TextBlock | ImageBlock | FileBlock]:
        if self.content is None:
            return []
        if isinstance(self.content, str):
            return [TextBlock(text=self.content)]
        return list(self.content)

    def text(self) -> str:
        """Text blocks joined by newlines; images and files ignored (AgentV's getTextContent)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(b.text for b in self.blocks() if isinstance(b, TextBlock))


def render_object(value: Any) -> str:
    """Object-valued input (or content) as the formatted JSON text targets and graders see: as AgentV's
    ``JSON.stringify(value, null, 2)`` writes it (``1`` for ``1.0``)."""
    return stringify(js_number(value), indent=True).decode("utf-8")


_TEST_ROLES = ("system", "user", "assistant", "tool")


def expected_messages(value: Any) -> list[dict[str, Any]]:
    """A test's ``expected_output`` as AgentV 4.42 reads it (``expandExpectedOutputShorthand`` then
    ``processExpectedMessages``): a string or any other value is one assistant message; in a list that
    starts with a message, only the messages count; a content list keeps its objects and its non-empty
    strings (as text segments); a number or a boolean is no reference at all."""
    if isinstance(value, Message):
        value = dump_messages([value])
    elif isinstance(value, list) and value and all(isinstance(m, Message) for m in value):
        value = dump_messages(value)
    if value is None or isinstance(value, (bool, int, float)):
        return []
    if isinstance(value, str) or (isinstance(value, dict) and "role" not in value):
        messages = [{"role": "assistant", "content": value}]
    elif isinstance(value, dict):
        messages = [value] if is_test_message(value) else []
    elif value and isinstance(value[0], dict) and "role" in value[0]:
        messages = [m for m in value if is_test_message(m)]
    else:
        messages = [{"role": "assistant", "content": value}]
    return [_expected_segment(m) for m in messages]


def is_test_message(value: Any) -> bool:
    """Whether a value is one message of a test as AgentV reads them (a role and content, or tool calls)."""
    if not isinstance(value, dict) or value.get("role") not in _TEST_ROLES:
        return False
    content = value.get("content")
    return (
        isinstance(content, (str, dict))
        or (isinstance(content, list) and all(isinstance(c, (str, dict)) for c in content))
        or (isinstance(value.get("tool_calls"), list) and bool(value["tool_calls"]))
    )


def _expected_segment(message: dict[str, Any]) -> dict[str, Any]:
    segment: dict[str, Any] = {"role": message["role"]}
    if message.get("name"):
        segment["name"] = message["name"]
    content = message.get("content")
    if isinstance(content, str | dict):
        segment["content"] = content
    elif isinstance(content, list):
        segment["content"] = [
            {"type": "text", "value": c} if isinstance(c, str) else c
            for c in content
            if isinstance(c, dict) or (isinstance(c, str) and c)
        ]
    if isinstance(message.get("tool_calls"), list):
        segment["tool_calls"] = message["tool_calls"]
    return segment


def dump_messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


# Canonical JSON's encoder (store/codec.py) but for sort_keys, built once.
_KEY_ORDER_KEPT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def messages_json(messages: list[dict[str, Any]]) -> bytes:
    """A transcript's messages (``dump_messages``, or a source's message dicts) as the bytes of its blob
    (``TranscriptRecorded.messages_sha256``), for a run and every import alike: compact JSON as canonical JSON
    writes it, but with every object's keys in their own order, not sorted. What the agent gave keeps its
    order: a tool call's ``input`` and ``output``, a message's ``metadata``, which AgentV reads in that order
    (``{{tool_calls}}`` shows a call's first string input of a tool it knows no key field of; a code grader is
    given them as ``JSON.stringify`` writes them). A transcript stored before this (sorted keys) reads back
    sorted. A non-finite float is refused (``ValueError``), as canonical JSON refuses it."""
    return _KEY_ORDER_KEPT.encode(messages).encode("utf-8")


def candidate_message(messages: list[Message]) -> Message | None:
    """The last assistant message that has content (AgentV's ``extractLastAssistantContent``)."""
    for message in reversed(messages):
        if message.role == "assistant" and message.content is not None:
            return message
    return None


def candidate_text(messages: list[Message]) -> str:
    """That message's text, '' when there is none: the answer a provider reports (``extractLastAssistantContent``)."""
    message = candidate_message(messages)
    return message.text() if message is not None else ""


def last_assistant(messages: list[Message]) -> Message | None:
    for message in reversed(messages):
        if message.role == "assistant":
            return message
    return None


def file_blocks(messages: list[Message]) -> list[FileBlock]:
    """Every file block in the assistant messages, in order."""
    # A message whose content is a string holds no file (and building its text block would be wasted).
    return [
        b
        for m in messages
        if m.role == "assistant" and isinstance(m.content, list)
        for b in m.content
        if isinstance(b, FileBlock)
    ]


def question_text(messages: list[Message], base_dir: str | None = None, *, file_refs: bool = False) -> str:
    """The input messages as one prompt text, the way AgentV renders a test's question.

    One message with content (and no assistant/tool turn) gives its segments trimmed and joined by
    blank lines; otherwise each message becomes an ``@[Role]:`` block. A file block is embedded as
    ``<file path="...">text</file>``: its ``text`` if the parser kept one, else the file read from
    ``path`` (relative paths against ``base_dir``); a file that cannot be read is left out, as AgentV
    does. ``file_refs`` (an agent target, which reads files itself): a file block is ``<file: path="...">``.
    """
    segments = [_prompt_segments(m, base_dir, file_refs) for m in messages]
    with_content = sum(1 for s in segments if any(js_trim(part) for part in s))
    multi_turn = any(m.role in ("assistant", "tool") for m in messages) or with_content > 1
    if not multi_turn:
        return "\n\n".join(js_trim(p) for s in segments for p in s if js_trim(p))
    parts = []
    for message, segs in zip(messages, segments):
        # A message shows when something in it is visible; then every non-empty part shows, blank ones too.
        if any(js_trim(p) for p in segs):
            shown = [p for p in segs if p]
            parts.append(f"@[{message.role[:1].upper()}{message.role[1:]}]:\n" + "\n".join(shown))
    return "\n\n".join(parts)


def chat_prompt(messages: list[Message], base_dir: str | None = None) -> list[dict[str, str]] | None:
    """The input messages as chat messages, the way AgentV 4.42.4 sends them to a model target
    (``buildChatPromptFromSegments``), or None when it sends the flat :func:`question_text` instead (one
    message with content and no assistant/tool turn). The leading system messages become one system message
    (their parts joined by a newline, the messages by a blank line, nothing trimmed); a later system or tool
    message becomes an assistant message starting ``@[System]:``/``@[Tool]:``; a message with nothing to show
    is left out."""
    segments = [_prompt_segments(m, base_dir) for m in messages]
    with_content = sum(1 for s in segments if any(js_trim(part) for part in s))
    if not messages or not (any(m.role in ("assistant", "tool") for m in messages) or with_content > 1):
        return None
    start, system = 0, []
    while start < len(messages) and messages[start].role == "system":
        shown = [p for p in segments[start] if p]
        if shown:
            system.append("\n".join(shown))
        start += 1
    out = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    for message, segs in zip(messages[start:], segments[start:]):
        role, parts = message.role, [p for p in segs if p]
        if role in ("system", "tool"):
            role, parts = "assistant", [f"@[{message.role[:1].upper()}{message.role[1:]}]:", *parts]
        if parts:
            out.append({"role": role, "content": "\n".join(parts)})
    return out or None


def system_message(messages: list[Message], base_dir: str | None = None) -> str | None:
    """The leading system messages' text (AgentV's ``extractSystemMessage``), None when there are none."""
    parts = []
    for message in messages:
        if message.role != "system":
            break
        shown = [p for p in _prompt_segments(message, base_dir) if p]
        if shown:
            parts.append("\n".join(shown))
    return "\n\n".join(parts) if parts else None


def _prompt_segments(message: Message, base_dir: str | None, file_refs: bool = False) -> list[str]:
    out: list[str] = []
    for block in message.blocks():
        if isinstance(block, TextBlock):
            out.append(block.text)
        elif isinstance(block, FileBlock) and file_refs:
            out.append(f'<file: path="{block.path}">')
        elif isinstance(block, FileBlock):
            text = getattr(block, "text", None)
            if not isinstance(text, str):
                text = _read_text(block.path, base_dir)
            if text is not None and text.strip():
                out.append(f'<file path="{block.display_path or block.path}">\n{text.strip()}\n</file>')
    return out


def _read_text(path: str, base_dir: str | None) -> str | None:
    full = path if os.path.isabs(path) or base_dir is None else os.path.join(base_dir, path)
    try:
        with open(full, encoding="utf-8") as handle:
            return handle.read().replace("\r\n", "\n")
    except (OSError, UnicodeDecodeError):
        return None
