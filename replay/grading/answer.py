"""The candidate answer's text layout, as AgentV builds it (content-preprocessor.ts, providers/types.ts).

Kept apart from preprocessing so the rules for *how the answer reads* -- which message, file headers,
warning lines, trimming -- are written once, whoever produces the parts.
"""

from __future__ import annotations

from evalstore.replay.content import Message, candidate_text
from evalstore.replay.jstext import js_trim


def text_answer(messages: list[Message], output_text: str | None) -> str:
    """The answer as AgentV's graders other than LLM graders see it (``candidate``): the text the source
    recorded as the output, else the text blocks of the last assistant message with content; files are
    not part of it."""
    return output_text if output_text is not None else candidate_text(messages)


def file_part(path: str, text: str) -> str:
    """A file's text as it appears in the answer, under a header naming the path the agent gave."""
    return f"[[ file: {path} ]]\n{text}"


def warning_line(path: str, media_type: str | None, reason: str) -> str:
    return f"[file preprocessing warning] {path} ({media_type or 'unknown'}): {reason}"


def assemble(parts: list[str], warnings: list[str]) -> str:
    """Parts joined by newlines, then one line per warning, untrimmed: AgentV's candidate answer
    (``extractTextWithPreprocessors`` + ``appendPreprocessingWarnings``). Only ``{{output}}`` is trimmed."""
    body = "\n".join(parts)
    return "\n".join(p for p in [body, *warnings] if p)


def file_text(text: str) -> str:
    """A file read as UTF-8 as graders see it: LF line endings, nothing trimmed (AgentV's default read)."""
    return text.replace("\r\n", "\n")


def converter_text(stdout: str) -> str:
    """A converter's output as graders see it: trimmed as AgentV trims it (``stdout.trim()``)."""
    return js_trim(stdout)


def one_line(text: str, limit: int = 500) -> str:
    """A reason fit for one warning line: whitespace collapsed, the end kept when too long."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "..." + flat[-limit:]
