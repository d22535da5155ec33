"""``agentv compare``'s summary of two runs: each paired test a win, a loss or a tie, the mean difference
and a verdict (AgentV 4.42.4, apps/cli/src/commands/compare/index.ts: ``classifyOutcome``,
``computeNormalizedGain``, ``compareResults`` and ``formatTable``'s status).

A test is a win when B's score is at least ``threshold`` above A's, a loss when it is at least
``threshold`` below, else a tie (``--threshold``, 0.1 by default, as AgentV's); the difference is the
float ``score_b - score_a``, so 0.6 against 0.5 is a tie at 0.1, as in AgentV. The mean difference and the
mean normalized gain are rounded to three places as AgentV rounds them (``Math.round``: halves up), and
the status is ``improved``, ``regressed`` or ``neutral`` by the sign of that rounded mean; the differences
are added one after the other in the order run A holds its results, as AgentV adds them in its baseline
file's order (for a test repeated in that file, AgentV's place is its first row, evalstore's its last,
the one kept). AgentV pairs
results by test id; here they are the comparison's pairs (test, target and attempt), which are the same
for runs of one target without trials.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Outcome = Literal["win", "loss", "tie"]
Status = Literal["improved", "regressed", "neutral"]


def outcome(delta: float, threshold: float) -> Outcome:
    """AgentV's ``classifyOutcome``: both bounds inclusive."""
    if delta >= threshold:
        return "win"
    if delta <= -threshold:
        return "loss"
    return "tie"


def normalized_gain(score_a: float, score_b: float) -> float | None:
    """Hake's normalized gain, ``(b - a) / (1 - a)``: the improvement as a share of the room A left; None
    where A scored 1 (no room)."""
    if score_a >= 1.0:
        return None
    return (score_b - score_a) / (1 - score_a)


def _round3(x: float) -> float:
    # JavaScript's Math.round(x * 1000) / 1000: halves go up (Python's round() goes to even).
    return math.floor(x * 1000 + 0.5) / 1000


@dataclass(frozen=True, slots=True)
class Outcomes:
    threshold: float
    wins: int
    losses: int
    ties: int
    mean_delta: float
    """Over the paired tests, rounded to three places (0 when none are paired)."""
    mean_normalized_gain: float | None
    """Over the paired tests A did not score 1, rounded to three places; None when there are none."""

    @property
    def status(self) -> Status:
        if self.mean_delta > 0:
            return "improved"
        return "regressed" if self.mean_delta < 0 else "neutral"

    def to_dict(self) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "mean_delta": self.mean_delta,
            "mean_normalized_gain": self.mean_normalized_gain,
            "status": self.status,
        }


def outcomes(pairs: Iterable[tuple[float, float]], threshold: float) -> Outcomes:
    """The summary of paired scores ``(a, b)``."""
    counts = {"win": 0, "loss": 0, "tie": 0}
    deltas: list[float] = []
    gains: list[float] = []
    for a, b in pairs:
        delta = b - a
        deltas.append(delta)
        counts[outcome(delta, threshold)] += 1
        if (gain := normalized_gain(a, b)) is not None:
            gains.append(gain)
    return Outcomes(
        threshold=threshold,
        wins=counts["win"],
        losses=counts["loss"],
        ties=counts["tie"],
        mean_delta=_round3(_js_sum(deltas) / len(deltas)) if deltas else 0.0,
        mean_normalized_gain=_round3(_js_sum(gains) / len(gains)) if gains else None,
    )


def _js_sum(values: list[float]) -> float:
    """``values.reduce((sum, v) => sum + v, 0)``: one addition after the other, in order, as AgentV sums
    (Python 3.12's ``sum`` compensates for rounding, and a mean at a rounding boundary would differ)."""
    total = 0.0
    for value in values:
        total += value
    return total
