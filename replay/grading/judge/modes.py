"""The three ways a plain LLM judge grades (AgentV 4.x §5.3): what it is asked, what it must answer,
and how the answer becomes a score.

- freeform: ``{score, assertions, details}``; the score as given (0 to 1), at most 8 assertions kept.
- rubric checklist: ``{checks: [{id, satisfied, reasoning}], overall_reasoning}``; score = satisfied
  weight over the weight of the items the judge returned; an unsatisfied required item fails.
- score ranges (any rubric item with ``score_ranges``): ``{checks: [{id, score 0-10, reasoning}]}``;
  weighted mean of score/10; an item passes at >= 7 and at or above its ``min_score``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.evalfile.specs import LlmGraderSpec, RubricItem
from evalstore.replay.grading.graders.base import score_to_verdict
from evalstore.replay.grading.judge.parsing import JudgeParseError, extract_json
from evalstore.replay.grading.judge.templates import default_prompt, rubric_prompt, score_range_prompt
from evalstore.replay.jsontext import js_number
from evalstore.store.events import Assertion

MAX_ASSERTIONS = 8
SCORE_RANGE_PASS = 7

# AgentV 4.42.4's system prompts, word for word (buildOutputSchema, buildRubricOutputSchema,
# buildScoreRangeOutputSchema): the same for its built-in user prompts and for a custom template.
FREEFORM_SCHEMA = """\
You must respond with a single JSON object matching this schema:

{
  "score": <number between 0.0 and 1.0>,
  "assertions": [
    {
      "text": "<brief description of what was checked>",
      "passed": <boolean>,
      "evidence": "<concise evidence, 1-2 sentences, optional>"
    }
  ],
  "details": {<optional object with domain-specific structured metrics>}
}"""

RUBRIC_SYSTEM = """\
You are an expert grader. Evaluate the candidate answer against each rubric item.
You must return a valid JSON object matching this schema:
{
  "checks": [
    {
      "id": "string (rubric id)",
      "satisfied": boolean,
      "reasoning": "string (brief explanation)"
    }
  ],
  "overall_reasoning": "string (summary)"
}"""

SCORE_RANGE_SYSTEM = """\
You are an expert grader. Score the candidate answer on each criterion.
You must return a valid JSON object matching this schema:
{
  "checks": [
    {
      "id": "string (criterion id)",
      "score": integer (0-10),
      "reasoning": "string (brief explanation for score)"
    }
  ],
  "overall_reasoning": "string (summary, optional)"
}

Important: The "score" must be an integer from 0 to 10 that falls within one of the defined score ranges \
for that criterion."""


@dataclass
class ModeResult:
    score: float
    verdict: str
    assertions: list[Assertion]
    details: dict[str, Any] | None = None
    evidence: list[str] = field(default_factory=list)


# What a reply must hold is AgentV 4.42.4's zod schemas (freeformEvaluationSchema, rubricEvaluationSchema,
# scoreRangeEvaluationSchema): a reply they refuse is asked again (parse attempts, then the repair request),
# never clamped or read leniently, so the same replies give the same verdicts in both tools.


def _number(value: Any, where: str, *, low: float, high: float, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise JudgeParseError(f"{where} must be a number")
    if integer and not float(value).is_integer():
        raise JudgeParseError(f"{where} must be an integer")
    if not low <= value <= high:
        raise JudgeParseError(f"{where} must be between {js_number(low)} and {js_number(high)}")
    return float(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise JudgeParseError(f"{where} must be true or false")
    return value


def _string(value: Any, where: str, *, optional: bool = False) -> str | None:
    """A string; with ``optional``, also absent (zod's ``.optional()`` takes no null)."""
    if isinstance(value, str):
        return value
    if optional and value is _ABSENT:
        return None
    raise JudgeParseError(f"{where} must be a string")


_ABSENT = object()


def _checks(data: Mapping[str, Any], *, reasoning: bool) -> list[Mapping[str, Any]]:
    checks = data.get("checks", _ABSENT)
    if not isinstance(checks, list) or not all(isinstance(c, Mapping) for c in checks):
        raise JudgeParseError('"checks" must be a list of objects')
    for index, check in enumerate(checks):
        _string(check.get("id", _ABSENT), f"checks[{index}].id")
        _string(check.get("reasoning", _ABSENT), f"checks[{index}].reasoning", optional=not reasoning)
    return checks


class Mode:
    name: str

    def system_prompt(self) -> str:
        raise NotImplementedError

    def user_prompt(
        self, variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None
    ) -> str:
        raise NotImplementedError

    def score(self, data: Mapping[str, Any], rubrics: list[RubricItem]) -> ModeResult:
        raise NotImplementedError

    def parse(self, reply: str | None, rubrics: list[RubricItem]) -> ModeResult:
        """The reply as a scored result; raises :class:`JudgeParseError` when it does not fit."""
        return self.score(extract_json(reply), rubrics)


class Freeform(Mode):
    name = "freeform"

    def system_prompt(self) -> str:
        return FREEFORM_SCHEMA

    def user_prompt(
        self, variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None
    ) -> str:
        return default_prompt(variables)

    def score(self, data: Mapping[str, Any], rubrics: list[RubricItem]) -> ModeResult:
        if "score" not in data:
            raise JudgeParseError('"score" is missing')
        score = _number(data["score"], '"score"', low=0.0, high=1.0)
        raw = data.get("assertions", [])
        if not isinstance(raw, list):
            raise JudgeParseError('"assertions" must be a list')
        assertions = []
        for index, item in enumerate(raw):
            if not isinstance(item, Mapping):
                raise JudgeParseError(f"assertions[{index}] must be an object")
            assertion = Assertion(
                text=_string(item.get("text", _ABSENT), f"assertions[{index}].text") or "",
                passed=_bool(item.get("passed"), f"assertions[{index}].passed"),
                evidence=_string(item.get("evidence", _ABSENT), f"assertions[{index}].evidence", optional=True),
            )
            if index < MAX_ASSERTIONS:  # every one is checked, the first 8 are kept
                assertions.append(assertion)
        details = data.get("details")
        if "details" in data and not isinstance(details, Mapping):
            raise JudgeParseError('"details" must be an object')
        return ModeResult(score, score_to_verdict(score), assertions, dict(details) if details else None)


class Rubric(Mode):
    name = "rubric"

    def system_prompt(self) -> str:
        return RUBRIC_SYSTEM

    def user_prompt(
        self, variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None
    ) -> str:
        return rubric_prompt(variables, rubrics, raw)

    def score(self, data: Mapping[str, Any], rubrics: list[RubricItem]) -> ModeResult:
        by_id = {item.id: item for item in rubrics}
        total = earned = 0.0
        failed_required: list[str] = []
        assertions = []
        checks = _checks(data, reasoning=True)
        overall = _string(data.get("overall_reasoning", _ABSENT), '"overall_reasoning"')
        for index, check in enumerate(checks):
            satisfied = _bool(check.get("satisfied"), f"checks[{index}].satisfied")
            item = by_id.get(check["id"])
            if item is None:
                continue  # ids the rubric does not have are ignored (once checked), as in AgentV
            total += item.weight
            if satisfied:
                earned += item.weight
            elif item.required:
                failed_required.append(item.id)
            assertions.append(
                Assertion(text=f"[{item.id}] {item.outcome}", passed=satisfied, evidence=check["reasoning"])
            )
        score = earned / total if total > 0 else 0.0
        details: dict[str, Any] = {"mode": "rubric"}
        if failed_required:
            details["failed_required"] = failed_required
        if overall:
            details["overall_reasoning"] = overall
        return ModeResult(
            score,
            "fail" if failed_required else score_to_verdict(score),
            assertions,
            details,
            [overall] if overall else [],
        )


class ScoreRanges(Mode):
    name = "score_ranges"

    def system_prompt(self) -> str:
        return SCORE_RANGE_SYSTEM

    def user_prompt(
        self, variables: Mapping[str, str], rubrics: list[RubricItem], raw: Mapping[str, str] | None = None
    ) -> str:
        return score_range_prompt(variables, rubrics, raw)

    def score(self, data: Mapping[str, Any], rubrics: list[RubricItem]) -> ModeResult:
        by_id = {item.id: item for item in rubrics}
        total = weighted = 0.0
        raw_scores: dict[str, Any] = {}
        below_minimum: list[str] = []
        assertions = []
        checks = _checks(data, reasoning=False)
        overall = _string(data.get("overall_reasoning", _ABSENT), '"overall_reasoning"', optional=True)
        scores = [
            _number(check.get("score"), f"checks[{index}].score", low=0.0, high=10.0, integer=True)
            for index, check in enumerate(checks)
        ]
        for check, raw in zip(checks, scores, strict=True):
            item = by_id.get(check["id"])
            if item is None:
                continue
            normalized = raw / 10.0
            raw_scores[item.id] = js_number(raw)
            total += item.weight
            weighted += normalized * item.weight
            # AgentV's gate: min_score, else 10/10 for an item that says required: true.
            gate = (
                item.min_score
                if item.min_score is not None
                else (1.0 if item.required_written and item.required else None)
            )
            gated = gate is not None and normalized < gate
            if gated:
                below_minimum.append(item.id)
            band = next(
                (b for b in item.score_ranges or [] if b["score_range"][0] <= raw <= b["score_range"][1]),
                None,
            )
            label = item.outcome or item.id
            band_outcome = band.get("outcome", "") if band else ""
            assertions.append(
                Assertion(
                    text=f"[{item.id}] {label} - Score: {js_number(raw)}/10 ({band_outcome})",
                    passed=raw >= SCORE_RANGE_PASS and not gated,
                    evidence=check.get("reasoning"),
                )
            )
        score = weighted / total if total > 0 else 0.0
        details: dict[str, Any] = {
            "raw_scores": raw_scores,
            "normalization": "score / 10",
            "aggregation": "weighted_average",
        }
        if below_minimum:
            details["below_min_score"] = below_minimum
        return ModeResult(
            score,
            "fail" if below_minimum else score_to_verdict(score),
            assertions,
            details,
            [overall] if overall else [],
        )


FREEFORM, RUBRIC, SCORE_RANGES = Freeform(), Rubric(), ScoreRanges()


def choose_mode(spec: LlmGraderSpec) -> Mode:
    """Rubric items make a checklist, or score ranges when any item has them; else freeform."""
    if not spec.rubrics:
        return FREEFORM
    if any(item.score_ranges for item in spec.rubrics):
        return SCORE_RANGES
    return RUBRIC
