"""Judge prompts as people read them: the messages of a recorded request as role blocks of text, and a
line diff of two prompts (the same grader in two runs).

A prompt arrives in one of the shapes the store keeps: evalstore's judge request (a JSON list of chat
messages, or a request object holding ``messages``), or AgentV's rendered grader prompt of an imported
result (``{systemPrompt, userPrompt}``). Anything else (a code grader's ``{command, cwd}``) has no
messages and is shown as it is.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

AGENTV_ROLES = (
    ("systemPrompt", "system"),
    ("system_prompt", "system"),
    ("userPrompt", "user"),
    ("user_prompt", "user"),
)
"""AgentV's ``graderRawRequest`` fields (camelCase in v4 rows, snake_case after a key rewrite), as roles."""


@dataclass(frozen=True)
class PromptMessage:
    role: str
    text: str


def prompt_messages(prompt: Any) -> list[PromptMessage] | None:
    """The messages of a recorded prompt (a request's JSON text or its parsed value), None when it holds
    none (then it is shown as it is)."""
    if isinstance(prompt, (str, bytes)):
        try:
            prompt = json.loads(prompt)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    if isinstance(prompt, dict) and isinstance(prompt.get("messages"), list):
        prompt = prompt["messages"]
    if isinstance(prompt, dict):
        found = [PromptMessage(role, _text(prompt[key])) for key, role in AGENTV_ROLES if prompt.get(key)]
        return found or None
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m for m in prompt):
        return [PromptMessage(str(m["role"]), _text(m.get("content"))) for m in prompt]
    return None


def _text(content: Any) -> str:
    """A message's content as text: a string as it is, content blocks' text joined, anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        parts = [b["text"] if isinstance(b.get("text"), str) else json.dumps(b, ensure_ascii=False) for b in content]
        return "\n".join(parts)
    return json.dumps(content, indent=2, ensure_ascii=False)


def prompt_text(prompt: Any) -> str:
    """A prompt as one text: each message under a ``--- role ---`` line (as ``audit --show-prompt``
    prints it), or the value itself when it has no messages."""
    messages = prompt_messages(prompt)
    if messages is None:
        if isinstance(prompt, bytes):
            return prompt.decode("utf-8", errors="replace")
        return prompt if isinstance(prompt, str) else json.dumps(prompt, indent=2, ensure_ascii=False)
    return "\n".join(f"--- {m.role} ---\n{m.text}" for m in messages)


@dataclass(frozen=True)
class DiffLine:
    op: str
    """``" "`` the same in both, ``"-"`` only in A, ``"+"`` only in B, ``"@"`` a hunk header."""
    text: str


def prompt_diff(a: Any, b: Any, *, context: int = 3) -> list[DiffLine]:
    """A line diff of prompt A against prompt B (unified, ``context`` lines around each change); empty
    when they are the same text."""
    lines_a, lines_b = prompt_text(a).splitlines(), prompt_text(b).splitlines()
    if lines_a == lines_b:
        return []
    out = []
    for line in list(difflib.unified_diff(lines_a, lines_b, "A", "B", n=context, lineterm=""))[
        2:
    ]:  # not the file header
        op = "@" if line.startswith("@@") else line[:1]
        out.append(DiffLine(op, line if op == "@" else line[1:]))
    return out
