"""Small runs written straight as events, for the label and agreement tests: a recorded run with a
transcript per test, and replays of it, each with one grader's verdicts and the test scores."""

from __future__ import annotations

from evalstore.store import EventStore
from evalstore.store.events import (
    RunCompleted,
    RunStarted,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
)


def add_run(
    store: EventStore,
    run_id: str,
    verdicts: dict[str, bool],
    *,
    parent: str | None = None,
    grader: str = "quality",
    metadata: dict[str, dict] | None = None,
    attempts: tuple[int, ...] = (1,),
    attempt_verdicts: dict[tuple[str, int], bool] | None = None,
) -> str:
    """A run whose grader ``grader`` passes the tests marked True; a replay when ``parent`` is given.

    ``attempts``: each test's attempts, in the order their events are written (a replay writes them as
    they finish: ``(2, 3, 1)``); ``attempt_verdicts`` (test, attempt): that attempt's verdict, if not
    its test's."""
    events: list = [
        RunStarted(run_id=run_id, kind="replay" if parent else "recorded", parent_run_id=parent, tool_version="t")
    ]
    for test_id in verdicts:
        for attempt in attempts:
            passed = (attempt_verdicts or {}).get((test_id, attempt), verdicts[test_id])
            if parent is None:
                events.append(
                    TestCaseRecorded(test_id=test_id, attempt=attempt, metadata=(metadata or {}).get(test_id, {}))
                )
                events.append(
                    TranscriptRecorded(
                        test_id=test_id, attempt=attempt, messages_sha256=None, output_text=f"answer {test_id}"
                    )
                )
            score = 1.0 if passed else 0.0
            events.append(
                VerdictRecorded(
                    test_id=test_id,
                    attempt=attempt,
                    grader=grader,
                    grader_type="llm-grader",
                    score=score,
                    verdict="pass" if passed else "fail",
                )
            )
            events.append(
                TestScored(test_id=test_id, attempt=attempt, score=score, passed=passed, status="ok", threshold=0.8)
            )
    tests = len(verdicts) * len(attempts)
    events.append(RunCompleted(tests=tests, passed=sum(verdicts.values()), failed=0, errors=0))
    store.append(run_id, events)
    return run_id


def add_transcripts(store: EventStore, run_id: str, results: list[tuple[str, str | None, int]]) -> str:
    """A recorded run holding only a transcript for each (test id, target, attempt): what labels match."""
    store.append(
        run_id,
        [RunStarted(run_id=run_id, kind="recorded", tool_version="t")]
        + [
            TranscriptRecorded(test_id=t, target=target, attempt=a, messages_sha256=None, output_text="x")
            for t, target, a in results
        ],
    )
    return run_id
