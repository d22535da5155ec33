"""Realistic event streams for the store tests: what a recorded run, an import and a replay append.

Kept out of conftest so worker subprocesses and the tests share one definition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from evalstore.store import EventStore, NewEvent, sha256_hex
from evalstore.store.events import (
    Assertion,
    FileSnapshot,
    GraderCalled,
    PreprocessingRecorded,
    RunCompleted,
    RunStarted,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
)

EVAL_YAML = b"description: capitals\ntests:\n  - id: paris\n    input: What is the capital of France?\n"


def _blob(data: bytes, blobs: dict[str, bytes]) -> str:
    digest = sha256_hex(data)
    blobs[digest] = data
    return digest


def run_batches(
    run_id: str,
    tests: Iterable[str] = ("paris", "berlin", "rome"),
    *,
    kind: str = "recorded",
    parent: str | None = None,
    judge_model: str = "judge-1",
) -> list[tuple[list[NewEvent], dict[str, bytes]]]:
    """The appends one run makes: ``[(events, blobs)]``, first the start, one per test, then the end.

    Judge cache keys and conversion fingerprints depend only on the test and the judge model, so two
    runs over the same tests share them (which exercises the first-wins reuse indexes).
    """
    batches: list[tuple[list[NewEvent], dict[str, bytes]]] = []
    start_blobs: dict[str, bytes] = {}
    eval_sha = _blob(EVAL_YAML, start_blobs)
    started = RunStarted(
        run_id=run_id,
        kind=kind,  # type: ignore[arg-type]
        parent_run_id=parent,
        suite="capitals",
        eval_path="/evals/capitals.yaml",
        eval_snapshot=[FileSnapshot(role="eval", path="/evals/capitals.yaml", sha256=eval_sha, size=len(EVAL_YAML))],
        target_name="default",
        target={"provider": "cli", "command": "agent --prompt {PROMPT}", "api_key": "${{ AGENT_KEY }}"},
        threshold=0.8,
        tool_version="0.1.0",
    )
    batches.append(([NewEvent(started, f"{run_id}-start")], start_blobs))
    scores = []
    for n, test_id in enumerate(tests):
        blobs: dict[str, bytes] = {}
        messages = [
            {"role": "user", "content": [{"type": "text", "text": f"Question for {test_id}?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Answer about {test_id}. " * 40}]},
        ]
        messages_sha = _blob(json.dumps(messages).encode(), blobs)
        artifact_sha = _blob(f"%PDF-1.7 report on {test_id}\n".encode() + bytes(range(256)), blobs)
        text_sha = _blob(f"report on {test_id}".encode(), blobs)
        request_sha = _blob(json.dumps({"model": judge_model, "prompt": f"grade {test_id}"}).encode(), blobs)
        reply_sha = _blob(b'{"score": 0.5, "reasoning": "partly right"}', blobs)
        fingerprint = sha256_hex(f"{artifact_sha}|pdftotext|{test_id}".encode())
        cache_key = sha256_hex(f"{request_sha}|{judge_model}".encode())
        ids = {k: f"{run_id}-{test_id}-{k}" for k in ("case", "tr", "pre", "call", "v1", "v2", "score")}
        rubric_score = 1.0 if n % 2 == 0 else 0.0
        score = (rubric_score + 0.5) / 2
        scores.append(score)
        events = [
            NewEvent(
                TestCaseRecorded(
                    test_id=test_id,
                    target="default",
                    input=[{"role": "user", "content": f"Question for {test_id}?"}],
                    expected_output=f"answer {test_id}",
                    criteria="names the city",
                    metadata={"tags": ["geo"]},
                    graders=[{"name": "rubric", "type": "rubrics"}, {"name": "judge", "type": "llm-grader"}],
                ),
                ids["case"],
            ),
            NewEvent(
                TranscriptRecorded(
                    test_id=test_id,
                    target="default",
                    messages_sha256=messages_sha,
                    output_text=f"Answer about {test_id}.",
                    token_usage={"input": 120, "output": 48},
                    cost_usd=0.0021,
                    duration_ms=1834.5,
                ),
                ids["tr"],
            ),
            NewEvent(
                PreprocessingRecorded(
                    test_id=test_id,
                    target="default",
                    path="out/report.pdf",
                    media_type="application/pdf",
                    artifact_sha256=artifact_sha,
                    converter_type="pdftotext",
                    argv=["pdftotext", "{file}", "-"],
                    fingerprint=fingerprint,
                    output_sha256=text_sha,
                    status="converted",
                    duration_ms=12.0,
                ),
                ids["pre"],
            ),
            NewEvent(
                GraderCalled(
                    test_id=test_id,
                    target="default",
                    grader="judge",
                    grader_type="llm-grader",
                    call="judge",
                    request_sha256=request_sha,
                    reply_sha256=reply_sha,
                    model=judge_model,
                    parameters={"temperature": 0},
                    cache_key=cache_key,
                    usage={"input": 300, "output": 20},
                    latency_ms=640.0,
                ),
                ids["call"],
            ),
            NewEvent(
                VerdictRecorded(
                    test_id=test_id,
                    target="default",
                    grader="rubric",
                    grader_type="rubrics",
                    score=rubric_score,
                    verdict="pass" if rubric_score else "fail",
                    assertions=[Assertion(text="names the city", passed=bool(rubric_score), evidence="quoted")],
                    transcript_event_id=ids["tr"],
                ),
                ids["v1"],
            ),
            NewEvent(
                VerdictRecorded(
                    test_id=test_id,
                    target="default",
                    grader="judge",
                    grader_type="llm-grader",
                    score=0.5,
                    verdict="fail",
                    assertions=[Assertion(text="partly right", passed=False)],
                    transcript_event_id=ids["tr"],
                    preprocessing_event_ids=[ids["pre"]],
                    grader_call_event_ids=[ids["call"]],
                ),
                ids["v2"],
            ),
            NewEvent(
                TestScored(
                    test_id=test_id,
                    target="default",
                    score=score,
                    passed=score >= 0.8,
                    status="ok" if score >= 0.8 else "quality_failure",
                    threshold=0.8,
                    graders=["rubric", "judge"],
                ),
                ids["score"],
            ),
        ]
        batches.append((events, blobs))
    passed = sum(s >= 0.8 for s in scores)
    completed = RunCompleted(
        tests=len(scores), passed=passed, failed=len(scores) - passed, errors=0, mean_score=sum(scores) / len(scores)
    )
    batches.append(([NewEvent(completed, f"{run_id}-end")], {}))
    return batches


def append_run(store: EventStore, run_id: str, **kwargs: Any) -> int:
    """Append a whole run the way a recorder would; returns the number of events appended."""
    version = 0
    for events, blobs in run_batches(run_id, **kwargs):
        store.append(run_id, events, expected_version=version, blobs=blobs)
        version += len(events)
    return version


def populated_sqlite(path: Path) -> str:
    """A SQLite store at ``path`` holding the sample runs (:func:`populate`); its URL."""
    from evalstore.store import make_engine

    url = f"sqlite:///{path}"
    store = EventStore(make_engine(url))
    try:
        populate(store)
    finally:
        store.close()
    return url


def populate(store: EventStore) -> int:
    """Several runs: a recorded run, an import, and a replay of the first (shared cache keys)."""
    total = append_run(store, "run-a")
    total += append_run(store, "run-b", tests=("paris", "madrid"), kind="imported", judge_model="judge-2")
    total += append_run(store, "run-a-replay", kind="replay", parent="run-a")
    return total


def append_many_results(store: EventStore, run_id: str = "run-many") -> int:
    """A run appended at once whose results cut into enough records that the append makes a compression
    dictionary for them (store/records.py), in a store that has none yet; returns its number of events."""
    from evalstore.store.records import DICTIONARY_RECORDS

    started = RunStarted(run_id=run_id, kind="recorded", suite="many", target_name="default", tool_version="0.1.0")
    scored = [
        TestScored(test_id=f"t{n}", target="default", score=1.0, passed=True, status="ok", threshold=0.5, graders=[])
        for n in range(DICTIONARY_RECORDS)
    ]
    completed = RunCompleted(tests=len(scored), passed=len(scored), failed=0, errors=0, mean_score=1.0)
    return len(store.append(run_id, [started, *scored, completed], expected_version=0))


# --- raw SQL helpers: tests that tamper with the database behind the store's back -----------------


def execute(engine: Engine, sql: str, **params: Any) -> None:
    with engine.begin() as conn:
        conn.execute(text(sql), params)


def scalar(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def drop_append_only_triggers(engine: Engine) -> None:
    """Remove the immutability guards (store/guards.py: the log's records and dictionaries, and the
    blobs), as an attacker with write access to the database could."""
    from evalstore.store.guards import APPEND_ONLY, SQLITE_TRIGGERS

    if engine.dialect.name == "sqlite":
        for name in SQLITE_TRIGGERS:
            execute(engine, f"DROP TRIGGER {name}")
    else:
        for table in APPEND_ONLY:
            execute(engine, f"DROP TRIGGER {table}_append_only ON {table}")


def restore_append_only_triggers(engine: Engine) -> None:
    """Put back what :func:`drop_append_only_triggers` removed, as the migrations made it (``verify``
    checks the guards last, so a tampering test that expects a sound store restores them)."""
    from evalstore.store.guards import PG_TRIGGERS, SQLITE_TRIGGERS

    if engine.dialect.name == "sqlite":
        for name, sql in SQLITE_TRIGGERS.items():
            if not scalar(engine, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = :n", n=name):
                execute(engine, sql)
    else:
        for name, (table, sql) in PG_TRIGGERS.items():
            if name.endswith("_append_only"):
                execute(engine, sql)
                execute(engine, f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {name}")
