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

import regex

from evalstore.replay.jstext import js_regex, js_trim

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?")
_PASSED_FIELD = js_regex(r'("passed"\s*:\s*)(?:"([^"]+)"|([A-Za-z_][A-Za-z0-9_-]*))', "gi").compiled
"""AgentV's ``repairSchemaNearBooleanFields``, pattern and flags as it writes them: only ``passed`` (in any
letter case) is repaired; ``satisfied`` is left for the schema to refuse."""


class JudgeParseError(ValueError):
    """A judge reply that holds no usable JSON object for the mode's schema."""


def _repair_booleans(text: str) -> str:
    """A quoted value or a bare word after ``"passed":`` becomes ``true`` when it reads true, else ``false``
    (``null`` and ``"yes"`` too), as AgentV repairs it."""

    def fix(match: regex.Match[str]) -> str:
        word = js_trim(match.group(2) if match.group(2) is not None else match.group(3) or "").lower()
        return match.group(1) + ("true" if word == "true" else "false")

    return _PASSED_FIELD.sub(fix, text)


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


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
        value = json.loads(blob, parse_constant=_refuse)  # NaN and Infinity are not JSON to JSON.parse
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"the judge reply is not valid JSON ({exc.msg} at char {exc.pos})") from None
    except ValueError as exc:
        raise JudgeParseError(f"the judge reply is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise JudgeParseError("the judge reply is not a JSON object")
    return value
