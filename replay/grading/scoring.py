"""From grader verdicts to a test's score, pass/fail and status (AgentV §5.5 and §1.1).

- ``negate`` flips a grader's score (1 - score) and its pass/fail, before anything else looks at it.
- A grader that ended in an execution error (AgentV: verdict ``skip``) drops out of the mean and makes
  the test an ``execution_error`` that cannot pass; ``error`` names the grader and its first failed
  assertion. (The issue's rule. AgentV 4.x itself forces such a test's score to 0.) Its labels say whether
  AgentV would call the test an execution error too (``failures.GRADER``: a grader AgentV skips, such as an
  LLM grader whose judge failed) or a quality failure (``failures.GRADER_SCORED``: only graders AgentV
  scores 0, such as a crashed code grader): only the first stops dependents and counts for ``fail_on_error``.
- A ``required`` grader below its gate forces the test score to 0. The gate is ``min_score``, else the
  numeric ``required`` (a deprecated v4 spelling), else the test's threshold.
- Otherwise the score is the weighted mean over the graders (weight default 1; 0 if the weights sum to 0).
  A grader's own ``fail`` verdict does not change the test score; only its score counts.
- The test passes when its score reaches the threshold; status is ``ok`` or ``quality_failure``. The
  threshold is the test's own ``execution.threshold``, else the run's (:func:`effective_threshold`).

The same rule recomputes a score from AgentV result rows (``scores[]`` entries), which is how imports
are checked and how a replay tells a changed grader from a changed aggregation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from evalstore.replay import failures
from evalstore.replay.grading.errored import UNSCORED, left_out_of_score
from evalstore.replay.grading.turn_verdicts import is_conversation_verdict
from evalstore.store.events import Assertion, ExecutionStatus

if TYPE_CHECKING:  # not at run time: `show` explains scores without loading the graders
    from evalstore.replay.grading.graders.base import GraderResult

NEGATED_PREFIX = "[Negated]"


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # a domain class, not a pytest test class

    score: float
    passed: bool
    status: ExecutionStatus
    error: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    """AgentV's ``failure_stage`` and ``failure_reason_code`` of an execution error (``failures``)."""


class _ScoredSpec(Protocol):
    """What scoring reads from a grader spec (any of ``evalstore.replay.evalfile.specs``' grader specs)."""

    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> float: ...
    @property
    def required(self) -> bool | float: ...
    @property
    def min_score(self) -> float | None: ...


@dataclass(frozen=True)
class _Entry:
    """One grader's contribution, whatever it was read from."""

    name: str
    score: float
    weight: float
    required: bool | float
    min_score: float | None
    errored: bool
    first_failure: str | None
    scored_by_agentv: bool = False
    """An execution error AgentV scores 0 instead of skipping (``GraderResult.scored_by_agentv``)."""


def apply_negate(result: GraderResult) -> GraderResult:
    """The result of the negated grader. An execution error stays what it is: there is nothing to flip."""
    if is_execution_error(result):
        return result
    flipped = {"pass": "fail", "fail": "pass"}
    return replace(
        result,
        score=1.0 - result.score,
        verdict=flipped.get(result.verdict, result.verdict),
        assertions=[_negate_assertion(a) for a in result.assertions],
    )


def _negate_assertion(assertion: Assertion) -> Assertion:
    # As AgentV's negateScore: the prefix marks evidence there was; no evidence stays none.
    evidence = f"{NEGATED_PREFIX} {assertion.evidence}" if assertion.evidence else None
    return Assertion(text=assertion.text, passed=not assertion.passed, evidence=evidence)


def is_execution_error(result: GraderResult) -> bool:
    return result.status == "execution_error"


def effective_threshold(own: float | None, run: float | None, suite: float) -> float:
    """The threshold a test is graded at: its own ``execution.threshold``, else the run's (``--threshold``),
    else the suite's. AgentV 4.42.4 lets the test's own win even over ``--threshold`` (``orchestrator.ts``
    ``effectiveThreshold = evalCase.threshold ?? caseThreshold``, used for the required gate and the status)."""
    if own is not None:
        return own
    return run if run is not None else suite


def required_gate(required: bool | float, min_score: float | None, threshold: float) -> float | None:
    """The score a required grader must reach, or None when the grader is not required."""
    if isinstance(required, bool):
        if not required:
            return None
        return min_score if min_score is not None else threshold
    if not required:
        return None
    return min_score if min_score is not None else float(required)


def explain_score(
    verdicts: Iterable[Any],
    threshold: float,
    score: float | None = None,
    specs: Callable[[], Sequence[_ScoredSpec] | None] | None = None,
) -> str:
    """Why a test scored what it did, when its graders' scores do not say it: the required grader whose
    gate set the score to 0 and why (:func:`gate_note`), and the graders an execution error left out of the
    mean ('' when the score is simply the weighted mean). ``verdicts``: recorded verdicts
    (``VerdictRecorded``). The one note ``show``, ``run`` and ``replay`` give, whatever made the run (an
    import too: ``views.noted_results``).

    ``score``, the test's, and ``specs``, the test's graders as its eval has them (called only when
    needed): a 0 where no recorded verdict is required but the graders' weighted mean is not 0 was set by
    a required grader's gate the verdicts do not mark (an import: AgentV's results do not say which grader
    is required). The eval's required grader below its gate is named; without the eval none is: only a
    required grader is ever named."""
    verdicts = list(verdicts)
    errored = [v for v in verdicts if v.status == "execution_error"]
    unscored = [v for v in verdicts if left_out_of_score(v.status) and v not in errored]
    counted = [v for v in verdicts if not left_out_of_score(v.status)]
    parts = []
    gated = _gated(((v, v.required, v.min_score) for v in counted), threshold)
    if gated is None and score == 0 and not any(v.required for v in counted):
        mean = weighted_mean((v.score, v.weight) for v in counted)
        # (A conversation's score is its turns' mean, min or max: a 0 there says nothing of a gate.)
        if mean > 0 and not any(is_conversation_verdict(v.grader) for v in counted):
            found = specs() if specs is not None else None
            by_name = {s.name: s for s in found or ()}
            of_eval = ((v, s.required, s.min_score) for v in counted if (s := by_name.get(v.grader)) is not None)
            gated = _gated(of_eval, threshold)
            if gated is None and errored:
                # Only an AgentV row scores so (an import): evalstore's own rule leaves the grader out.
                parts.append(
                    f"score 0 where its graders' mean is {mean:.3f}: AgentV 4.x scores a test 0 when one of its "
                    "graders fails to run (a regrade here scores the mean)"
                )
            elif gated is None:
                parts.append(
                    f"score 0 where its graders' mean is {mean:.3f}: set by a required grader's gate"
                    + ("" if found else " (the results do not say which grader is required)")
                )
    if gated is not None:
        parts.append(gate_note(gated[0].grader, gated[0].score, *gated[1:], threshold))
    if errored:
        names = ", ".join(v.grader for v in errored)
        parts.append(f"{names} failed to run (execution error): left out of the score")
    if unscored:
        parts.append(f"{', '.join(v.grader for v in unscored)} unscored: left out of the score")
    return "; ".join(parts)


def _gated(
    graders: Iterable[tuple[Any, bool | float, float | None]], threshold: float
) -> tuple[Any, bool | float, float | None] | None:
    """The first ``(verdict, required, min_score)`` whose grader is required and scored below its gate, as
    :func:`_aggregate` finds the grader that sets the test's score to 0; None when there is none."""
    for verdict, required, min_score in graders:
        gate = required_gate(required, min_score, threshold)
        if gate is not None and verdict.score < gate:
            return verdict, required, min_score
    return None


def gate_note(grader: str, score: float, required: bool | float, min_score: float | None, threshold: float) -> str:
    """Why required grader ``grader`` set its test's score to 0, by the gate it fell below
    (:func:`required_gate`): its ``min_score`` (whatever its own verdict: a grader may pass and still fall
    below it), else its numeric ``required``, else the threshold (it failed)."""
    if min_score is not None:
        why = f"scored {score:.3f}, below its min_score {min_score:.3f}"
    elif not isinstance(required, bool):
        why = f"scored {score:.3f}, below its required {float(required):.3f}"
    else:
        why = f"failed ({score:.3f}, below the threshold {threshold:.3f})"
    return f"required grader {grader} {why}: score 0"


def score_test(
    verdicts: Sequence[tuple[_ScoredSpec, GraderResult]], threshold: float, answer_error: str | None = None
) -> TestOutcome:
    """The test outcome for graded results (``negate`` already applied). ``answer_error``: the target's
    error, when a result that failed is graded all the same (an errored Inspect sample, as ``inspect score``
    grades it): scored as its graders say, it is the agent's execution error, which cannot pass, as a
    run's agent failure (a regrade once passed it, and ``compare`` counted it fail->pass)."""
    entries = [
        _Entry(
            name=spec.name,
            score=result.score,
            weight=spec.weight,
            required=spec.required,
            min_score=spec.min_score,
            errored=is_execution_error(result),
            first_failure=next((a.text for a in result.assertions if not a.passed), None),
            scored_by_agentv=result.scored_by_agentv,
        )
        for spec, result in verdicts
        if result.status != UNSCORED  # no score, no error: left out
    ]
    outcome = _aggregate(entries, threshold)
    if answer_error is not None:
        return replace(outcome, passed=False, status="execution_error", error=answer_error, labels=failures.AGENT)
    return outcome


def score_recorded(scores: list[dict[str, Any]], threshold: float = 0.8) -> TestOutcome | None:
    """The test outcome recomputed from AgentV ``scores[]`` entries; None when there are none (AgentV
    omits ``scores`` from some rows, e.g. an implicit grader in v4 baselines) or none has a score (an
    entry whose ``status`` is ``unscored`` is left out)."""
    if not scores:
        return None
    entries = []
    for item in scores:
        if item.get("status") == UNSCORED:  # no score, no error: left out
            continue
        assertions = item.get("assertions") or []
        weight = item.get("weight")
        entries.append(
            _Entry(
                name=str(item.get("name") or item.get("type") or "grader"),
                score=float(item.get("score") or 0.0),
                weight=1.0 if weight is None else float(weight),
                required=item.get("required") or False,
                min_score=item.get("min_score"),
                errored=item.get("verdict") == "skip",
                first_failure=next(
                    (a.get("text") for a in assertions if isinstance(a, dict) and not a.get("passed")), None
                ),
            )
        )
    if not entries:  # every one unscored
        return None
    return _aggregate(entries, threshold)


def _aggregate(entries: list[_Entry], threshold: float) -> TestOutcome:
    # The rule: graders that ended in an execution error drop out of the mean (their 0 is not
    # a judgement of quality); the test still reports execution_error and cannot pass.
    errored = [e for e in entries if e.errored]
    graded = [e for e in entries if not e.errored]
    score = weighted_mean((e.score, e.weight) for e in graded)
    for entry in graded:
        gate = required_gate(entry.required, entry.min_score, threshold)
        if gate is not None and entry.score < gate:
            score = 0.0
            break
    if errored:
        first = errored[0]
        # AgentV's execution error when one of them is a grader AgentV skips; when AgentV scores each of them
        # 0, AgentV's test is a quality failure (buildSkippedEvaluatorError reads only ``skip`` verdicts).
        agentv = any(not e.scored_by_agentv for e in errored)
        return TestOutcome(
            score=score,
            passed=False,
            status="execution_error",
            error=f"{first.name}: {first.first_failure or 'execution error'}",
            labels=failures.GRADER if agentv else failures.GRADER_SCORED,
        )
    passed = score >= threshold
    return TestOutcome(score=score, passed=passed, status="ok" if passed else "quality_failure")


def weighted_mean(scores: Iterable[tuple[float, float]]) -> float:
    """The weighted mean of ``(score, weight)`` pairs: a test's score from the graders that count; 0 when
    their weights sum to 0."""
    pairs = list(scores)
    total_weight = sum(weight for _, weight in pairs)
    if total_weight <= 0:
        return 0.0
    return sum(score * weight for score, weight in pairs) / total_weight


def produced_now() -> str:
    """``TestScored.produced_at`` of a result graded now (UTC, as the store writes times). Kept in the
    payload, so a run moved to another store keeps when its results were produced, where the events'
    own ``recorded_at`` is the copy's (``export`` writes it as the row's ``timestamp``)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
