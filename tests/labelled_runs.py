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
) -> str:
    """A run whose grader ``grader`` passes the tests marked True; a replay when ``parent`` is given."""
    events: list = [
        RunStarted(run_id=run_id, kind="replay" if parent else "recorded", parent_run_id=parent, tool_version="t")
    ]
    for test_id, passed in verdicts.items():
        if parent is None:
            events.append(TestCaseRecorded(test_id=test_id, metadata=(metadata or {}).get(test_id, {})))
            events.append(TranscriptRecorded(test_id=test_id, messages_sha256=None, output_text=f"answer {test_id}"))
        score = 1.0 if passed else 0.0
        events.append(
            VerdictRecorded(
                test_id=test_id,
                grader=grader,
                grader_type="llm-grader",
                score=score,
                verdict="pass" if passed else "fail",
            )
        )
        events.append(TestScored(test_id=test_id, score=score, passed=passed, status="ok", threshold=0.8))
    events.append(RunCompleted(tests=len(verdicts), passed=sum(verdicts.values()), failed=0, errors=0))
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
