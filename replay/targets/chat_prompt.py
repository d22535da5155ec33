"""The chat prompt AgentV 4.42.4 sends a language-model provider, built from a test's input as
``formatting/prompt-builder.ts`` (``buildPromptInputs``, ``lm`` mode) and ``llm-providers.ts``
(``buildChatPrompt``) build it.

A test with one message that has content is asked as its question alone (trimmed) after a system
prompt: the test's leading system messages, else AgentV's default. Otherwise (a conversation, or several
messages with content) every message is a turn of its own: leading system messages joined into the
system prompt, a later system or tool message an assistant turn prefixed ``@[System]:``/``@[Tool]:``,
each turn's segments joined by a newline, untrimmed.
"""

from __future__ import annotations

from evalstore.replay.content import Message, _prompt_segments, question_text
from evalstore.replay.jstext import js_trim
from evalstore.replay.piai.wire import DEFAULT_SYSTEM_PROMPT


def chat_prompt(messages: list[Message], base_dir: str | None) -> list[dict[str, str]]:
    """``buildChatPrompt(request)``: ``{role, content}`` turns, a system turn first."""
    segments = [[p for p in _prompt_segments(m, base_dir) if p] for m in messages]
    visible = [any(js_trim(p) for p in s) for s in segments]
    role_markers = any(m.role in ("assistant", "tool") for m in messages) or sum(visible) > 1
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    system_parts = ["\n".join(segments[i]) for i in range(leading) if segments[i]]
    system_message = "\n\n".join(system_parts) if system_parts else None
    if not role_markers:
        question = js_trim(question_text(messages, base_dir=base_dir))
        return [{"role": "system", "content": _system(system_message)}, {"role": "user", "content": question}]
    chat: list[dict[str, str]] = []
    if system_parts:
        chat.append({"role": "system", "content": "\n\n".join(system_parts)})
    for message, parts in zip(messages[leading:], segments[leading:]):
        role = message.role
        if role in ("system", "tool"):
            parts = [f"@[{role[:1].upper()}{role[1:]}]:", *parts]
            role = "assistant"
        if parts:
            chat.append({"role": role, "content": "\n".join(parts)})
    if not chat:  # nothing to send but blank messages: the question, as in the single-turn case
        question = js_trim(question_text(messages, base_dir=base_dir))
        return [{"role": "system", "content": _system(system_message)}, {"role": "user", "content": question}]
    if any(turn["role"] == "system" for turn in chat):
        return chat
    return [{"role": "system", "content": _system(system_message)}, *chat]


def _system(system_message: str | None) -> str:
    """``resolveSystemContent``: the test's system message, trimmed, else the default."""
    if system_message is not None and js_trim(system_message):
        return js_trim(system_message)
    return DEFAULT_SYSTEM_PROMPT
