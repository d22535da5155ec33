"""Appending and reading events: ordering, the hash chain, optimistic concurrency, idempotency.

Every test runs on SQLite and PostgreSQL (the ``store`` fixture is parametrized over both).
"""

from __future__ import annotations

import pytest
from log_rows import event_count
from sample_runs import append_run, populate

from evalstore.store import ConcurrencyError, EventStore, IdempotencyError, NewEvent, NotFound
from evalstore.store.codec import GENESIS_HASH
from evalstore.store.events import LineSkipped, RunFailed, RunStarted, SourceRef


def _started(run_id: str) -> RunStarted:
    return RunStarted(run_id=run_id, kind="recorded", tool_version="0.1.0")


def _skipped(line: int) -> LineSkipped:
    return LineSkipped(source=SourceRef(file="results.jsonl", line=line), reason="not JSON")


def _count(store: EventStore) -> int:
    return event_count(store.engine)


def test_append_assigns_global_seq_and_stream_versions(store: EventStore) -> None:
    a1 = store.append("a", [_started("a"), _skipped(1)], expected_version=0)
    b1 = store.append("b", [_started("b")], expected_version=0)
    a2 = store.append("a", [_skipped(2)], expected_version=2)

    assert [e.seq for e in a1 + b1 + a2] == [1, 2, 3, 4]
    assert [(e.stream_id, e.stream_version) for e in a1 + b1 + a2] == [("a", 1), ("a", 2), ("b", 1), ("a", 3)]
    assert store.stream_version("a") == 3
    assert store.stream_version("nobody") == 0
    assert [e.seq for e in store.read_stream("a")] == [1, 2, 4]
    assert [e.seq for e in store.read_stream("a", types=["line_skipped"])] == [2, 4]
    assert [e.seq for e in store.read_all(after_seq=2)] == [3, 4]


def test_hash_chain_links_every_event_to_the_previous(store: EventStore) -> None:
    populate(store)
    prev = GENESIS_HASH
    events = list(store.read_all())
    assert len(events) > 40
    for ev in events:
        assert ev.prev_hash == prev
        assert ev.hash == ev.computed_hash(prev)
        prev = ev.hash
    report = store.verify()
    assert report.ok, report.problem
    assert report.events == len(events)


def test_stored_event_round_trips_to_an_equal_model(store: EventStore) -> None:
    original = RunStarted(
        run_id="r", kind="imported", suite="s", target={"a": [1, 2.5, None], "é": "ü"}, tool_version="0.1.0"
    )
    [stored] = store.append("r", [original])
    [read] = list(store.read_stream("r"))
    assert read == stored
    assert read.event == original
    assert store.get_event(stored.event_id).event == original


def test_expected_version_conflict_raises_and_writes_nothing(store: EventStore) -> None:
    store.append("a", [_started("a")], expected_version=0)
    with pytest.raises(ConcurrencyError, match="version 1, expected 0"):
        store.append("a", [_skipped(1)], expected_version=0)
    with pytest.raises(ConcurrencyError):
        store.append("a", [_skipped(1)], expected_version=5)
    assert _count(store) == 1
    # None appends wherever the stream is.
    [ev] = store.append("a", [_skipped(1)])
    assert ev.stream_version == 2


def test_reappending_the_same_event_ids_is_a_no_op(store: EventStore) -> None:
    batch = [NewEvent(_started("a"), "id-start"), NewEvent(_skipped(1), "id-skip")]
    first = store.append("a", batch, expected_version=0)
    # A retry after a lost reply: same ids, same content, the stale expected version.
    again = store.append("a", batch, expected_version=0)
    assert again == first
    assert store.append("a", batch) == first  # and without an expected version
    assert store.append("a", batch[::-1], expected_version=2) == first[::-1]
    assert _count(store) == 2
    assert store.verify().ok


def test_partial_retry_appends_only_the_new_events(store: EventStore) -> None:
    batch = [NewEvent(_started("a"), "id-start"), NewEvent(_skipped(1), "id-skip")]
    first = store.append("a", batch[:1], expected_version=0)
    both = store.append("a", batch, expected_version=1)
    assert both[0] == first[0]
    assert (both[1].seq, both[1].stream_version) == (2, 2)
    assert _count(store) == 2


def test_same_event_id_with_different_content_is_refused(store: EventStore) -> None:
    store.append("a", [NewEvent(_skipped(1), "id-1")])
    with pytest.raises(IdempotencyError, match="id-1 is already stored"):
        store.append("a", [NewEvent(_skipped(2), "id-1")])
    # The same content under the same id in another stream is a different event too.
    with pytest.raises(IdempotencyError):
        store.append("b", [NewEvent(_skipped(1), "id-1")])
    # A refused batch leaves nothing behind, not even its other events.
    with pytest.raises(IdempotencyError):
        store.append("a", [NewEvent(_skipped(3), "id-3"), NewEvent(RunFailed(reason="x"), "id-1")])
    assert _count(store) == 1


def test_lookups_by_id_and_missing_ids(store: EventStore) -> None:
    stored = store.append("a", [NewEvent(_started("a"), "id-a"), NewEvent(_skipped(1), "id-b")])
    assert store.get_events(["id-b", "id-a", "nope", "id-a"]) == {"id-a": stored[0], "id-b": stored[1]}
    with pytest.raises(NotFound, match="nope"):
        store.get_event("nope")


def test_projections_follow_each_append(store: EventStore) -> None:
    populate(store)
    assert store.run_ids() == ["run-a", "run-b", "run-a-replay"]
    [replay] = store.query("runs", run_id="run-a-replay")
    assert (replay["kind"], replay["parent_run_id"], replay["status"]) == ("replay", "run-a", "completed")
    results = store.query("results", run_id="run-a")
    assert [(r["test_id"], r["score"], bool(r["passed"])) for r in results] == [
        ("berlin", 0.25, False),
        ("paris", 0.75, False),
        ("rome", 0.75, False),
    ]
    verdicts = store.query("verdicts", run_id="run-b", test_id="madrid")
    assert [(v["grader"], v["score"], v["verdict"]) for v in verdicts] == [
        ("judge", 0.5, "fail"),
        ("rubric", 0.0, "fail"),
    ]


def test_reuse_indexes_keep_the_first_event_for_a_key(store: EventStore) -> None:
    append_run(store, "run-a", tests=("paris",))
    append_run(store, "run-c", tests=("paris",))  # same judge model and artifact: same keys
    [call_a] = list(store.read_stream("run-a", types=["grader_called"]))
    [pre_a] = list(store.read_stream("run-a", types=["preprocessing_recorded"]))
    assert store.lookup("judge_cache", call_a.payload["cache_key"]) == call_a
    assert store.lookup("conversions", pre_a.payload["fingerprint"]) == pre_a
    assert store.lookup("judge_cache", "0" * 64) is None
    # Read by stream, an index gives the same event for each key; run-c's calls repeat run-a's keys.
    key = call_a.payload["cache_key"]
    assert store.index_entries("judge_cache", ["run-a", "nope"], limit=10) == {key: call_a}
    assert store.index_entries("judge_cache", ["run-c"], limit=10) == {}
    assert store.index_entries("judge_cache", ["run-a"], limit=0) is None


def test_sqlite_appends_journal_in_memory_and_reads_keep_the_default(sqlite_store: EventStore) -> None:
    """Each row an append inserts has a statement journal; at 16 KB pages it spilled to a temporary
    file per row. Write transactions keep it in memory; reads (whose sorts may be large) do not."""
    from evalstore.store.engine import IMMEDIATE

    engine = sqlite_store.engine

    def temp_store(immediate: bool) -> int:
        with engine.connect().execution_options(**{IMMEDIATE: immediate}) as conn, conn.begin():
            return int(conn.exec_driver_sql("PRAGMA temp_store").scalar_one())

    # One pooled connection serves all three: the setting follows the transaction, not the connection.
    assert [temp_store(False), temp_store(True), temp_store(False)] == [0, 2, 0]
    sqlite_store.append("a", [_started("a")])
    assert temp_store(False) == 0
