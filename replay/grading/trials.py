"""Trials (``execution.trials``): each test run ``count`` times, the trials' scores made one, as AgentV 4.42.4
does (``orchestrator.ts`` ``runEvalCaseWithTrials``, ``trials.ts``).

- ``pass_at_k`` (the default): the best trial's score; trials stop at the first that passes (its score at
  least 0.8, AgentV's ``scoreToVerdict``, whatever the run's threshold).
- ``mean``: the mean of the trials' scores (with their min and max).
- ``confidence_interval``: the lower bound of the 95% confidence interval of the mean (Student's t with
  n - 1 degrees of freedom, AgentV's table; 1.96 from 30), clamped to 0..1; with one trial, the mean.
- ``cost_limit_usd``: trials stop once the trials' cost reaches it (a trial whose cost is unknown adds 0).

Each trial is a result of its own in evalstore (attempt 1, 2, ...); this is the one score AgentV reports
for the test, and its pass: any trial's (AgentV's ``hasOk``), not the one score's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.evalfile.specs import TrialsSpec
from evalstore.replay.grading.graders.base import PASS_SCORE

_T_95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
    2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045,
)  # fmt: skip
"""Two-tailed t critical values at 95% for 1..29 degrees of freedom (AgentV's ``T_TABLE_95``)."""


def t_critical(df: int) -> float:
    if df < 1:
        return _T_95[0]
    return 1.96 if df >= 30 else _T_95[df - 1]


@dataclass
class TrialsOutcome:
    """A test's trials made one score."""

    score: float
    passed: bool
    aggregation: dict[str, Any] = field(default_factory=dict)
    """AgentV's ``aggregation`` object (strategy and its figures)."""
    trials: int = 0
    cost_limited: bool = False


def more_trials(spec: TrialsSpec, scores: list[float], costs: list[float | None]) -> bool:
    """Whether another trial runs after these (AgentV's early exits)."""
    if len(scores) >= spec.count:
        return False
    if spec.cost_limit_usd is not None and sum(c or 0.0 for c in costs) >= spec.cost_limit_usd:
        return False
    return not (spec.strategy == "pass_at_k" and scores and scores[-1] >= PASS_SCORE)


def aggregate(
    spec: TrialsSpec,
    scores: list[float],
    threshold: float,
    costs: list[float | None],
    passed: list[bool] | None = None,
) -> TrialsOutcome:
    """``aggregateTrials``: the trials' scores as one (``scores`` in trial order, at least one). The test
    passes when any trial passed (``passed``, each trial's own; else its score at ``threshold``), as
    AgentV's status is ``ok`` when any trial's is (``runEvalCaseWithTrials`` ``hasOk``): with ``mean`` or
    ``confidence_interval`` the one score may be below the threshold while the test passes."""
    n = len(scores)
    if spec.strategy == "mean":
        score = sum(scores) / n
        aggregation: dict[str, Any] = {"strategy": "mean", "mean": score, "min": min(scores), "max": max(scores)}
    elif spec.strategy == "confidence_interval":
        mean = sum(scores) / n
        if n < 2:
            low = high = _clamp(mean)
            stddev = 0.0
        else:
            stddev = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
            margin = t_critical(n - 1) * stddev / math.sqrt(n)
            low, high = _clamp(mean - margin), _clamp(mean + margin)
        score = low
        aggregation = {
            "strategy": "confidence_interval",
            "mean": mean,
            "ci95_lower": low,
            "ci95_upper": high,
            "stddev": stddev,
        }
    else:
        score = max(scores)
        passed_attempts = sum(1 for s in scores if s >= PASS_SCORE)
        aggregation = {"strategy": "pass_at_k", "passed_attempts": passed_attempts, "total_attempts": n}
    limited = spec.cost_limit_usd is not None and sum(c or 0.0 for c in costs) >= spec.cost_limit_usd
    passed = passed if passed is not None else [s >= threshold for s in scores]
    return TrialsOutcome(score, any(passed), aggregation, n, limited)


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))
