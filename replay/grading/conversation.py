"""A conversation test (``mode: conversation``) graded as AgentV 4.42.4 grades it (``orchestrator.ts``,
``runConversationMode``).

The conversation starts from the test's input messages (a content that is not a string as its JSON); each
turn adds the user's input, the agent is asked with the conversation so far (the system messages and the
last ``window_size`` exchanges, when set), and its answer (the last assistant text) is added. Each turn is
graded on its answer by its own graders (``TurnSpec.graders``), which see as the question the conversation
through that answer written ``role: content`` with blank lines between, and no reference answer; a turn
with no assertion and no expected output scores 1. Its score is its graders' weighted score (AgentV's
``evaluateCandidate``); with ``on_turn_failure: stop`` a turn below the threshold ends the conversation:
the agent is not asked again and each later turn scores 0 (``Skipped due to previous turn failure``).
A turn whose call to the agent failed scores 0 (``Provider error: ...``). The test's own graders then
grade the whole conversation (the transcript as that text is their answer and question). The test's
score is the mean, min or max (``aggregation``) of the turns' scores and the conversation's.

Each turn is recorded as one verdict, ``turn-N`` (``conversation`` for the whole), of type ``rubrics``
as AgentV writes them, holding its graders' assertions, calls and conversions, its graders' own results
in ``details.scores``. As AgentV's conversation runner, the test's status is its score's (``ok`` or
``quality_failure``) whatever failed in a turn: a failed agent call is a turn scored 0, and a grader that
could not grade is left out of its turn's score (``scoring.score_test``), so neither makes the test an
execution error (for ``depends_on`` and ``fail_on_error``, which read that status) or gives it an
``error``, ``failure_stage`` or ``failure_reason_code``. Where evalstore differs: a replay grades each
turn on the answer the run recorded, and a turn the run never asked (it stopped before it, and the
regraded turns no longer would) is an execution error naming why, as is the test: there is no answer to
grade, where AgentV would have asked the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from evalstore.replay.content import Message
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest, GraderSpec, TurnSpec, result_type
from evalstore.replay.grading.graders.base import (
    GradeOptions,
    GraderResult,
    GradingContext,
    Recorder,
    TranscriptInfo,
    no_wait,
)
from evalstore.replay.grading.scoring import effective_threshold, produced_now, score_test
from evalstore.replay.grading.turn_verdicts import SKIPPED, TURN_TYPE, WHOLE, turn_verdict
from evalstore.replay.jsontext import stringify
from evalstore.store.events import Assertion, TestScored, VerdictRecorded

if TYPE_CHECKING:
    from evalstore.replay.grading.engine import TestGrade
    from evalstore.replay.grading.judge.pool import JudgePool

TURN_ERROR = "turn_error"
"""Where a recorded user message keeps the error of the agent call it was sent with (``metadata``)."""


def as_text(content: Any) -> str:
    """A message content as AgentV puts it in the conversation: a string as it is, anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        content = [b.model_dump(mode="json", exclude_none=True) if hasattr(b, "model_dump") else b for b in content]
    return stringify(content).decode("utf-8")


def opening(test: EvalTest) -> list[Message]:
    """The conversation before the first turn: the test's input messages, their content as text."""
    return [Message(role=m.role, content=as_text(m.content)) for m in test.input]


def windowed(history: list[Message], window: int | None) -> list[Message]:
    """AgentV's ``buildWindowedHistory``: the system messages and the last ``window`` exchanges."""
    if not window:
        return list(history)
    others = [m for m in history if m.role != "system"]
    return [m for m in history if m.role == "system"] + others[-window * 2 :]


def context_text(history: list[Message]) -> str:
    """The conversation as graders see it (AgentV's ``buildConversationContext``)."""
    return "\n\n".join(f"{m.role}: {as_text(m.content)}" for m in history)


def user_turn(turn: TurnSpec) -> Message:
    return Message(role="user", content=turn.input)


@dataclass(frozen=True)
class RecordedTurn:
    """One turn as a transcript holds it."""

    history: list[Message]
    """The conversation through this turn's answer (without it when the call failed)."""
    answer: Message | None
    error: str | None = None
    """Why the agent gave no answer (its call failed)."""


def recorded_turns(test: EvalTest, messages: list[Message]) -> list[RecordedTurn | None]:
    """Each turn of ``test`` as ``messages`` (a recorded conversation) hold it; None for a turn they do not
    reach. The turns' user messages follow the test's input, each followed by the agent's answer."""
    n = len(test.input)
    at = n if [m.role for m in messages[:n]] == [m.role for m in test.input] else 0
    out: list[RecordedTurn | None] = []
    for _ in test.turns:
        if at >= len(messages) or messages[at].role != "user":
            out.append(None)
            continue
        user = messages[at]
        at += 1
        error = (user.metadata or {}).get(TURN_ERROR)
        answer = None
        if at < len(messages) and messages[at].role == "assistant":
            answer = messages[at]
            at += 1
        out.append(RecordedTurn(history=messages[:at], answer=answer, error=error if answer is None else None))
    return out


@dataclass
class _Graded:
    verdict: VerdictRecorded
    score: float


@dataclass
class ConversationGrader:
    """A conversation test's grading: turn by turn as the agent answers (``evalstore run``), or from the
    recorded conversation (a replay, a resumed run); :meth:`finish` records the verdicts and the score."""

    suite: EvalSuite
    test: EvalTest
    recorder: Recorder
    target: str | None = None
    attempt: int = 1
    options: GradeOptions = field(default_factory=GradeOptions)
    judges: JudgePool | None = None
    only: set[str] | None = None
    carried: Mapping[str, tuple[str, VerdictRecorded]] = field(default_factory=dict)
    graded: dict[int, _Graded] = field(default_factory=dict)
    stopped: bool = False
    unanswered: list[int] = field(default_factory=list)
    """Turns the recorded conversation does not reach (a replay's: the run stopped before them)."""
    test_waiting: Callable[[], None] = no_wait
    """``GradingContext.test_waiting`` of every turn's graders."""

    @property
    def threshold(self) -> float:
        return effective_threshold(self.test.threshold, self.options.threshold, self.suite.threshold)

    def grade_turn(self, n: int, history: list[Message], answer: Message, transcript: TranscriptInfo) -> float:
        """Grade turn ``n`` (1-based) on ``answer``, the last message of ``history``; returns its score."""
        name = turn_verdict(n)
        if self._carry(name, n):
            return self.graded[n].score
        turn = self.test.turns[n - 1]
        if not turn.graders:
            return self._keep(n, self._verdict(name, GraderResult(score=1.0, verdict="pass"), transcript, []))
        shown = windowed(history, self.test.window_size)
        test = self.test.model_copy(
            update={"input": shown, "expected_output": turn.expected_output, "graders": turn.graders, "turns": []}
        )
        seen = replace(transcript, messages=[answer], output_text=as_text(answer.content), file_changes=None)
        return self._keep(n, self._graded(name, test, seen, context_text(shown), transcript))

    def turn_failed(self, n: int, error: str, transcript: TranscriptInfo) -> float:
        """Turn ``n``'s call to the agent failed (AgentV: 0, ``Provider error: ...``)."""
        name = turn_verdict(n)
        if not self._carry(name, n):
            # The provider's message, as AgentV's turn gives it: evalstore's target errors begin by naming the
            # target (and the attempts, which a turn never has).
            message = error.removeprefix(f"target '{self.target}': ")
            failed = GraderResult(
                score=0.0, verdict="fail", assertions=[Assertion(text=f"Provider error: {message}", passed=False)]
            )
            self._keep(n, self._verdict(name, failed, transcript, []))
        # AgentV stops after a failed call whatever the threshold (a threshold of 0 would not stop on 0).
        self.stopped = self.stopped or self.test.on_turn_failure == "stop"
        return self.graded[n].score

    def finish(self, transcript: TranscriptInfo) -> TestGrade:
        """Grade what is not graded yet from the recorded conversation, then the whole conversation; record
        every verdict and the test's score."""
        from evalstore.replay.grading.engine import TestGrade

        recorded = recorded_turns(self.test, transcript.messages)
        for n, turn in enumerate(recorded, start=1):
            if n in self.graded:
                continue
            name = turn_verdict(n)
            if self.stopped:
                skipped = GraderResult(score=0.0, verdict="skip", assertions=[Assertion(text=SKIPPED, passed=False)])
                self._keep(n, self._verdict(name, skipped, transcript, []))
            elif turn is None:
                self.unanswered.append(n)
                missing = GraderResult(
                    score=0.0,
                    verdict="skip",
                    status="execution_error",
                    assertions=[
                        Assertion(
                            text="the recorded conversation ends before this turn: nothing to grade", passed=False
                        )
                    ],
                )
                self._keep(n, self._verdict(name, missing, transcript, []))
            elif turn.answer is None:
                self.turn_failed(n, turn.error or "the agent gave no answer", transcript)
            else:
                self.grade_turn(n, turn.history, turn.answer, transcript)
        entries = [self.graded[n] for n in sorted(self.graded)]
        if self.test.graders:
            entries.append(self._whole(transcript))
        verdicts = [(self.recorder.record(e.verdict), e.verdict) for e in entries]
        scored = self._scored(entries)
        self.recorder.record(scored)
        return TestGrade(scored=scored, verdicts=verdicts)

    def _whole(self, transcript: TranscriptInfo) -> _Graded:
        """The test's own graders on the whole conversation."""
        name = WHOLE
        if self.only is not None and name not in self.only and name in self.carried:
            parent_id, parent = self.carried[name]
            return _Graded(
                parent.model_copy(update={"origin": "carried", "carried_from": parent_id, "source": None}), parent.score
            )
        history = list(transcript.messages)
        text = context_text(history)
        test = self.test.model_copy(update={"input": history, "expected_output": None, "turns": []})
        seen = replace(
            transcript, messages=[Message(role="assistant", content=text)], output_text=text, file_changes=None
        )
        return self._graded(name, test, seen, text, transcript)

    def _graded(
        self, name: str, test: EvalTest, seen: TranscriptInfo, question: str, transcript: TranscriptInfo
    ) -> _Graded:
        from evalstore.replay.grading.engine import grade_graders

        ctx = GradingContext(
            suite=self.suite,
            test=test,
            transcript=seen,
            recorder=self.recorder,
            target=self.target,
            attempt=self.attempt,
            options=self.options,
            judges=self.judges,
            question=question,
            test_waiting=self.test_waiting,
        )
        results = grade_graders(ctx, test.graders)
        outcome = score_test(list(zip(test.graders, results)), self.threshold)
        result = GraderResult(
            score=outcome.score,
            verdict="pass" if outcome.score >= self.threshold else "fail",
            assertions=[a for r in results for a in r.assertions],
            evidence=[e for r in results for e in r.evidence],
            cache_hit=bool(results) and all(r.cache_hit for r in results),
            preprocessing_event_ids=[i for r in results for i in r.preprocessing_event_ids],
            grader_call_event_ids=[i for r in results for i in r.grader_call_event_ids],
            grader_target=next((r.grader_target for r in results if r.grader_target), None),
        )
        return self._verdict(name, result, transcript, list(zip(test.graders, results)))

    def _verdict(
        self,
        name: str,
        result: GraderResult,
        transcript: TranscriptInfo,
        children: list[tuple[GraderSpec, GraderResult]],
    ) -> _Graded:
        details = {"scores": [_child(spec, r) for spec, r in children]} if children else None
        verdict = VerdictRecorded(
            test_id=self.test.id,
            target=self.target,
            attempt=self.attempt,
            grader=name,
            grader_type=TURN_TYPE,
            score=result.score,
            verdict=result.verdict,  # type: ignore[arg-type]
            status=result.status,  # type: ignore[arg-type]
            assertions=result.assertions,
            details=details,
            evidence=result.evidence,
            cache_hit=result.cache_hit,
            transcript_event_id=transcript.event_id,
            preprocessing_event_ids=result.preprocessing_event_ids,
            grader_call_event_ids=result.grader_call_event_ids,
            grader_target=result.grader_target,
        )
        return _Graded(verdict, result.score)

    def _keep(self, n: int, graded: _Graded) -> float:
        self.graded[n] = graded
        if self.test.on_turn_failure == "stop" and graded.score < self.threshold:
            self.stopped = True
        return graded.score

    def _carry(self, name: str, n: int) -> bool:
        """A replay regrading only some graders keeps this turn's verdict from the run it replays."""
        if self.only is None or name in self.only or name not in self.carried:
            return False
        parent_id, parent = self.carried[name]
        carried = parent.model_copy(update={"origin": "carried", "carried_from": parent_id, "source": None})
        self._keep(n, _Graded(carried, parent.score))
        return True

    def _scored(self, entries: list[_Graded]) -> TestScored:
        scores = [e.score for e in entries]
        if not scores:
            score = 1.0
        elif self.test.aggregation == "min":
            score = min(scores)
        elif self.test.aggregation == "max":
            score = max(scores)
        else:
            score = sum(scores) / len(scores)
        # AgentV's status is the score's (``classifyQualityStatus``), whatever failed in a turn (a verdict's
        # status says nothing here: an import's or an earlier run's may be an execution error); only a turn
        # a replay had no answer for makes the test an execution error, which names it.
        missing = self.graded[self.unanswered[0]].verdict if self.unanswered else None
        passed = score >= self.threshold and missing is None
        return TestScored(
            test_id=self.test.id,
            target=self.target,
            attempt=self.attempt,
            score=score,
            passed=passed,
            status="execution_error" if missing else ("ok" if passed else "quality_failure"),
            threshold=self.threshold,
            error=f"{missing.grader}: {missing.assertions[0].text}" if missing else None,
            produced_at=produced_now(),
            graders=[e.verdict.grader for e in entries],
        )


def _child(spec: GraderSpec, result: GraderResult) -> dict[str, Any]:
    """A turn grader's own result, as AgentV nests it in its turn's ``scores``."""
    entry: dict[str, Any] = {
        "name": spec.name,
        "type": result_type(spec),
        "score": result.score,
        "weight": spec.weight,
        "verdict": result.verdict,
        "assertions": [a.model_dump(mode="json", exclude_none=True) for a in result.assertions],
    }
    if result.details:
        entry["details"] = result.details
    return entry


def grade_conversation(
    suite: EvalSuite,
    test: EvalTest,
    transcript: TranscriptInfo,
    recorder: Recorder,
    *,
    target: str | None,
    attempt: int,
    options: GradeOptions,
    judges: JudgePool | None,
    only: set[str] | None,
    carried: Mapping[str, tuple[str, VerdictRecorded]],
    test_waiting: Callable[[], None] = no_wait,
) -> TestGrade:
    """A recorded conversation graded from its transcript (replay, resume)."""
    grader = ConversationGrader(
        suite,
        test,
        recorder,
        target,
        attempt,
        options,
        judges,
        only=only,
        carried=dict(carried),
        test_waiting=test_waiting,
    )
    return grader.finish(transcript)
