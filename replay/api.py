"""The Python API for grading one transcript against an eval file, in memory or from the store.

    from replay.api import grade_transcript
    grade = grade_transcript("evals/report.eval.yaml", "q1-report",
                             [{"role": "assistant", "content": "The total is 2,880."}])
    grade.scored.score, [v.grader for _, v in grade.verdicts]

Nothing is written anywhere: the events grading produced are in ``grade.recorder.events``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalstore.replay.content import Message
from evalstore.replay.errors import NotFoundError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.evalfile.specs import EvalSuite
from evalstore.replay.grading.engine import TestGrade, grade_test
from evalstore.replay.grading.graders.base import GradeOptions, TranscriptInfo
from evalstore.replay.material import load_run, transcript_info
from evalstore.replay.recording import MemoryRecorder
from evalstore.replay.regrade import transcript_run
from evalstore.store import EventStore

if TYPE_CHECKING:
    from evalstore.replay.grading.judge.pool import JudgePool


@dataclass
class Grade:
    scored: Any
    verdicts: list
    recorder: MemoryRecorder


def _test(suite: EvalSuite, test_id: str):  # type: ignore[no-untyped-def]
    for test in suite.tests:
        if test.id == test_id:
            return test
    raise NotFoundError(f"{suite.path}: no test {test_id!r} (tests: {', '.join(t.id for t in suite.tests)})")


def _judges(judges):  # type: ignore[no-untyped-def]
    if judges is not None:
        return judges
    from evalstore.replay.grading.judge.pool import JudgePool

    return JudgePool.from_env()


def grade_transcript(
    eval_path: str | Path,
    test_id: str,
    messages: Sequence[Message | dict],
    *,
    workspace: str | Path | None = None,
    options: GradeOptions | None = None,
    judges: JudgePool | None = None,
) -> Grade:
    """Grade an in-memory transcript. File blocks are read from ``workspace`` (paths inside it only)."""
    suite = load_eval(eval_path)
    test = _test(suite, test_id)
    parsed = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
    info = TranscriptInfo(messages=[*test.input, *parsed], workspace_path=str(workspace) if workspace else None)
    recorder = MemoryRecorder()
    result: TestGrade = grade_test(suite, test, info, recorder, options=options, judges=_judges(judges))
    return Grade(result.scored, result.verdicts, recorder)


def grade_stored(
    store: EventStore,
    run_id: str,
    test_id: str,
    eval_path: str | Path,
    *,
    options: GradeOptions | None = None,
    judges: JudgePool | None = None,
) -> Grade:
    """Grade a stored test's transcript (its artifacts read from the blob store) without writing anything."""
    run = transcript_run(store, load_run(store, run_id))
    matches = run.results_of(test_id)
    if not matches:
        raise NotFoundError(f"run {run_id} has no test {test_id!r}")
    material = matches[0]
    suite = load_eval(eval_path)
    recorder = MemoryRecorder(blob_source=store.get_blob)
    info = transcript_info(store.get_blob, material)
    result = grade_test(
        suite,
        _test(suite, test_id),
        info,
        recorder,
        target=material.key[1] or None,
        attempt=material.key[2],
        options=options,
        judges=_judges(judges),
    )
    return Grade(result.scored, result.verdicts, recorder)
