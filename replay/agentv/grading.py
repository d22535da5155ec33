"""Per-grader results: AgentV ``scores[]`` entries and the three ``grading.json`` generations (formats 1.2, 1.3).

1. v4: ``graders[{name,type,score,weight,verdict,assertions,details}]`` plus flattened ``assertions``.
2. intermediate (July 2026): ``score, verdict, assertion_results``; ``graders[].assertion_results``.
3. HEAD: Promptfoo-style ``pass, score, reason, component_results[]`` with nested rubric checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.agentv.records import TIMING_KEYS, ImportedVerdict, VerdictName
from evalstore.replay.agentv.wire import MEMBER_SCORES, as_dict, nonempty_text
from evalstore.replay.grading.graders.base import score_to_verdict


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def derive_verdict(verdict: Any, passed: Any, score: float) -> VerdictName:
    """The recorded verdict if any, else the HEAD ``pass`` flag, else score >= 0.8."""
    if verdict in ("pass", "fail", "skip"):
        return verdict
    if isinstance(passed, bool):
        return "pass" if passed else "fail"
    return score_to_verdict(score)


def clean_assertions(raw: Any) -> list[dict[str, Any]]:
    """``{text, passed, evidence}`` items; entries without a string text are dropped, as AgentV does."""
    out: list[dict[str, Any]] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        passed = item.get("passed", item.get("pass"))
        evidence = item.get("evidence")
        out.append(
            {
                "text": item["text"],
                "passed": bool(passed),
                "evidence": evidence if isinstance(evidence, str) and evidence else None,
            }
        )
    return out


def verdict_from_score(entry: dict[str, Any], position: int) -> ImportedVerdict:
    """One index-row ``scores[]`` entry (v4 or HEAD shape). Raises ValueError on a bad score."""
    score = finite_number(entry.get("score"))
    name = entry.get("name") or entry.get("type") or f"grader-{position + 1}"
    if score is None:
        raise ValueError(f"scores[{position}] ({name}): missing or invalid score")
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"scores[{position}] ({name}): score {score:g} is outside 0..1")
    weight = finite_number(entry.get("weight"))
    request = entry.get("input")
    details = entry["details"] if isinstance(entry.get("details"), dict) else None
    if isinstance(entry.get("scores"), list) and entry["scores"]:
        # a composite's members, kept where evalstore's own composite verdicts keep them
        details = {**(details or {}), MEMBER_SCORES: entry["scores"]}
    return ImportedVerdict(
        name=str(name),
        type=str(entry.get("type") or "unknown"),
        score=score,
        verdict=derive_verdict(entry.get("verdict"), entry.get("pass"), score),
        weight=1.0 if weight is None else weight,
        assertions=clean_assertions(entry.get("assertions") or entry.get("assertion_results")),
        details=details,
        rendered_prompt=request if isinstance(request, dict) else None,
        grader_target=entry.get("target") if isinstance(entry.get("target"), str) else None,
        token_usage=entry["token_usage"] if isinstance(entry.get("token_usage"), dict) else None,
        timing=_timing(entry),
        reason=nonempty_text(entry.get("reason") or entry.get("reasoning")),
    )


def _timing(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The entry's :data:`TIMING_KEYS` that hold what AgentV writes there (a finite number of milliseconds,
    ISO times as text); anything else is left out."""
    kept: dict[str, Any] = {}
    for key in TIMING_KEYS:
        value = entry.get(key)
        if key == "duration_ms" and isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                kept[key] = value
        elif key != "duration_ms" and isinstance(value, str):
            kept[key] = value
    return kept or None


@dataclass
class Grading:
    """What a grading.json says, in one shape."""

    score: float | None = None
    passed: bool | None = None
    execution_status: str | None = None
    verdicts: list[ImportedVerdict] = field(default_factory=list)
    assertions: list[dict[str, Any]] = field(default_factory=list)
    diff_summary: str | None = None
    """v4's ``workspace_changes.diff_summary``: the test's file_changes, cut to its first 20 lines."""


def parse_grading(doc: Any) -> Grading:
    """Any of the three grading.json generations. Raises ValueError when it is none of them."""
    if not isinstance(doc, dict):
        raise ValueError("grading.json is not a JSON object")
    if isinstance(doc.get("component_results"), list):
        return _parse_head(doc)
    if isinstance(doc.get("graders"), list) or "assertions" in doc or "assertion_results" in doc:
        return _parse_legacy(doc)
    if isinstance(doc.get("pass"), bool) or finite_number(doc.get("score")) is not None:
        # HEAD leaves component_results out when no grader ran (a target that failed before grading).
        return _parse_head(doc)
    raise ValueError("grading.json has neither graders[] nor component_results[] nor a pass/score")


def _parse_legacy(doc: dict[str, Any]) -> Grading:
    """v4 and the intermediate shape differ only in ``assertions`` vs ``assertion_results``."""
    verdicts = [verdict_from_score(g, i) for i, g in enumerate(doc.get("graders") or []) if isinstance(g, dict)]
    score = finite_number(doc.get("score"))
    verdict = doc.get("verdict")
    return Grading(
        score=score,
        passed=(verdict == "pass") if verdict in ("pass", "fail", "skip") else None,
        verdicts=verdicts,
        assertions=clean_assertions(doc.get("assertions") or doc.get("assertion_results")),
        diff_summary=nonempty_text(as_dict(doc.get("workspace_changes")).get("diff_summary")),
    )


def _component_assertions(components: Any) -> list[dict[str, Any]]:
    """Child components (rubric checks, contains results) flattened into assertions, depth first."""
    out: list[dict[str, Any]] = []
    for child in components if isinstance(components, list) else []:
        if not isinstance(child, dict):
            continue
        assertion = as_dict(child.get("assertion"))
        reason = nonempty_text(child.get("reason"))
        text = nonempty_text(assertion.get("value")) or reason or nonempty_text(assertion.get("name")) or ""
        out.append(
            {
                "text": text,
                "passed": bool(child.get("pass")),
                "evidence": reason if reason != text else None,
            }
        )
        out.extend(_component_assertions(child.get("component_results")))
    return out


def _parse_head(doc: dict[str, Any]) -> Grading:
    verdicts: list[ImportedVerdict] = []
    for position, component in enumerate(doc.get("component_results") or []):
        if not isinstance(component, dict):
            continue
        assertion = as_dict(component.get("assertion"))
        metadata = as_dict(component.get("metadata"))
        entry = {
            "name": assertion.get("name") or assertion.get("id"),
            "type": assertion.get("type"),
            "score": component.get("score"),
            "pass": component.get("pass"),
            "reason": component.get("reason"),
            "weight": assertion.get("weight"),
            "target": assertion.get("target"),
            "token_usage": metadata.get("token_usage"),
            "details": metadata.get("details"),
        }
        verdict = verdict_from_score(entry, position)
        verdict.assertions = _component_assertions(component.get("component_results"))
        verdicts.append(verdict)
    metadata = as_dict(doc.get("metadata"))
    status = metadata.get("execution_status")
    return Grading(
        score=finite_number(doc.get("score")),
        passed=doc["pass"] if isinstance(doc.get("pass"), bool) else None,
        execution_status=status if isinstance(status, str) else None,
        verdicts=verdicts,
    )


def merge_verdicts(primary: list[ImportedVerdict], grading: list[ImportedVerdict]) -> list[ImportedVerdict]:
    """Row verdicts completed from grading.json: HEAD rows drop assertions, grading.json keeps them.

    Pairing is by position when the names agree (a suite may hold two graders of one name), else by the
    first unused grading entry of that name.
    """
    if not primary:
        return list(grading)
    used: set[int] = set()
    for index, verdict in enumerate(primary):
        match = None
        if index < len(grading) and grading[index].name == verdict.name and index not in used:
            match = index
        else:
            match = next((i for i, g in enumerate(grading) if g.name == verdict.name and i not in used), None)
        if match is None:
            continue
        used.add(match)
        other = grading[match]
        if not verdict.assertions:
            verdict.assertions = other.assertions
        verdict.details = verdict.details or other.details
        verdict.reason = verdict.reason or other.reason
        verdict.token_usage = verdict.token_usage or other.token_usage
        verdict.grader_target = verdict.grader_target or other.grader_target
    return primary
