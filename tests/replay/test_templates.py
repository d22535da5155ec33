"""Template variables, prompt choice and judge-reply parsing, without a judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstore.replay.content import Message, ToolCall, render_object
from evalstore.replay.errors import PromptTemplateError
from evalstore.replay.evalfile.specs import LlmGraderSpec, RubricItem
from evalstore.replay.grading.graders.base import reads_files_itself
from evalstore.replay.grading.judge.parsing import JudgeParseError, extract_json
from evalstore.replay.grading.judge.templates import (
    choose_prompt,
    render,
    render_expected,
    render_input,
    render_tool_calls,
    rubric_line,
    template_variables,
)


def test_render_substitutes_known_variables_with_inner_whitespace_and_reports_unknown_once():
    text, warnings = render("a={{ output }} b={{output}} c={{  nope }} d={{nope}} e={{ other_1 }}", {"output": "X"})
    assert text == "a=X b=X c={{  nope }} d={{nope}} e={{ other_1 }}"
    assert len(warnings) == 2
    assert warnings[0].startswith("prompt template: unknown variable {{nope}} left as written")
    assert "{{other_1}}" in warnings[1]


def test_substituted_values_are_not_rendered_again():
    text, warnings = render("{{output}}", {"output": "literal {{criteria}} and {{nope}}", "criteria": "C"})
    assert text == "literal {{criteria}} and {{nope}}"
    assert warnings == []


def test_object_input_renders_as_formatted_json():
    messages = [Message(role="user", content=render_object({"company": "Apple", "ticker": "AAPL"}))]
    assert render_input(messages) == '{\n  "company": "Apple",\n  "ticker": "AAPL"\n}'


def test_single_turn_input_joins_segments_and_conversation_uses_role_blocks(tmp_path: Path):
    (tmp_path / "a.md").write_text("# Notes\n", encoding="utf-8")
    single = [Message(role="user", content=[{"type": "text", "text": "Read this"}, {"type": "file", "path": "a.md"}])]
    assert render_input(single, str(tmp_path)) == 'Read this\n\n<file path="a.md">\n# Notes\n</file>'
    conversation = [
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello, what do you need?"),
        Message(role="user", content="Fix the bug"),
    ]
    assert (
        render_input(conversation) == "@[User]:\nHi\n\n@[Assistant]:\nHello, what do you need?\n\n@[User]:\nFix the bug"
    )
    # An agent target reads files itself: AgentV names the file instead (formatSegment in "agent" mode).
    assert render_input(single, str(tmp_path), file_refs=True) == 'Read this\n\n<file: path="a.md">'
    assert reads_files_itself("cli") and reads_files_itself("claude-cli")
    assert not reads_files_itself("openai") and not reads_files_itself(None)
    # A message with something visible keeps its blank parts, as AgentV's buildPromptInputs keeps them.
    parts = [{"type": "text", "text": t} for t in ("hello", "   ", "world")]
    spaced = [Message(role="user", content=parts), Message(role="assistant", content="   ")]
    assert (
        render_input([*spaced, Message(role="user", content="next")]) == "@[User]:\nhello\n   \nworld\n\n@[User]:\nnext"
    )


@pytest.mark.parametrize(
    ("expected", "rendered"),
    [
        (None, ""),
        ("  42\n", "42"),
        ([{"role": "assistant", "content": "first"}, {"role": "assistant", "content": " last "}], "last"),
        ([{"role": "assistant", "content": {"answer": 42}}], '{\n  "answer": 42\n}'),
        (
            [{"role": "assistant", "tool_calls": [{"tool": "Read", "input": {"file_path": "x"}}]}],
            '[\n  {\n    "tool": "Read",\n    "input": {\n      "file_path": "x"\n    }\n  }\n]',
        ),
        ({"total": 3}, '{\n  "total": 3\n}'),
        # As AgentV's expandExpectedOutputShorthand and processExpectedMessages read them:
        (42, ""),  # a number is no reference
        ([{"role": "assistant", "content": "first"}, "stray", {"no": "role"}], "first"),  # only messages count
        ([{"role": "assistant", "content": 42}], ""),  # not a message: nothing left
        ([1, "a", {"b": 2}], '[\n  {\n    "type": "text",\n    "value": "a"\n  },\n  {\n    "b": 2\n  }\n]'),
        ([{"role": "assistant", "content": ["x", ""]}], '[\n  {\n    "type": "text",\n    "value": "x"\n  }\n]'),
    ],
)
def test_expected_output_uses_the_last_expected_message(expected, rendered):
    assert render_expected(expected) == rendered


def test_tool_calls_name_the_key_field_of_each_call():
    messages = [
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(tool="Read", input={"file_path": "src/app.py", "limit": 10}),
                ToolCall(tool="Bash", input={"command": "pytest -q"}),
                ToolCall(tool="search", input={"n": 3, "query": "quicksort"}),
                ToolCall(tool="Noop"),
            ],
        )
    ]
    assert render_tool_calls(messages) == "- Read: src/app.py\n- Bash: pytest -q\n- search: quicksort\n- Noop"


def test_tool_call_details_are_measured_in_utf16_units_and_lists_are_read_for_their_values():
    """AgentV's extractKeyDetail: 120 UTF-16 units, so 70 emoji are cut to 60; a list input's values count."""
    emoji = "😀" * 70
    messages = [
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(tool="Read", input={"file_path": emoji}),
                ToolCall(tool="Other", input={"long": "é😀" * 45, "short": "fine"}),  # 135 units: not a fallback
                ToolCall(tool="ArrTool", input=["first string", "second"]),
            ],
        )
    ]
    assert render_tool_calls(messages).splitlines() == [
        f"- Read: {'😀' * 60}…",
        "- Other: fine",
        "- ArrTool: first string",
    ]


def test_rubric_items_render_with_agentvs_keys_in_agentvs_order():
    """parseRubricItems: a checklist item ``id, outcome, operator, weight, required, min_score,
    required_min_score``; a score-range item ``id, weight, outcome?, operator?, required? (as written),
    min_score?, required_min_score?, score_ranges``."""
    ranges = [{"score_range": [0, 6], "outcome": "weak"}, {"score_range": [7, 10], "outcome": "strong"}]
    variables = template_variables(
        input_messages=[],
        output="",
        expected_output=None,
        criteria=None,
        metadata={},
        rubrics=[
            RubricItem(id="a", outcome="Cites", operator="correctness", min_score=0.75),
            RubricItem(id="b", outcome="", score_ranges=ranges, required=True, required_written=True),
            RubricItem(id="c", outcome="Clear", score_ranges=ranges, operator="contradiction", min_score=0.5),
        ],
        file_changes=None,
        transcript_messages=[],
    )
    rendered = json.loads(variables["rubrics_json"])
    assert [list(item) for item in rendered] == [
        ["id", "outcome", "operator", "weight", "required", "min_score", "required_min_score"],
        ["id", "weight", "required", "score_ranges"],
        ["id", "weight", "outcome", "operator", "min_score", "required_min_score", "score_ranges"],
    ]
    assert (rendered[0]["required_min_score"], rendered[2]["required_min_score"]) == (8, 5)  # Math.round(x * 10)


def test_missing_values_render_empty_and_structured_values_as_json():
    variables = template_variables(
        input_messages=[],
        output="  answer  ",
        expected_output=None,
        criteria=None,
        metadata={},
        rubrics=[],
        file_changes=None,
        transcript_messages=[],
    )
    assert variables == {
        "input": "",
        "output": "answer",
        "expected_output": "",
        "criteria": "",
        "metadata": "",
        "metadata_json": "",
        "rubrics": "",
        "rubrics_json": "",
        "file_changes": "",
        "tool_calls": "",
        "error": "",
    }
    variables = template_variables(
        input_messages=[],
        output="",
        expected_output=None,
        criteria=None,
        metadata={"team": "x", "tags": ["a", "b"]},
        rubrics=[RubricItem(id="r1", outcome="Uses the ticker.", operator="correctness")],
        file_changes=None,
        transcript_messages=[],
    )
    assert variables["metadata_json"] == '{"team":"x","tags":["a","b"]}'
    assert variables["metadata"] == '{\n  "team": "x",\n  "tags": [\n    "a",\n    "b"\n  ]\n}'
    assert variables["rubrics_json"] == (
        '[{"id":"r1","outcome":"Uses the ticker.","operator":"correctness","weight":1,"required":true}]'
    )


def test_structured_values_are_written_as_json_stringify_writes_them():
    """Numbers as JavaScript spells them (``1`` for YAML's ``1.0``, ``1e-7``, ``1e+21``) and characters
    kept; the expected strings are what node printed for the same object."""
    metadata = {"threshold": 1.0, "name": "café", "tiny": 1e-7, "big": 1e21, "list": [2.5, {}], "e": []}
    variables = template_variables(
        input_messages=[],
        output="",
        expected_output={"total": 42.0, "items": [1.0, 0.5]},
        criteria=None,
        metadata=metadata,
        rubrics=[],
        file_changes=None,
        transcript_messages=[],
    )
    assert variables["metadata_json"] == '{"threshold":1,"name":"café","tiny":1e-7,"big":1e+21,"list":[2.5,{}],"e":[]}'
    assert variables["metadata"] == (
        '{\n  "threshold": 1,\n  "name": "café",\n  "tiny": 1e-7,\n  "big": 1e+21,\n  "list": [\n    2.5,\n'
        '    {}\n  ],\n  "e": []\n}'
    )
    assert variables["expected_output"] == '{\n  "total": 42,\n  "items": [\n    1,\n    0.5\n  ]\n}'


def test_rubric_line_shows_only_labels_that_say_something():
    assert rubric_line(RubricItem(id="a", outcome="Has headings")) == "- [a] (REQUIRED): Has headings"
    assert (
        rubric_line(RubricItem(id="b", outcome="Covers 2xx", weight=2.0, required=False, operator="contradiction"))
        == "- [b] (weight: 2) (operator: contradiction): Covers 2xx"
    )
    assert rubric_line(RubricItem(id="c", outcome="x", weight=1.5)) == "- [c] (REQUIRED) (weight: 1.5): x"


def test_prompt_choice_follows_agentv(tmp_path: Path):
    bare = choose_prompt(LlmGraderSpec(name="g", prompt="Is it polite?"), "test criteria")
    assert (bare.template, bare.criteria, bare.origin) == (None, "Is it polite?", "inline")
    full = choose_prompt(LlmGraderSpec(name="g", prompt="Grade {{ output }}"), "test criteria")
    assert (full.template, full.criteria) == ("Grade {{ output }}", "test criteria")
    default = choose_prompt(LlmGraderSpec(name="g"), "test criteria")
    assert (default.template, default.criteria, default.origin) == (None, "test criteria", "default")

    good = tmp_path / "judge.md"
    good.write_text("Reference: {{ expected_output }}", encoding="utf-8")
    assert (
        choose_prompt(LlmGraderSpec(name="g", prompt_file=str(good)), None).template
        == "Reference: {{ expected_output }}"
    )

    bad = tmp_path / "bad.md"
    bad.write_text("Grade {{criteria}} only", encoding="utf-8")
    with pytest.raises(PromptTemplateError, match=r"uses neither \{\{output\}\} nor \{\{expected_output\}\}"):
        choose_prompt(LlmGraderSpec(name="g", prompt_file=str(bad), prompt_ref="file://bad.md"), None)
    with pytest.raises(PromptTemplateError, match="cannot be read"):
        choose_prompt(LlmGraderSpec(name="g", prompt_file=str(tmp_path / "gone.md")), None)


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ('{"score": 0.5}', {"score": 0.5}),
        ('```json\n{"score": 1}\n```', {"score": 1}),
        ('Here you go:\n```\n{"score": 0.2, "x": {"y": 1}}\n```\nHope that helps.', {"score": 0.2, "x": {"y": 1}}),
        (
            '{"assertions": [{"text": "t", "passed": "true"}, {"text": "u", "passed": "FALSE"}]}',
            {"assertions": [{"text": "t", "passed": True}, {"text": "u", "passed": False}]},
        ),
        # AgentV's repairSchemaNearBooleanFields: any other word after "passed" (any case) is false.
        (
            '{"assertions": [{"passed": "yes"}, {"PASSED": null}, {"passed": " True "}]}',
            {"assertions": [{"passed": False}, {"PASSED": False}, {"passed": True}]},
        ),
        # "satisfied" is not repaired: the schema refuses a string, and the judge is asked again.
        ('{"checks": [{"id": "a", "satisfied": "no"}]}', {"checks": [{"id": "a", "satisfied": "no"}]}),
    ],
)
def test_extract_json_tolerates_fences_prose_and_string_booleans(reply, parsed):
    assert extract_json(reply) == parsed


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty"),
        ("I think it is fine.", "contains no JSON object"),
        ('{"score": 0.5,,}', "not valid JSON"),
        ('{"score": NaN}', "not valid JSON"),
        ('{"checks": [{"id": "a", "satisfied": yes}]}', "not valid JSON"),
    ],
)
def test_extract_json_names_why_it_failed(reply, reason):
    with pytest.raises(JudgeParseError, match=reason):
        extract_json(reply)
