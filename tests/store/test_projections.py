"""Projections are derived from the log: a rebuild equals incremental maintenance, and verify notices drift."""

from __future__ import annotations

import pytest
from log_rows import event_count
from sample_runs import append_run, drop_append_only_triggers, execute, populate

from evalstore.store import EventStore
from evalstore.store.events import RunFailed, RunStarted
from evalstore.store.projections import KEYS, PROJECTED, TABLES, read_fields, rows_for
from evalstore.store.verify import REBUILD_UNLESS_LOST


def _tables(store: EventStore) -> dict[str, list[dict]]:
    return {name: store.query(name) for name in TABLES}


def test_rebuild_yields_the_incrementally_maintained_tables(store: EventStore) -> None:
    populate(store)
    # A failed run and a run appended in one big batch exercise other paths of the upserts.
    store.append("run-f", [RunStarted(run_id="run-f", kind="recorded", tool_version="0.1.0"), RunFailed(reason="boom")])
    incremental = _tables(store)
    assert {name: len(rows) for name, rows in incremental.items()} == {
        "runs": 4,
        "streams": 4,
        # The sample runs give every event an id of its own; run-f's have the ids derived from where they are.
        "event_ids": 23 + 16 + 23,
        "results": 3 + 2 + 3,
        "verdicts": 2 * (3 + 2 + 3),
        # run-a-replay reuses run-a's judge calls and conversions: first wins.
        "judge_cache": 3 + 2,
        "conversions": 4,
    }
    by_run = {r["run_id"]: r for r in incremental["runs"]}
    assert by_run["run-f"]["status"] == "failed" and by_run["run-f"]["ended_at"]
    assert by_run["run-a"]["status"] == "completed"

    count = store.rebuild_projections()
    assert count == event_count(store.engine)
    assert _tables(store) == incremental
    assert store.verify().ok


def test_read_fields_are_all_rows_for_reads(store: EventStore) -> None:
    """An import spools read_fields instead of the payload: rows_for must give the same rows from it."""
    from fixture_paths import AGENTV_FIXTURES

    from evalstore.replay.agentv.importing import import_results

    populate(store)
    import_results(store, AGENTV_FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl")
    events = list(store.read_all())
    seen = set()
    numbers: dict[str, int] = {}
    for ev in events:
        number = numbers.setdefault(ev.stream_id, ev.seq)
        fields = read_fields(ev.type, ev.payload)
        assert rows_for(ev, fields, number) == rows_for(ev, stream=number), ev.type
        # What an import's writer skips: no rows but a stream's number, from its first event, and the id of
        # an event that has one of its own (an import's have derived ids).
        rows = [table for table, _ in rows_for(ev, stream=number) if table != "event_ids"]
        assert ev.type in PROJECTED or ev.stream_version == 1 or rows == [], ev.type
        if fields is not None:
            seen.add(ev.type)
    assert seen >= {
        "run_started",
        "test_scored",
        "verdict_recorded",
        "grader_called",
        "preprocessing_recorded",
    }


def test_rebuild_after_the_projections_were_wiped(store: EventStore) -> None:
    populate(store)
    incremental = _tables(store)
    for name in TABLES:
        execute(store.engine, f"DELETE FROM {name}")
    assert store.verify().problem == "projection runs: row ('run-a',) missing; run `evalstore db rebuild`"
    store.rebuild_projections()
    assert _tables(store) == incremental


def test_one_batch_equals_many(store: EventStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The same events appended per test (as a recorder does) and in one batch (as an import does).
    from sample_runs import run_batches

    from evalstore.store import make_engine

    append_run(store, "run-a")
    single = EventStore(make_engine(f"sqlite:///{tmp_path / 'single.db'}"))
    try:
        batches = run_batches("run-a")
        single.append(
            "run-a",
            [e for events, _ in batches for e in events],
            blobs={k: v for _, b in batches for k, v in b.items()},
        )
        strip = lambda rows: [{k: v for k, v in r.items() if k not in ("seq", "started_at", "ended_at")} for r in rows]  # noqa: E731
        for name in TABLES:
            assert strip(single.query(name)) == strip(store.query(name)), name
    finally:
        single.close()


def test_an_end_without_a_start_changes_no_run(store: EventStore) -> None:
    # run_completed only updates a run that exists: incremental maintenance and the fold agree on that.
    from evalstore.store.events import RunCompleted

    store.append("orphan", [RunCompleted(tests=0, passed=0, failed=0, errors=0)])
    assert store.query("runs") == []
    assert store.verify().ok
    store.append("orphan", [RunStarted(run_id="orphan", kind="imported", tool_version="0.1.0")])
    [run] = store.query("runs")
    assert (run["status"], run["ended_at"]) == ("started", None)
    assert store.verify().ok


@pytest.mark.parametrize(
    ("table", "sql", "problem"),
    [
        (
            "verdicts",
            "UPDATE verdicts SET score = 1.0 WHERE run = (SELECT stream FROM streams WHERE stream_id = 'run-b') "
            "AND test_id = 'madrid' AND grader = 'judge'",
            "projection verdicts: row ('run-b', 'madrid', 'default', 1, 'judge') differs from the log",
        ),
        (
            "results",
            "UPDATE results SET passed = NOT passed WHERE run = (SELECT stream FROM streams WHERE stream_id = 'run-a') "
            "AND test_id = 'rome'",
            "projection results: row ('run-a', 'rome', 'default', 1) differs from the log",
        ),
        ("runs", "DELETE FROM runs WHERE run_id = 'run-b'", "projection runs: row ('run-b',) missing"),
        (
            "judge_cache",
            "INSERT INTO judge_cache (cache_key, seq) VALUES ('forged', 1)",
            "projection judge_cache: row ('forged',) not derived from the log",
        ),
    ],
)
def test_verify_detects_a_projection_row_changed_behind_its_back(
    store: EventStore, table: str, sql: str, problem: str
) -> None:
    populate(store)
    assert table in KEYS
    execute(store.engine, sql)
    report = store.verify()
    hint = "run `evalstore db rebuild`" if problem.endswith("missing") else REBUILD_UNLESS_LOST
    assert report.problem == f"{problem}; {hint}"
    store.rebuild_projections()
    assert store.verify().ok


def test_a_log_cut_short_is_not_answered_with_a_rebuild_alone(store: EventStore) -> None:
    """The last record gone (its guard dropped first): the projections are ahead of the log, and a rebuild
    would make them agree, hiding the loss, so the hint names the checkpoint check too."""
    populate(store)
    drop_append_only_triggers(store.engine)
    execute(store.engine, "DELETE FROM records WHERE seq = (SELECT max(seq) FROM records)")
    problem = store.verify().problem
    assert problem is not None and problem.endswith(f"; {REBUILD_UNLESS_LOST}"), problem
