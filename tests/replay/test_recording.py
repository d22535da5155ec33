"""StoreRecorder and BatchedAppends: what reaches the store, and when."""

from __future__ import annotations

import hashlib
import time

from evalstore.replay.recording import BatchedAppends, StoreRecorder
from evalstore.store import events as ev  # (module import: pytest would try to collect a class named Test*)


def _test_recorder(store, run_id: str, test_id: str) -> StoreRecorder:  # type: ignore[no-untyped-def]
    rec = StoreRecorder(store, run_id)
    rec.put_blob(f"bytes of {test_id}".encode())
    rec.record(ev.TestScored(test_id=test_id, score=1.0, passed=True, status="ok", threshold=0.8))
    return rec


def test_a_full_batch_is_one_append_and_blobs_land_with_it(sqlite_store) -> None:
    sqlite_store.append("r", [ev.RunStarted(run_id="r", kind="replay", tool_version="t")])
    batches = BatchedAppends(sqlite_store, "r", max_tests=3, max_seconds=60)
    for i in range(3):
        batches.add(_test_recorder(sqlite_store, "r", f"t{i}"))
    rows = sqlite_store.query("results", run_id="r")
    assert [r["test_id"] for r in rows] == ["t0", "t1", "t2"]
    assert len({r["seq"] for r in rows}) == 3
    assert sqlite_store.has_blobs([hashlib.sha256(b"bytes of t1").hexdigest()])


def test_a_finished_test_is_durable_within_max_seconds_without_further_adds(sqlite_store) -> None:
    sqlite_store.append("r", [ev.RunStarted(run_id="r", kind="replay", tool_version="t")])
    # 1 s: the check that nothing is written yet must come before the timer, on a loaded machine too.
    batches = BatchedAppends(sqlite_store, "r", max_tests=100, max_seconds=1.0)
    batches.add(_test_recorder(sqlite_store, "r", "t0"))
    assert sqlite_store.query("results", run_id="r") == []
    deadline = time.monotonic() + 5
    while not sqlite_store.query("results", run_id="r") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r["test_id"] for r in sqlite_store.query("results", run_id="r")] == ["t0"]


def test_flush_writes_what_is_pending_and_is_idle_when_empty(sqlite_store) -> None:
    sqlite_store.append("r", [ev.RunStarted(run_id="r", kind="replay", tool_version="t")])
    batches = BatchedAppends(sqlite_store, "r", max_tests=100, max_seconds=60)
    batches.flush()
    batches.add(_test_recorder(sqlite_store, "r", "t0"))
    batches.flush()
    assert sqlite_store.stream_version("r") == 2
    batches.flush()
    assert sqlite_store.stream_version("r") == 2


def test_a_batch_whose_append_failed_stays_pending_and_is_written_by_the_next_flush(sqlite_store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    sqlite_store.append("r", [ev.RunStarted(run_id="r", kind="replay", tool_version="t")])
    batches = BatchedAppends(sqlite_store, "r", max_tests=2, max_seconds=60)
    append = sqlite_store.append
    failures = iter([RuntimeError("database went away")])

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        for failure in failures:
            raise failure
        return append(*args, **kwargs)

    monkeypatch.setattr(sqlite_store, "append", flaky)
    batches.add(_test_recorder(sqlite_store, "r", "t0"))
    with pytest.raises(RuntimeError, match="went away"):
        batches.add(_test_recorder(sqlite_store, "r", "t1"))  # the batch is full: its append fails
    assert sqlite_store.query("results", run_id="r") == []
    batches.add(_test_recorder(sqlite_store, "r", "t2"))  # t0 and t1 are pending again, ahead of t2
    batches.flush()
    assert [r["test_id"] for r in sqlite_store.query("results", run_id="r")] == ["t0", "t1", "t2"]


def test_a_read_of_a_database_server_is_a_wait_and_one_of_sqlite_is_not(store) -> None:  # type: ignore[no-untyped-def]
    """A replay grades its next test while one waits (processes.workers.run_handing_off): on PostgreSQL a
    lookup that misses what was read ahead is a round trip, and says so; SQLite's, in this process, not."""
    waits: list[str] = []
    rec = StoreRecorder(store, "r", waiting=lambda: waits.append("wait"))
    assert rec.find_process_call("no-such-key") is None
    assert rec.find_judge_call("no-such-key") is None
    server = store.engine.dialect.name != "sqlite"
    assert waits == (["wait", "wait"] if server else [])
    rec.put_blob(b"buffered")
    rec.get_blob(hashlib.sha256(b"buffered").hexdigest())  # this test's own blob: no read
    assert len(waits) == (2 if server else 0)
