"""``field-accuracy``: fields of the answer's JSON against the expected output's, as AgentV 4.42 grades
them (``graders/field-accuracy.ts``): ``exact`` (deep equality), ``numeric_tolerance`` (absolute, or
``relative`` to the expected value), ``date`` (same day, whatever the format). A missing expected value
counts as a hit; a missing optional field counts for nothing. The score is the weighted mean, or 1/0 with
``aggregation: all_or_nothing``.

Dates are read as V8's ``new Date`` reads a string (``replay/jsdate.py``: every form it takes, a day past
the month's end rolled over), then as AgentV's own fallbacks (``DD-MMM-YYYY``, and ``MM/DD/YYYY`` or
``DD/MM/YYYY`` as the field's ``formats`` say or the values tell), and compared by their day, all in UTC:
AgentV reads and compares them in the machine's zone, so this is AgentV run with ``TZ=UTC``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evalstore.replay.content import expected_messages
from evalstore.replay.evalfile.specs import FieldAccuracySpec, FieldSpec
from evalstore.replay.grading.graders.base import GraderResult, GradingContext, score_to_verdict
from evalstore.replay.grading.graders.trajectory import js_deep_equal
from evalstore.replay.jsdate import date_parse, iso_day, local_date, utc_day
from evalstore.replay.jstext import js_fixed, js_number_text, js_string, js_trim
from evalstore.store.events import Assertion

_MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}


def parse_json_from_text(text: str) -> Any:
    """AgentV's ``parseJsonFromText``: fences removed, the outermost ``{...}`` taken, a ``"passed"`` that is
    not a boolean repaired, then ``JSON.parse``; raises ValueError."""
    cleaned = re.sub(r"```json\n?|```", "", text).strip()
    match = re.search(r"\{[\s\S]*\}", cleaned)
    blob = match.group(0) if match else cleaned

    def repair(m: re.Match[str]) -> str:
        value = (m.group(2) or m.group(3) or "").strip().lower()
        return m.group(1) + ("true" if value == "true" else "false")

    repaired = re.sub(r'("passed"\s*:\s*)(?:"([^"]+)"|([A-Za-z_][A-Za-z0-9_-]*))', repair, blob, flags=re.IGNORECASE)
    return json.loads(repaired)


_MISSING = object()


def _resolve(value: Any, path: str) -> Any:
    """A dot path with ``[n]`` indexes (``line_items[0].amount``), or missing (JavaScript's undefined)."""
    current = value
    for part in (p for p in re.split(r"\.|\[|\]", path) if p):
        if isinstance(current, list):
            index = int(part) if part.isdigit() else len(current)
            current = current[index] if index < len(current) else _MISSING
        elif isinstance(current, dict):
            current = current.get(part, _MISSING)
        else:
            return _MISSING
        if current is _MISSING:
            return _MISSING
    return current


def _to_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = re.match(r"\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|Infinity)", value, re.IGNORECASE)
        if match:
            return float(match.group(0).replace("Infinity", "inf"))
    return None


def js_date(text: str, formats: list[str]) -> int | None:
    """AgentV's ``parseDate``: the time (ms since 1970, UTC) ``new Date`` makes of the text, else of its
    fallbacks (``DD-MMM-YYYY``, then ``MM/DD/YYYY`` or ``DD/MM/YYYY`` as ``formats`` or the values say);
    None where it finds none. Its patterns' ``\\d`` is ASCII, as in JavaScript."""
    trimmed = js_trim(text)
    found = date_parse(trimmed)
    if found is not None:
        return found
    named = re.fullmatch(r"([0-9]{1,2})-([A-Za-z]{3,9})-([0-9]{4})", trimmed)
    if named and named.group(2).lower() in _MONTHS:
        return local_date(int(named.group(3)), _MONTHS[named.group(2).lower()] - 1, int(named.group(1)))
    numeric = re.fullmatch(r"([0-9]{1,2})[/\-]([0-9]{1,2})[/\-]([0-9]{4})", trimmed)
    if not numeric:
        return None
    first, second, year = (int(g) for g in numeric.groups())
    us = any("MM/DD" in f or "MM-DD" in f for f in formats)
    eu = any("DD/MM" in f or "DD-MM" in f for f in formats)
    if us and not eu:
        return local_date(year, first - 1, second) if 1 <= first <= 12 and 1 <= second <= 31 else None
    if eu and not us:
        return local_date(year, second - 1, first) if 1 <= second <= 12 and 1 <= first <= 31 else None
    # Neither or both: the values decide, and a month or day of 0 rolls back, as ``new Date(y, m, d)`` does.
    if first > 12 and second <= 12:
        return local_date(year, second - 1, first)
    if second > 12 and first <= 12:
        return local_date(year, first - 1, second)
    if first <= 12 and second <= 31:
        return local_date(year, first - 1, second)
    return None


DEFAULT_DATE_FORMATS = [
    "YYYY-MM-DDTHH:mm:ssZ",
    "YYYY-MM-DDTHH:mm:ss",
    "YYYY-MM-DD",
    "DD-MMM-YYYY",
    "MM/DD/YYYY",
    "DD/MM/YYYY",
    "MM-DD-YYYY",
    "DD-MM-YYYY",
]


def _js_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def compare_field(field: FieldSpec, answer: Any, expected: Any) -> tuple[float, float, bool, str]:
    """(score, weight, hit, message) of one field."""
    path, weight = field.path, field.weight
    want = _resolve(expected, path)
    if want is _MISSING:
        return 1.0, weight, True, f"{path}: no expected value"
    got = _resolve(answer, path)
    if got is _MISSING:
        if field.required:
            return 0.0, weight, False, f"{path} (required, missing)"
        return 1.0, 0.0, True, f"{path}: optional field missing"
    if field.match == "exact":
        if js_deep_equal(got, want):
            return 1.0, weight, True, path
        if _js_type(got) != _js_type(want):
            return 0.0, weight, False, f"{path} (type mismatch: got {_js_type(got)}, expected {_js_type(want)})"
        return 0.0, weight, False, f"{path} (value mismatch)"
    if field.match == "numeric_tolerance":
        a, b = _to_number(got), _to_number(want)
        if a is None or b is None:
            return 0.0, weight, False, f"{path} (non-numeric value)"
        if a in (float("inf"), float("-inf")) or b in (float("inf"), float("-inf")):
            return 0.0, weight, False, f"{path} (invalid numeric value)"
        tolerance = field.tolerance or 0.0
        diff = abs(a - b)
        off = diff if not field.relative or b == 0 else diff / abs(b)
        if off <= tolerance:
            return 1.0, weight, True, f"{path} (within tolerance: diff={js_fixed(diff, 2)})"
        return (
            0.0,
            weight,
            False,
            f"{path} (outside tolerance: diff={js_fixed(diff, 2)}, tolerance={js_number_text(tolerance)})",
        )
    formats = field.formats if field.formats is not None else DEFAULT_DATE_FORMATS
    got_time, want_time = js_date(js_string(got), formats), js_date(js_string(want), formats)
    if got_time is None:
        return 0.0, weight, False, f"{path} (unparseable candidate date)"
    if want_time is None:
        return 0.0, weight, False, f"{path} (unparseable expected date)"
    if utc_day(got_time) == utc_day(want_time):
        return 1.0, weight, True, path
    return 0.0, weight, False, f"{path} (date mismatch: got {iso_day(got_time)}, expected {iso_day(want_time)})"


def expected_data(expected_output: Any) -> Any:
    """The last assistant message of the expected output with content: an object as it is, a string as
    the JSON it holds (a message whose string does not parse is passed over)."""
    for message in reversed(expected_messages(expected_output)):
        content = message.get("content")
        if message.get("role") != "assistant" or not content:
            continue
        if isinstance(content, (dict, list)):
            return content
        if isinstance(content, str):
            try:
                return parse_json_from_text(content)
            except ValueError:
                continue
    return None


class FieldAccuracyGrader:
    def __init__(self, spec: FieldAccuracySpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        answer_text = ctx.trace().final_output or ""
        try:
            answer = parse_json_from_text(answer_text)
        except ValueError:
            return _fail("Failed to parse candidate answer as JSON")
        expected = expected_data(ctx.test.expected_output)
        if expected is None:
            return _fail("No expected data found in expected_output")
        results = [compare_field(f, answer, expected) for f in self.spec.fields]
        assertions = [Assertion(text=message, passed=hit) for _, _, hit, message in results]
        if self.spec.aggregation == "all_or_nothing":
            score = 0.0 if any(not a.passed for a in assertions) else 1.0
        else:
            total = sum(w for _, w, _, _ in results)
            score = sum(s * w for s, w, _, _ in results) / total if total else (1.0 if not results else 0.0)
        score = min(1.0, max(0.0, score))
        return GraderResult(score=score, verdict=score_to_verdict(score), assertions=assertions)


def _fail(text: str) -> GraderResult:
    return GraderResult(score=0.0, verdict="fail", assertions=[Assertion(text=text, passed=False)])
