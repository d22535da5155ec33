"""Judge prompts as role blocks and a line diff (``replay/analysis/prompts.py``), for every shape stored."""

from __future__ import annotations

import json

from evalstore.replay.analysis.prompts import PromptMessage, prompt_diff, prompt_messages, prompt_text

MESSAGES = [
    {"role": "system", "content": 'Reply with JSON.\n{\n  "score": 0}'},
    {"role": "user", "content": "Grade it."},
]


def test_every_stored_shape_reads_as_role_blocks() -> None:
    expected = [PromptMessage("system", 'Reply with JSON.\n{\n  "score": 0}'), PromptMessage("user", "Grade it.")]
    assert prompt_messages(json.dumps(MESSAGES, separators=(",", ":"))) == expected  # the request blob
    assert prompt_messages(MESSAGES) == expected
    assert prompt_messages({"model": "m", "messages": MESSAGES}) == expected
    agentv = {"userPrompt": "Grade it.", "systemPrompt": 'Reply with JSON.\n{\n  "score": 0}'}  # an import's
    assert prompt_messages(agentv) == expected
    blocks = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert prompt_messages(blocks) == [PromptMessage("user", "a\nb")]
    # A code grader's request has no messages: shown as it is.
    assert prompt_messages({"command": ["python3", "g.py"], "cwd": "/x"}) is None
    assert prompt_messages("not json") is None
    assert prompt_text("not json") == "not json"
    assert prompt_text(MESSAGES) == '--- system ---\nReply with JSON.\n{\n  "score": 0}\n--- user ---\nGrade it.'


def test_a_line_diff_of_two_prompts() -> None:
    b = [MESSAGES[0], {"role": "user", "content": "Grade it strictly."}]
    diff = prompt_diff(MESSAGES, b)
    assert [(d.op, d.text) for d in diff if d.op in "+-"] == [("-", "Grade it."), ("+", "Grade it strictly.")]
    assert diff[0].op == "@" and ("  ", "--- user ---") not in [(d.op, d.text) for d in diff]
    assert any(d.op == " " and d.text == "--- user ---" for d in diff)  # context, not a header
    assert prompt_diff(MESSAGES, json.dumps(MESSAGES)) == []  # the same prompt, whatever its encoding
