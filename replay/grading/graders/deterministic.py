"""Deterministic assertions (contains, regex, equals, is-json, ...) on the prepared answer text.

Each scores 1 or 0 with one assertion saying what was checked, worded as AgentV words it
(``Output contains "x"``), so imported and recomputed verdicts read alike. They see the answer AgentV's
do: its text, without the files (a file-only answer fails ``contains``), unless the assertion asks for
converted text with ``preprocessors:`` of its own (an evalstore extension; ``preprocessing.answer_for``).
"""

from __future__ import annotations

from collections.abc import Callable

from evalstore.replay.evalfile.specs import AssertionSpec
from evalstore.replay.grading.graders.base import GraderResult, GraderThrew, GradingContext, score_to_verdict
from evalstore.replay.grading.preprocessing import answer_for
from evalstore.replay.jstext import JsRegexError, js_json_parses, js_regex, js_trim
from evalstore.store.events import Assertion


class AssertionGrader:
    def __init__(self, spec: AssertionSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        prepared = answer_for(ctx, self.spec.preprocessors)
        try:
            passed, text = check(self.spec, prepared.text)
        except InvalidAssertion as exc:
            # AgentV's grader throws (`new RegExp` refuses the pattern): the orchestrator scores it 0, a fail
            # counted in the mean, "Grader 'NAME' failed: ..." (engine.grader_threw), not an execution error.
            raise GraderThrew(str(exc)) from None
        else:
            score = 1.0 if passed else 0.0
            result = GraderResult(
                score=score,
                verdict=score_to_verdict(score),
                assertions=[Assertion(text=text, passed=passed)],
            )
        result.evidence = list(prepared.warnings)
        result.preprocessing_event_ids = list(prepared.preprocessing_event_ids)
        return result


class InvalidAssertion(ValueError):
    """An assertion whose value cannot be checked (no value, a bad regex, unknown flags)."""


def check(spec: AssertionSpec, output: str) -> tuple[bool, str]:
    """Whether ``output`` satisfies the assertion, and the sentence that says what was checked."""
    return _CHECKS[spec.type](output, spec)


# The eval parser gives every assertion a string value (a list of strings for the list types), or skips it
# as AgentV does (replay/evalfile/graders.py); these refuse what a spec built otherwise may hold.


def _one(spec: AssertionSpec) -> str:
    if not isinstance(spec.value, str):
        raise InvalidAssertion("it needs a value")
    return spec.value


def _many(spec: AssertionSpec) -> list[str]:
    values = [v for v in (spec.value if isinstance(spec.value, list) else [spec.value]) if isinstance(v, str)]
    if not values:
        raise InvalidAssertion("it needs a list of values")
    return values


def _quoted(values: list[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _contains(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    value = _one(spec)
    passed = value in output
    return passed, f'Output contains "{value}"' if passed else f'Output does not contain "{value}"'


def _icontains(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    value = _one(spec)
    passed = value.lower() in output.lower()
    verb = "contains" if passed else "does not contain"
    return passed, f'Output {verb} "{value}" (case-insensitive)'


def _contains_any(output: str, spec: AssertionSpec, fold: bool = False) -> tuple[bool, str]:
    values = _many(spec)
    haystack = output.lower() if fold else output
    matched = [v for v in values if (v.lower() if fold else v) in haystack]
    suffix = " (case-insensitive)" if fold else ""
    if matched:
        return True, f'Output contains "{matched[0]}"{suffix}'
    return False, f"Output does not contain any of: {_quoted(values)}{suffix}"


def _contains_all(output: str, spec: AssertionSpec, fold: bool = False) -> tuple[bool, str]:
    values = _many(spec)
    haystack = output.lower() if fold else output
    missing = [v for v in values if (v.lower() if fold else v) not in haystack]
    suffix = " (case-insensitive)" if fold else ""
    if not missing:
        return True, f"Output contains all {len(values)} expected strings{suffix}"
    label = "Output missing (case-insensitive)" if fold else "Output missing"
    return False, f"{label}: {_quoted(missing)}"


def _starts_with(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    value = _one(spec)
    passed = js_trim(output).startswith(js_trim(value))
    return passed, f'Output starts with "{value}"' if passed else f'Output does not start with "{value}"'


def _ends_with(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    value = _one(spec)
    passed = js_trim(output).endswith(js_trim(value))
    return passed, f'Output ends with "{value}"' if passed else f'Output does not end with "{value}"'


def _regex(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    pattern = _one(spec)
    flags_text = spec.flags or ""
    try:
        passed = js_regex(pattern, flags_text).test(output)  # as JavaScript's RegExp matches, not Python's re
    except JsRegexError as exc:
        raise InvalidAssertion(str(exc)) from None
    label = f" (flags: {flags_text})" if flags_text else ""
    verb = "matches" if passed else "does not match"
    return passed, f"Output {verb} pattern /{pattern}/{flags_text}{label}"


def _equals(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    value = _one(spec)
    passed = js_trim(output) == js_trim(value)
    return passed, f'Output equals "{value}"' if passed else f'Output does not equal "{value}"'


def _is_json(output: str, spec: AssertionSpec) -> tuple[bool, str]:
    if js_json_parses(output):
        return True, "Output is valid JSON"
    return False, "Output is not valid JSON"


_CHECKS: dict[str, Callable[[str, AssertionSpec], tuple[bool, str]]] = {
    "contains": _contains,
    "contains-any": _contains_any,
    "contains-all": _contains_all,
    "icontains": _icontains,
    "icontains-any": lambda output, spec: _contains_any(output, spec, fold=True),
    "icontains-all": lambda output, spec: _contains_all(output, spec, fold=True),
    "starts-with": _starts_with,
    "ends-with": _ends_with,
    "regex": _regex,
    "equals": _equals,
    "is-json": _is_json,
}
