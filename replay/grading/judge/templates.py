"""Grader prompts: the template variables, the built-in prompts, and choosing and rendering a template.

Variables follow AgentV (``{{ name }}``, whitespace allowed inside the braces). Structured values render
as JSON with 2-space indents, their ``_json`` forms as compact JSON, and a missing value as the empty
string. A name that is not a known variable is left exactly as written and reported once per render.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message, question_text
from evalstore.replay.errors import PromptTemplateError
from evalstore.replay.evalfile.specs import LlmGraderSpec, RubricItem
from evalstore.replay.jsontext import js_number, stringify

VARIABLE = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")
KNOWN_VARIABLES = (
    "input",
    "output",
    "expected_output",
    "criteria",
    "metadata",
    "metadata_json",
    "rubrics",
    "rubrics_json",
    "file_changes",
    "tool_calls",
)
ANSWER_VARIABLES = ("output", "expected_output")
"""A prompt file must use at least one of these, or it cannot be grading the answer."""

DEFAULT_TEMPLATE = """\
You are an expert grader. Judge how well the answer achieves the criteria of the original task.

Treat the reference_answer, when one is given, as an example of a high-quality response. It may be plain \
text or a sequence of expected agent messages with tool calls; when there are several messages, the last \
one is the expected final answer. The answer need not match it word for word, but it should cover the \
same key points in the same spirit.

Keep your evaluation short and specific: succinct feedback, no lengthy explanations.

[[ ## criteria ## ]]
{{criteria}}

[[ ## question ## ]]
{{input}}

[[ ## reference_answer ## ]]
{{expected_output}}

[[ ## answer ## ]]
{{output}}"""

OPERATOR_GUIDANCE = {
    "correctness": (
        "correctness: satisfied only when the answer affirmatively supports or achieves the outcome; "
        "leaving it out or contradicting it does not satisfy it."
    ),
    "contradiction": (
        "contradiction: satisfied unless the answer makes a claim incompatible with the outcome; the "
        "answer does not have to mention the outcome at all."
    ),
}

# Tool-call summaries name the one input field that says what the call did.
_TOOL_KEY_FIELDS = {
    "Skill": "skill",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "Bash": "command",
    "Grep": "pattern",
    "Glob": "pattern",
}
_TOOL_DETAIL_MAX = 120


# -- values ---------------------------------------------------------------------------------------


def pretty_json(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``, as AgentV renders a structured variable."""
    return stringify(js_number(value), indent=True).decode("utf-8")


def compact_json(value: Any) -> str:
    """``JSON.stringify(value)``: a variable's ``_json`` form."""
    return stringify(js_number(value)).decode("utf-8")


def rubric_dicts(rubrics: list[RubricItem]) -> list[dict[str, Any]]:
    return [js_number(_rubric_dict(item)) for item in rubrics]


def _rubric_dict(item: RubricItem) -> dict[str, Any]:
    """A rubric item as AgentV 4.42 renders it in ``{{rubrics}}``: an item with ``score_ranges`` (list or
    shorthand map alike) has the keys ``id, weight, outcome, score_ranges`` and no ``required``."""
    dumped = item.model_dump(mode="json", exclude_none=True)
    if not item.score_ranges:
        return dumped
    first: dict[str, Any] = {k: dumped[k] for k in ("id", "weight", "outcome", "score_ranges") if k in dumped}
    rest = {k: v for k, v in dumped.items() if k not in first and k != "required"}
    return {**first, **rest}


def render_input(messages: list[Message], base_dir: str | None = None) -> str:
    """The question, as AgentV renders it (``evalstore.replay.content.question_text``), trimmed."""
    return question_text(messages, base_dir).strip()


def render_expected(value: Any) -> str:
    """The reference answer: the last expected message's content (text as is, else JSON), else the JSON
    of its tool calls; an object as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(m, Mapping) and "role" in m for m in value):
        value = value[-1]
    if isinstance(value, Mapping) and "role" in value:
        content = value.get("content")
        if isinstance(content, str):
            return content.strip()
        if content is not None:
            return pretty_json(content).strip()
        if value.get("tool_calls") is not None:
            return pretty_json(value["tool_calls"]).strip()
        return ""
    return pretty_json(value).strip()


def render_tool_calls(messages: list[Message]) -> str:
    """One line per tool call, ``- Tool: detail``, the detail being the call's key input field."""
    lines = []
    for message in messages:
        for call in message.tool_calls or []:
            detail = _tool_detail(call.tool, call.input)
            lines.append(f"- {call.tool}: {detail}" if detail else f"- {call.tool}")
    return "\n".join(lines)


def _tool_detail(tool: str, args: Any) -> str:
    if not isinstance(args, Mapping):
        return ""
    key = _TOOL_KEY_FIELDS.get(tool)
    if key and isinstance(args.get(key), str) and args[key]:
        return _truncate(args[key])
    for value in args.values():
        if isinstance(value, str) and value and len(value) <= _TOOL_DETAIL_MAX:
            return value
    return ""


def _truncate(text: str) -> str:
    return text if len(text) <= _TOOL_DETAIL_MAX else text[:_TOOL_DETAIL_MAX] + "…"


def template_variables(
    *,
    input_messages: list[Message],
    input_base_dir: str | None = None,
    output: str,
    expected_output: Any,
    criteria: str | None,
    metadata: Mapping[str, Any],
    rubrics: list[RubricItem],
    file_changes: str | None,
    transcript_messages: list[Message],
) -> dict[str, str]:
    """Every known variable's rendered value for one grading."""
    items = rubric_dicts(rubrics)
    return {
        "input": render_input(input_messages, input_base_dir),
        "output": output.strip(),
        "expected_output": render_expected(expected_output),
        "criteria": (criteria or "").strip(),
        "metadata": pretty_json(dict(metadata)) if metadata else "",
        "metadata_json": compact_json(dict(metadata)) if metadata else "",
        "rubrics": pretty_json(items) if items else "",
        "rubrics_json": compact_json(items) if items else "",
        "file_changes": file_changes or "",
        "tool_calls": render_tool_calls(transcript_messages),
    }


# -- templates ------------------------------------------------------------------------------------


def uses_known_variable(text: str, names: tuple[str, ...] = KNOWN_VARIABLES) -> bool:
    return any(match.group(1) in names for match in VARIABLE.finditer(text))


def render(template: str, variables: Mapping[str, str]) -> tuple[str, list[str]]:
    """The template with known variables substituted, and one warning per distinct unknown name."""
    unknown: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return variables[name]
        if name not in unknown:
            unknown.append(name)
        return match.group(0)

    text = VARIABLE.sub(substitute, template)
    warnings = [
        f"prompt template: unknown variable {{{{{name}}}}} left as written (known: {', '.join(KNOWN_VARIABLES)})"
        for name in unknown
    ]
    return text, warnings


@dataclass(frozen=True)
class PromptSource:
    """Which template a grader uses: a full override, or the built-in prompt of its mode."""

    template: str | None
    """The full template, or None for the built-in prompt."""
    criteria: str | None
    """The criteria the built-in prompt shows: the test's, or the grader's bare inline prompt."""
    origin: str
    """``file``, ``inline`` or ``default``."""
    notes: list[str] = field(default_factory=list)


def choose_prompt(spec: LlmGraderSpec, test_criteria: str | None) -> PromptSource:
    """AgentV's prompt resolution (§5.1): a prompt file is a full template; inline text is a full
    template when it uses a known variable, else bare criteria for the built-in prompt."""
    if spec.prompt_file:
        path = Path(spec.prompt_file)
        ref = spec.prompt_ref or str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PromptTemplateError(
                f"grader {spec.name!r}: prompt file {ref} ({path}) cannot be read ({exc.strerror})"
            ) from None
        if not uses_known_variable(text, ANSWER_VARIABLES):
            raise PromptTemplateError(
                f"grader {spec.name!r}: prompt file {ref} uses neither {{{{output}}}} nor "
                "{{expected_output}}; add one so the judge sees the answer"
            )
        return PromptSource(text, test_criteria, "file")
    if spec.prompt is not None and spec.prompt.strip():
        if uses_known_variable(spec.prompt):
            return PromptSource(spec.prompt, test_criteria, "inline")
        return PromptSource(None, spec.prompt, "inline")
    return PromptSource(None, test_criteria, "default")


def default_prompt(variables: Mapping[str, str]) -> str:
    """The built-in freeform prompt; file changes and tool calls are appended only when present."""
    text, _ = render(DEFAULT_TEMPLATE, variables)
    if variables.get("file_changes"):
        text += f"\n\n[[ ## file_changes ## ]]\n{variables['file_changes']}"
    if variables.get("tool_calls"):
        text += f"\n\n[[ ## tool_calls ## ]]\n{variables['tool_calls']}"
    return text


def _context_sections(variables: Mapping[str, str]) -> list[str]:
    """Question, criteria, reference (if any), answer, file changes and tool calls (if any)."""
    parts = ["[[ ## question ## ]]", variables["input"], "", "[[ ## criteria ## ]]", variables["criteria"], ""]
    if variables["expected_output"]:
        parts += ["[[ ## reference_answer ## ]]", variables["expected_output"], ""]
    parts += ["[[ ## answer ## ]]", variables["output"], ""]
    for name in ("file_changes", "tool_calls"):
        if variables[name]:
            parts += [f"[[ ## {name} ## ]]", variables[name], ""]
    return parts


def _operator_guidance(rubrics: list[RubricItem]) -> list[str]:
    seen: list[str] = []
    for item in rubrics:
        if item.operator and item.operator not in seen:
            seen.append(item.operator)
    return [OPERATOR_GUIDANCE[op] for op in seen]


def _number(value: float) -> str:
    return str(js_number(value))


def rubric_line(item: RubricItem) -> str:
    """``- [id] (REQUIRED) (weight: w) (operator: op): outcome``; labels only when they say something."""
    required = " (REQUIRED)" if item.required else ""
    weight = f" (weight: {_number(item.weight)})" if item.weight != 1.0 else ""
    operator = f" (operator: {item.operator})" if item.operator else ""
    return f"- [{item.id}]{required}{weight}{operator}: {item.outcome}"


def rubric_prompt(variables: Mapping[str, str], rubrics: list[RubricItem]) -> str:
    parts = ["You are an expert grader. Check the answer against each rubric item below.", ""]
    parts += _context_sections(variables)
    parts.append("[[ ## rubrics ## ]]")
    guidance = _operator_guidance(rubrics)
    if guidance:
        parts += ["", "Operator guidance:", *(f"- {g}" for g in guidance), ""]
    parts += [rubric_line(item) for item in rubrics]
    parts += ["", "For each rubric item, decide whether the answer satisfies it and give brief reasoning."]
    return "\n".join(parts)


def score_range_prompt(variables: Mapping[str, str], rubrics: list[RubricItem]) -> str:
    parts = [
        "You are an expert grader. Score the answer on each criterion below, using its score ranges.",
        "Give each criterion an integer score from 0 to 10: the range whose description best fits.",
        "",
    ]
    parts += _context_sections(variables)
    parts.append("[[ ## scoring_criteria ## ]]")
    for item in rubrics:
        weight = f" (weight: {_number(item.weight)})" if item.weight != 1.0 else ""
        minimum = f" [REQUIRED: min score {_number(item.min_score)}]" if item.min_score is not None else ""
        parts += ["", f"### Criterion: {item.id}{weight}{minimum}"]
        if item.operator:
            parts.append(f"Operator: {item.operator}")
        if item.outcome:
            parts.append(f"Description: {item.outcome}")
        if item.score_ranges:
            parts.append("Score ranges:")
            for band in item.score_ranges:
                low, high = band["score_range"]
                label = f"{low}" if low == high else f"{low}-{high}"
                parts.append(f"  - Score {label}: {band.get('outcome', '')}")
    guidance = _operator_guidance(rubrics)
    if guidance:
        parts += ["", *guidance]
    parts += ["", "For each criterion, give an integer score from 0 to 10 within one of its score ranges."]
    return "\n".join(parts)
