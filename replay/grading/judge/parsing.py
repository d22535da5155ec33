"""Getting the JSON object out of a judge's reply.

Judges wrap JSON in code fences, put prose around it, and write ``"passed": "true"``. This takes the
text between the first ``{`` and the last ``}`` (after removing fences) and turns string or bare-word
booleans in the boolean fields of our schemas into real booleans, as AgentV's ``parseJsonFromText``
does; anything else that does not parse is a :class:`JudgeParseError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?")
_BOOLEAN_FIELD = re.compile(r'("(?:passed|satisfied|pass)"\s*:\s*)(?:"([^"]*)"|([A-Za-z_][A-Za-z0-9_-]*))')
_TRUE_WORDS = {"true", "yes", "y", "pass", "passed", "satisfied"}


class JudgeParseError(ValueError):
    """A judge reply that holds no usable JSON object for the mode's schema."""


def _repair_booleans(text: str) -> str:
    def fix(match: re.Match[str]) -> str:
        word = (match.group(2) if match.group(2) is not None else match.group(3)).strip().lower()
        if match.group(3) is not None and word in ("true", "false", "null"):
            return match.group(0)
        return match.group(1) + ("true" if word in _TRUE_WORDS else "false")

    return _BOOLEAN_FIELD.sub(fix, text)


def extract_json(text: str | None) -> dict[str, Any]:
    """The JSON object in a judge reply; raises :class:`JudgeParseError` with a one-line reason."""
    if text is None or not text.strip():
        raise JudgeParseError("the judge reply is empty")
    cleaned = _FENCE.sub("", text).strip()
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start < 0 or end < start:
        raise JudgeParseError("the judge reply contains no JSON object")
    blob = _repair_booleans(cleaned[start : end + 1])
    try:
        value = json.loads(blob)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"the judge reply is not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(value, dict):
        raise JudgeParseError("the judge reply is not a JSON object")
    return value
