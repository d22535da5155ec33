"""Grader prompts: the template variables, the built-in prompts, and choosing and rendering a template.

Variables follow AgentV (``{{ name }}``, whitespace allowed inside the braces). Structured values render
as JSON with 2-space indents, their ``_json`` forms as compact JSON, and a missing value as the empty
string. A name that is not a known variable is left exactly as written and reported once per render.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message, expected_messages, question_text
from evalstore.replay.errors import PromptTemplateError
from evalstore.replay.evalfile.specs import LlmGraderSpec, RubricItem
from evalstore.replay.jsontext import js_number, stringify
from evalstore.replay.jstext import js_length, js_slice, js_trim

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
    "error",
)
ANSWER_VARIABLES = ("output", "expected_output")
"""A prompt file must use at least one of these, or it cannot be grading the answer."""

# The built-in prompts are AgentV 4.42.4's, word for word (DEFAULT_GRADER_TEMPLATE, OPERATOR_GUIDANCE,
# buildRubricPrompt, buildScoreRangePrompt in its dist/chunk-ZPFM52HV.js): a replay of an imported run asks
# the judge what AgentV asked, so a judge's answers can be compared, and a request AgentV logged is the
# same bytes (tests/e2e/test_e2e_agentv_real.py).
DEFAULT_TEMPLATE = """\
You are an expert grader. Your goal is to grade the answer based on how well it achieves the criteria for the \
original task.

Use the reference_answer as a gold standard for a high-quality response (if provided). The reference_answer \
may be a simple text response, or it may contain a sequence of expected agent messages including tool calls. \
When it contains multiple messages, the last message represents the final expected answer. The answer does \
not need to match it verbatim, but should capture the key points and follow the same spirit.

Be concise and focused in your evaluation. Provide succinct, specific feedback rather than verbose explanations.

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
        "Correctness: mark satisfied only when the answer positively supports or fulfills the outcome. "
        "Omission or contradiction should not satisfy it."
    ),
    "contradiction": (
        "Contradiction guard: mark satisfied when the answer does not make a claim that contradicts the "
        "outcome. Do not require the answer to mention the outcome; mark unsatisfied only for incompatible "
        "claims."
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

TRANSCRIPT_SECTIONS = ("file_changes", "tool_calls", "error")
"""What the transcript adds to a built-in prompt, each as its own section after the answer and only when
present. ``error`` is only ever present for a result graded although it failed (an errored Inspect sample,
``inspect.graded_despite_error``), which AgentV never grades: its prompts are unchanged."""


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
    """A rubric item as AgentV 4.42's ``parseRubricItems`` holds it (``{{rubrics}}`` shows it): a checklist
    item ``id, outcome, operator?, weight, required, min_score?, required_min_score?``; a score-range item
    ``id, weight, outcome?, operator?, required? (as written), min_score?, required_min_score?, score_ranges``."""
    # AgentV keeps both scales: min_score (0-1) and required_min_score, Math.round(min_score * 10).
    minimum = (
        {"min_score": item.min_score, "required_min_score": math.floor(item.min_score * 10 + 0.5)}
        if item.min_score is not None
        else {}
    )
    if not item.score_ranges:
        fields: dict[str, Any] = {"id": item.id, "outcome": item.outcome, "operator": item.operator}
        fields |= {"weight": item.weight, "required": item.required, **minimum}
    else:
        fields = {"id": item.id, "weight": item.weight, "outcome": item.outcome or None, "operator": item.operator}
        fields |= {"required": item.required if item.required_written else None, **minimum}
        fields["score_ranges"] = item.score_ranges
    return {k: v for k, v in fields.items() if v is not None}


def render_input(
    messages: list[Message], base_dir: str | None = None, *, trim: bool = True, file_refs: bool = False
) -> str:
    """The question, as AgentV renders it (``evalstore.replay.content.question_text``), trimmed."""
    text = question_text(messages, base_dir, file_refs=file_refs)
    return js_trim(text) if trim else text


def render_expected(value: Any, *, trim: bool = True) -> str:
    """The reference answer: the last expected message's content (text as is, else JSON), else the JSON
    of its tool calls; an object as JSON."""
    text = _expected(value)
    return js_trim(text) if trim else text


def _expected(value: Any) -> str:
    """AgentV's reference answer: the last expected message's content (text as is, else JSON), else the
    JSON of its tool calls (``content.expected_messages`` reads the value as AgentV does)."""
    messages = expected_messages(value)
    if not messages:
        return ""
    last = messages[-1]
    if isinstance(last.get("content"), str):
        return str(last["content"])
    if last.get("content") is not None:
        return pretty_json(last["content"])
    if last.get("tool_calls") is not None:
        return pretty_json(last["tool_calls"])
    return ""


def sections(
    *,
    input_messages: list[Message],
    input_base_dir: str | None,
    output: str,
    expected_output: Any,
    criteria: str | None,
    file_refs: bool = False,
) -> dict[str, str]:
    """The question, criteria, reference answer and answer as the built-in rubric and score-range prompts
    show them: untrimmed, as AgentV's ``buildRubricPrompt`` takes them from the test (the template
    variables are the trimmed ones)."""
    return {
        "input": render_input(input_messages, input_base_dir, trim=False, file_refs=file_refs),
        "criteria": criteria or "",
        "expected_output": render_expected(expected_output, trim=False),
        "output": output,
    }


def render_tool_calls(messages: list[Message]) -> str:
    """One line per tool call, ``- Tool: detail``, the detail being the call's key input field."""
    lines = []
    for message in messages:
        for call in message.tool_calls or []:
            detail = _tool_detail(call.tool, call.input)
            lines.append(f"- {call.tool}: {detail}" if detail else f"- {call.tool}")
    return "\n".join(lines)


def _tool_detail(tool: str, args: Any) -> str:
    """AgentV's ``extractKeyDetail``: lengths in UTF-16 units; a list's values are read as an object's."""
    if isinstance(args, list):
        args = dict(enumerate(args))
    if not isinstance(args, Mapping) or not args:
        return ""
    key = _TOOL_KEY_FIELDS.get(tool)
    if key and isinstance(args.get(key), str) and args[key]:
        return _truncate(args[key])
    for value in args.values():
        if isinstance(value, str) and value and js_length(value) <= _TOOL_DETAIL_MAX:
            return _truncate(value)
    return ""


def _truncate(text: str) -> str:
    return text if js_length(text) <= _TOOL_DETAIL_MAX else js_slice(text, _TOOL_DETAIL_MAX) + "…"


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
    error: str | None = None,
    file_refs: bool = False,
) -> dict[str, str]:
    """Every known variable's rendered value for one grading."""
    items = rubric_dicts(rubrics)
    return {
        "input": render_input(input_messages, input_base_dir, file_refs=file_refs),
        "output": js_trim(output),
        "expected_output": render_expected(expected_output),
        "criteria": js_trim(criteria or ""),
        "metadata": pretty_json(dict(metadata)) if metadata else "",
        "metadata_json": compact_json(dict(metadata)) if metadata else "",
        "rubrics": pretty_json(items) if items else "",
        "rubrics_json": compact_json(items) if items else "",
        "file_changes": file_changes or "",
        "tool_calls": render_tool_calls(transcript_messages),
        "error": error or "",
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
    """``file``, ``inline``, ``script`` (what an executable prompt template printed) or ``default``."""
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
    """The built-in freeform prompt; the transcript's sections (:data:`TRANSCRIPT_SECTIONS`) are appended
    only when present."""
    text, _ = render(DEFAULT_TEMPLATE, variables)
    for name in TRANSCRIPT_SECTIONS:
        if variables.get(name):
            text += f"\n\n[[ ## {name} ## ]]\n{variables[name]}"
    return text


def _context_sections(variables: Mapping[str, str], raw: Mapping[str, str] | None) -> list[str]:
    """Question, criteria, reference (if any), answer (``raw``: untrimmed, see :func:`sections`), and the
    transcript's sections (:data:`TRANSCRIPT_SECTIONS`, if any)."""
    shown = raw if raw is not None else variables
    parts = ["[[ ## question ## ]]", shown["input"], "", "[[ ## criteria ## ]]", shown["criteria"], ""]
    if variables["expected_output"]:
        parts += ["[[ ## reference_answer ## ]]", shown["expected_output"], ""]
    parts += ["[[ ## answer ## ]]", shown["output"], ""]
    for name in TRANSCRIPT_SECTIONS:
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


def rubric_prompt(variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None) -> str:
    parts = ["You are an expert grader. Evaluate the candidate answer against each rubric item below.", ""]
    parts += _context_sections(variables, raw)
    parts.append("[[ ## rubrics ## ]]")
    guidance = _operator_guidance(rubrics)
    if guidance:
        parts += ["", "Operator guidance:", *(f"- {g}" for g in guidance), ""]
    parts += [rubric_line(item) for item in rubrics]
    parts += ["", "For each rubric, determine if it is satisfied and provide brief reasoning."]
    return "\n".join(parts)


def score_range_prompt(
    variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None
) -> str:
    parts = [
        "You are an expert grader. Score the candidate answer on each criterion below using the provided score ranges.",
        "For each criterion, output an integer score from 0 to 10 based on which score range best matches the answer.",
        "",
    ]
    parts += _context_sections(variables, raw)
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
    parts += ["", "For each criterion, provide an integer score 0-10 that matches one of its defined score ranges."]
    return "\n".join(parts)
