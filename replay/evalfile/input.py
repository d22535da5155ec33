"""Test input as messages: a string, a list of messages, or an object (agentv-formats.md §2, §7.1).

Authored content segments use ``value`` (``{type: file, value: ./a.md}``); they become the content
model's blocks. An object input is one user message holding the object as formatted JSON, which is
what ``{{input}}`` renders and what the target is sent (the content model holds text, not objects).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evalstore.replay.content import FileBlock, ImageBlock, Message, TextBlock, render_object
from evalstore.replay.evalfile.fields import ParseContext, expect_mapping, str_list, warn_unknown
from evalstore.replay.evalfile.source import Where

MESSAGE_KEYS = ("role", "content", "tool_calls", "name")
SEGMENT_TYPES = ("text", "file", "image")


def parse_input(raw: Any, where: Where, ctx: ParseContext) -> list[Message]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [Message(role="user", content=raw)]
    if isinstance(raw, list):
        return [_message(item, where.index(i), ctx) for i, item in enumerate(raw)]
    if isinstance(raw, dict):
        if "role" in raw:
            return [_message(raw, where, ctx)]
        return [Message(role="user", content=render_object(raw))]
    raise where.error("expected a string, a list of {role, content} messages, or an object")


def _message(raw: Any, where: Where, ctx: ParseContext) -> Message:
    obj = expect_mapping(raw, where, "a message {role, content}")
    warn_unknown(ctx, obj, MESSAGE_KEYS, where)
    role = obj.get("role")
    if not isinstance(role, str) or not role.strip():
        raise where.error("`role` is required (user, assistant or system)")
    content = obj.get("content")
    if isinstance(content, list):
        content = [_segment(seg, where.key("content").index(i), ctx) for i, seg in enumerate(content)]
    elif isinstance(content, dict):
        content = render_object(content)
    elif content is not None and not isinstance(content, str):
        content = str(content)
    try:
        return Message(role=role, content=content, tool_calls=obj.get("tool_calls"), name=obj.get("name"))
    except ValidationError as exc:
        problem = exc.errors()[0]
        loc = ".".join(str(p) for p in problem["loc"])
        raise where.error(f"invalid message ({loc}: {problem['msg']})") from None


def _segment(raw: Any, where: Where, ctx: ParseContext) -> TextBlock | FileBlock | ImageBlock:
    if isinstance(raw, str):
        return TextBlock(text=raw)
    obj = expect_mapping(raw, where, "a content segment {type, value}")
    kind = obj.get("type")
    if kind not in SEGMENT_TYPES:
        raise where.key("type").error(f"segment type must be one of {', '.join(SEGMENT_TYPES)}")
    value = obj.get("value", obj.get({"text": "text", "file": "path", "image": "source"}[kind]))
    if not isinstance(value, str):
        raise where.key("value").error(f"a `{kind}` segment needs a string `value`")
    media_type = obj.get("media_type")
    if kind == "text":
        return TextBlock(text=value)
    if kind == "image":
        return ImageBlock(source=value, media_type=media_type)
    return file_block(value, input_file(value, where.key("value"), ctx), media_type)


def file_block(written: str, found: str, media_type: str | None = None) -> FileBlock:
    """An input file's block: where it was found, and the path as written, which AgentV shows in prompts
    (``resolveFileReference``'s ``displayPath``: leading separators removed)."""
    shown = written.lstrip("/\\") or written
    return FileBlock(path=found, display_path=shown if shown != found else None, media_type=media_type)


def input_file(ref: str, where: Where, ctx: ParseContext) -> str:
    """An input file's absolute path through the search roots; as written (with a warning) if absent,
    since the target may create or fetch it."""
    found = ctx.find(ref)
    if found is None:
        ctx.warn(where, f"input file `{ref}` not found in the search roots; passed on as written")
        return ref
    ctx.reference("input_file", found, ref)
    return str(found)


def input_files(raw: Any, where: Where, ctx: ParseContext) -> list[str]:
    if raw is None:
        return []
    return [input_file(ref, where.index(i), ctx) for i, ref in enumerate(str_list(raw, where))]


def with_files(messages: list[Message], files: list[str], written: list[str] | None = None) -> list[Message]:
    """``input_files`` shorthand: file blocks placed before the first user message's content (``written``:
    each file's path as the eval wrote it)."""
    if not files:
        return messages
    blocks: list[Any] = [file_block(shown, path) for path, shown in zip(files, written or files, strict=True)]
    for i, message in enumerate(messages):
        if message.role == "user":
            updated = message.model_copy(update={"content": blocks + message.blocks()})
            return [*messages[:i], updated, *messages[i + 1 :]]
    return [Message(role="user", content=blocks), *messages]


def expected_files(value: Any, where: Where, ctx: ParseContext) -> Any:
    """``expected_output`` with its file segments read as AgentV 4.42.4 reads them
    (``processExpectedMessages``): ``{type: file, value}`` becomes ``{type, path, text, resolvedPath}``, the
    path as written less leading separators, the text with CRLF as LF, the absolute path it was found at;
    a file not found is left out with a warning. The judge's ``reference_answer`` and a code grader's
    ``expected_output`` then hold the file's text."""
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return {**value, "content": _expected_segments(value["content"], where.key("content"), ctx)}
    if not isinstance(value, list):
        return value
    if value and isinstance(value[0], dict) and "role" in value[0]:  # messages
        return [expected_files(m, where.index(i), ctx) if isinstance(m, dict) else m for i, m in enumerate(value)]
    return _expected_segments(value, where, ctx)  # one message's content, the shorthand


def _expected_segments(content: list[Any], where: Where, ctx: ParseContext) -> list[Any]:
    out: list[Any] = []
    for i, segment in enumerate(content):
        if not (isinstance(segment, dict) and segment.get("type") == "file" and isinstance(segment.get("value"), str)):
            out.append(segment)
            continue
        ref = segment["value"]
        if not ref:
            continue
        shown = ref.lstrip("/\\") or ref  # AgentV looks for an absolute path, then for it under each root
        found = (ctx.find(ref) if ref != shown else None) or ctx.find(shown)
        if found is None:
            ctx.warn(where.index(i), f"expected_output file `{ref}` not found in the search roots; left out")
            continue
        ctx.reference("expected_file", found, ref)
        text = ctx.read_text(found, where.index(i)).replace("\r\n", "\n")
        out.append({"type": "file", "path": shown, "text": text, "resolvedPath": str(found)})
    return out
