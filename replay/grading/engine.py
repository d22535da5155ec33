"""The grading engine: one test's transcript in, verdict and score events out.

Recording a run, importing one and replaying one all grade through :func:`grade_test`, so there is one
implementation of graders, negation and scoring. Everything is written through a ``Recorder``; the
caller decides when the buffered events become durable (one atomic append per test).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from evalstore.replay.evalfile.specs import (
    AssertionSpec,
    CodeGraderSpec,
    CompositeSpec,
    CostSpec,
    EvalSuite,
    EvalTest,
    ExecutionMetricsSpec,
    FieldAccuracySpec,
    GraderSpec,
    LatencySpec,
    LlmGraderSpec,
    SkillTriggerSpec,
    TokenUsageSpec,
    ToolTrajectorySpec,
    UnknownTypeSpec,
    result_type,
)
from evalstore.replay.grading.graders.base import (
    GradeOptions,
    GraderResult,
    GraderThrew,
    GradingContext,
    Recorder,
    TranscriptInfo,
    no_wait,
)
from evalstore.replay.grading.overlap import overlapping
from evalstore.replay.grading.scoring import apply_negate, effective_threshold, produced_now, score_test
from evalstore.store.errors import is_database_failure
from evalstore.store.events import Assertion, TestScored, VerdictRecorded

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.pool import JudgePool


def make_grader(spec):  # type: ignore[no-untyped-def]
    """The grader implementation for a spec."""
    if isinstance(spec, CodeGraderSpec):
        from evalstore.replay.grading.graders.code import CodeGrader

        return CodeGrader(spec)
    if isinstance(spec, LlmGraderSpec):
        from evalstore.replay.grading.graders.llm import LlmGrader

        return LlmGrader(spec)
    if isinstance(spec, AssertionSpec):
        from evalstore.replay.grading.graders.deterministic import AssertionGrader

        return AssertionGrader(spec)
    if isinstance(spec, ToolTrajectorySpec):
        from evalstore.replay.grading.graders.trajectory import ToolTrajectoryGrader

        return ToolTrajectoryGrader(spec)
    if isinstance(spec, FieldAccuracySpec):
        from evalstore.replay.grading.graders.field_accuracy import FieldAccuracyGrader

        return FieldAccuracyGrader(spec)
    if isinstance(spec, CompositeSpec):
        from evalstore.replay.grading.graders.composite import CompositeGrader

        return CompositeGrader(spec)
    if isinstance(spec, UnknownTypeSpec):
        from evalstore.replay.grading.graders.unknown import UnknownTypeGrader

        return UnknownTypeGrader(spec)
    from evalstore.replay.grading.graders import metrics

    graders: dict[type, Any] = {
        LatencySpec: metrics.LatencyGrader,
        CostSpec: metrics.CostGrader,
        TokenUsageSpec: metrics.TokenUsageGrader,
        ExecutionMetricsSpec: metrics.ExecutionMetricsGrader,
        SkillTriggerSpec: metrics.SkillTriggerGrader,
    }
    grader = graders.get(type(spec))
    if grader is None:
        raise TypeError(f"no grader for {type(spec).__name__}")
    return grader(spec)


def missing_runtime(test: EvalTest, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why this test cannot be graded here: a custom assertion among its graders (a composite's members
    too) whose runtime is not installed. AgentV runs ``.agentv/assertions/NAME.ts`` with ``bun run``, and so
    does evalstore; without ``bun`` the test is ``not_regradable`` (in ``run`` and ``replay`` alike)."""
    for spec in _all_graders(test.graders):
        if isinstance(spec, CodeGraderSpec) and spec.custom_type and which(spec.command[0]) is None:
            return (
                f"custom assertion `{spec.custom_type}` ({spec.script}) runs with `{' '.join(spec.command[:2])}`, "
                f"as AgentV runs it, and `{spec.command[0]}` is not installed"
            )
    return None


def _all_graders(specs: Iterable[GraderSpec]) -> Iterable[GraderSpec]:
    for spec in specs:
        yield spec
        if isinstance(spec, CompositeSpec):
            yield from _all_graders(spec.assertions)


@dataclass
class TestGrade:
    """What grading one test produced: the score event and each verdict (with its event id)."""

    scored: TestScored
    verdicts: list[tuple[str, VerdictRecorded]]


def grade_test(
    suite: EvalSuite,
    test: EvalTest,
    transcript: TranscriptInfo,
    recorder: Recorder,
    *,
    target: str | None = None,
    attempt: int = 1,
    options: GradeOptions | None = None,
    judges: JudgePool | None = None,
    only: Iterable[str] | None = None,
    carried: Mapping[str, tuple[str, VerdictRecorded]] | None = None,
    test_waiting: Callable[[], None] = no_wait,
) -> TestGrade:
    """Grade one test and record a verdict per grader plus the test score.

    ``only`` names the graders to run; every other grader's verdict is taken from ``carried``
    (``grader name -> (parent verdict event id, verdict)``) and recorded as carried over.
    ``test_waiting``: see ``GradingContext.test_waiting``.
    """
    options = options or GradeOptions()
    if test.mode == "conversation":
        from evalstore.replay.grading.conversation import grade_conversation

        return grade_conversation(
            suite,
            test,
            transcript,
            recorder,
            target=target,
            attempt=attempt,
            options=options,
            judges=judges,
            only=set(only) if only is not None else None,
            carried=carried or {},
            test_waiting=test_waiting,
        )
    ctx = GradingContext(
        suite=suite,
        test=test,
        transcript=transcript,
        recorder=recorder,
        target=target,
        attempt=attempt,
        options=options,
        judges=judges,
        test_waiting=test_waiting,
    )
    selected = set(only) if only is not None else None
    carried = carried or {}
    threshold = effective_threshold(test.threshold, options.threshold, suite.threshold)
    graded = [
        spec
        for spec in test.graders
        if not (selected is not None and spec.name not in selected and spec.name in carried)
    ]
    graded_names = {spec.name for spec in graded}
    # Graded in order, overlapping where one waits on a process or a judge (grading/overlap.py); each
    # grader's events are recorded below, in order, just before its verdict.
    outcomes = iter(overlapping(ctx, [partial(_graded, spec) for spec in graded]))
    scored_inputs: list[tuple[GraderSpec, GraderResult]] = []
    verdicts: list[tuple[str, VerdictRecorded]] = []
    for spec in test.graders:
        if spec.name not in graded_names:
            parent_id, parent = carried[spec.name]
            verdict = parent.model_copy(update={"origin": "carried", "carried_from": parent_id, "source": None})
            scored_inputs.append((spec, _result_of(spec, parent)))
        else:
            result, buffer = next(outcomes)
            buffer.add_to(recorder)
            verdict = _verdict_event(spec, result, ctx)
            scored_inputs.append((spec, result))
        verdicts.append((recorder.record(verdict), verdict))
    outcome = score_test(scored_inputs, threshold, transcript.error)
    scored = TestScored(
        test_id=test.id,
        target=target,
        attempt=attempt,
        score=outcome.score,
        passed=outcome.passed,
        status=outcome.status,
        threshold=threshold,
        error=outcome.error,
        produced_at=produced_now(),
        graders=[v.grader for _, v in verdicts],
        row_fields=outcome.labels,
    )
    recorder.record(scored)
    return TestGrade(scored=scored, verdicts=verdicts)


def grade_graders(ctx: GradingContext, specs: list[GraderSpec]) -> list[GraderResult]:
    """``specs`` graded in order (overlapping where they wait), their events added to ``ctx.recorder`` in
    order; no verdict is recorded (a conversation's turn records one for all of them)."""
    results = []
    for result, buffer in overlapping(ctx, [partial(_graded, spec) for spec in specs]):
        buffer.add_to(ctx.recorder)
        results.append(result)
    return results


def _graded(spec: GraderSpec, ctx: GradingContext) -> GraderResult:
    result = _grade_one(spec, ctx)
    return apply_negate(result) if spec.negate else result


def grade_member(spec: GraderSpec, ctx: GradingContext) -> GraderResult:
    """A composite's member graded as a grader of the test is, without its ``negate`` (AgentV's composite
    evaluates its members directly; one that throws makes the composite throw)."""
    return _grade_one(spec, ctx, member=True)


def _grade_one(spec, ctx: GradingContext, *, member: bool = False) -> GraderResult:  # type: ignore[no-untyped-def]
    if ctx.transcript.missing and not isinstance(spec, AssertionSpec) and ctx.transcript.output_text is None:
        return _execution_error(f"cannot grade: {ctx.transcript.missing}")
    try:
        return make_grader(spec).grade(ctx)
    except GraderThrew as exc:
        if member:
            raise
        return grader_threw(spec, str(exc), exc.why)
    except Exception as exc:
        if is_database_failure(exc):
            raise  # the store failed, not the grader: no verdict is recorded, and a resume grades the test
        result = _execution_error(f"grader {spec.name!r} failed: {type(exc).__name__}: {exc}")
        # AgentV scores a grader that throws 0 ("Grader 'NAME' failed"), but for the implicit grader of a test
        # without assertions, whose throw is the test's execution error (``grader_threw``).
        result.scored_by_agentv = not _implicit(spec)
        return result


def grader_threw(spec: GraderSpec, message: str, why: str | None = None) -> GraderResult:
    """A grader that threw, recorded as AgentV 4.42.4 records it: a grader of the test's ``assertions`` scores
    0 and fails with "Grader 'NAME' failed: MESSAGE" (``runEvaluatorList``'s catch, orchestrator.ts:2806), a
    quality verdict that counts in the mean; the implicit grader of a test without assertions is run outside
    that catch, so the test ends in an execution error with the message (``runEvalCase``, orchestrator.ts:2219)."""
    if _implicit(spec):
        result = _execution_error(message)
    else:
        text = f"Grader '{spec.name}' failed: {message}"
        result = GraderResult(
            score=0.0, verdict="fail", evidence=[text], assertions=[Assertion(text=text, passed=False)]
        )
    if why:
        result.evidence.append(why)
    return result


def _implicit(spec: GraderSpec) -> bool:
    """The LLM grader a test without assertions gets (AgentV runs it outside its graders' catch)."""
    return isinstance(spec, LlmGraderSpec) and spec.declared_type == "implicit"


def _execution_error(message: str) -> GraderResult:
    return GraderResult(
        score=0.0,
        verdict="skip",
        status="execution_error",
        evidence=[message],
        assertions=[Assertion(text=message, passed=False)],
    )


def _verdict_event(spec, result: GraderResult, ctx: GradingContext) -> VerdictRecorded:  # type: ignore[no-untyped-def]
    return VerdictRecorded(
        test_id=ctx.test.id,
        target=ctx.target,
        attempt=ctx.attempt,
        grader=spec.name,
        grader_type=result_type(spec),
        score=result.score,
        verdict=result.verdict,  # type: ignore[arg-type]
        status=result.status,  # type: ignore[arg-type]
        assertions=result.assertions,
        weight=spec.weight,
        required=spec.required,
        min_score=spec.min_score,
        negate=spec.negate,
        details=result.details,
        evidence=result.evidence,
        cache_hit=result.cache_hit,
        transcript_event_id=ctx.transcript.event_id,
        preprocessing_event_ids=result.preprocessing_event_ids,
        grader_call_event_ids=result.grader_call_event_ids,
        grader_target=result.grader_target,
        rendered_prompt_sha256=result.rendered_prompt_sha256,
    )


def _result_of(spec: GraderSpec, verdict: VerdictRecorded) -> GraderResult:
    """A carried verdict as a result to score. Whether AgentV would have scored its execution error 0 is not
    recorded on the verdict: a code grader's is (AgentV's code grader never skips), any other's is taken for
    AgentV's ``skip``."""
    return GraderResult(
        score=verdict.score,
        verdict=verdict.verdict,
        status=verdict.status,
        assertions=list(verdict.assertions),
        details=verdict.details,
        evidence=list(verdict.evidence),
        cache_hit=verdict.cache_hit,
        scored_by_agentv=verdict.status == "execution_error" and isinstance(spec, CodeGraderSpec),
    )
