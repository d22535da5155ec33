"""Inspect AI scores as verdicts, and a score's history as its edits.

A score's value is read as Inspect's own ``value_to_float()`` reads it (C 1, P 0.5, I 0, N 0, yes/true
1, no/false 0, numbers and numeric strings as they are). A dict value is one verdict per key, named
``SCORER/KEY``, and a list value one per item, ``SCORER/INDEX``: Inspect's reducers read them so. A value
Inspect leaves out of its metrics (NaN, ``Score.unscored``; a None in a dict) is a skipped verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.grading.graders.base import score_to_verdict

GRADER_TYPE = "inspect-scorer"
"""The grader type of an imported Inspect score (the scorer's registry name is in the verdict's details)."""

UNCHANGED = "UNCHANGED"
"""Inspect's ``ScoreEdit`` sentinel for a field an edit left as it was."""


@dataclass
class ScoreVerdict:
    grader: str
    score: float
    verdict: str
    value: Any
    """The value as the log writes it (one key's or item's, for a dict or list value)."""
    key: str | None = None
    """The dict key or list index this verdict is of, when the value is a dict or a list."""


@dataclass
class ScoreEditRecord:
    edit: int
    value: Any
    previous_value: Any
    changes: dict[str, Any]
    author: str | None
    reason: str | None
    edited_at: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


def _unscored(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def verdicts_of(name: str, value: Any, to_float: Callable[[Any], float]) -> list[ScoreVerdict]:
    """One score's verdicts (see the module's docstring)."""
    if isinstance(value, dict):
        parts: list[tuple[str | None, Any]] = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        parts = [(str(i), v) for i, v in enumerate(value)]
    else:
        parts = [(None, value)]
    out = []
    for key, part in parts:
        grader = name if key is None else f"{name}/{key}"
        if _unscored(part):
            out.append(ScoreVerdict(grader, 0.0, "skip", part, key))
            continue
        score = to_float(part)
        if math.isnan(score) or math.isinf(score):
            out.append(ScoreVerdict(grader, 0.0, "skip", part, key))
        else:
            out.append(ScoreVerdict(grader, score, score_to_verdict(score), part, key))
    return out


def edits_of(score: dict[str, Any]) -> list[ScoreEditRecord]:
    """The edits in a score's ``history``, in order, each with the value before and after it.

    ``history`` holds the original score first (no provenance) when a scorer's score was edited, or
    only edits when the score was added by an edit (``edit_score`` on a name the sample lacked)."""
    current: Any = None
    out: list[ScoreEditRecord] = []
    for entry in score.get("history") or []:
        value = entry.get("value", UNCHANGED)
        provenance = entry.get("provenance")
        if provenance is None:  # the original score, kept when it was first edited
            if value != UNCHANGED:
                current = value
            continue
        after = current if value == UNCHANGED else value
        changes = {k: v for k, v in entry.items() if k != "provenance" and v != UNCHANGED}
        out.append(
            ScoreEditRecord(
                edit=len(out) + 1,
                value=after,
                previous_value=current,
                changes=changes,
                author=provenance.get("author"),
                reason=provenance.get("reason"),
                edited_at=provenance.get("timestamp"),
                metadata=provenance.get("metadata") or {},
            )
        )
        current = after
    return out
