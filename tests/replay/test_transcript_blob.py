"""The transcript blob (``content.messages_json``): every object's keys in their own order, as the agent gave
them, where canonical JSON sorts them; otherwise the bytes canonical JSON writes."""

from __future__ import annotations

import json

import pytest

from evalstore.replay.content import Message, dump_messages, messages_json
from evalstore.replay.grading.judge.templates import render_tool_calls
from evalstore.store.codec import canonical_json

CALL = {
    "tool": "search",
    "input": {"zeta": "FIRST-KEY", "alpha": "second-key", "nested": {"b": 1, "a": [{"y": 2, "x": 1}]}},
    "output": {"zeta": "first result", "alpha": "second result"},
    "id": "call-1",
}
MESSAGES = [
    Message.model_validate(
        {"role": "assistant", "content": "", "tool_calls": [CALL], "metadata": {"zeta": "z", "alpha": "a"}}
    ),
    Message(role="assistant", content="done, ünïcode kept"),
]


def test_keys_keep_their_own_order_and_read_back_so() -> None:
    data = messages_json(dump_messages(MESSAGES))
    text = data.decode("utf-8")
    assert '"input":{"zeta":"FIRST-KEY","alpha":"second-key","nested":{"b":1,"a":[{"y":2,"x":1}]}}' in text
    assert '"output":{"zeta":"first result","alpha":"second result"}' in text
    assert '"metadata":{"zeta":"z","alpha":"a"}' in text and "ünïcode" in text
    back = [Message.model_validate(m) for m in json.loads(data)]
    assert dump_messages(back) == dump_messages(MESSAGES)
    assert render_tool_calls(back) == "- search: FIRST-KEY"  # AgentV's first string input, in the input's order
    # The same value as canonical JSON (sorted keys: what a transcript stored before holds) reads back sorted.
    sorted_back = [Message.model_validate(m) for m in json.loads(canonical_json(dump_messages(MESSAGES)))]
    assert render_tool_calls(sorted_back) == "- search: second-key"


def test_sorted_keys_give_canonical_json_bytes() -> None:
    """Only the order differs: a value whose keys are sorted already is written as canonical JSON writes it."""
    value = json.loads(canonical_json(dump_messages(MESSAGES)))
    assert messages_json(value) == canonical_json(value).encode("utf-8")


def test_a_non_finite_number_is_refused_as_canonical_json_refuses_it() -> None:
    with pytest.raises(ValueError):
        messages_json([{"role": "assistant", "tool_calls": [{"tool": "t", "input": {"x": float("nan")}}]}])
