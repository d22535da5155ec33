"""``EventStore.append_batches``: each batch prepared while the one before is written, and still exact when the
log is not where the preparation assumed (another writer between two batches, events stored already)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from evalstore.replay.processes import forked
from evalstore.store import EventStore, NewEvent, StoreError
from evalstore.store.codec import sha256_hex
from evalstore.store.events import RunStarted, VerdictRecorded, encode
from evalstore.store.events import TestScored as Scored
from evalstore.store.projections import read_fields


def _batch(run: str, tests: range) -> tuple[list[tuple], list[dict | None], dict[str, bytes]]:
    events = []
    for i in tests:
        key = {"test_id": f"t{i}", "target": "default", "attempt": 1}
        events.append(
            NewEvent(
                VerdictRecorded(**key, grader="g", grader_type="contains", score=1.0, verdict="pass"), f"{run}-v{i}"
            )
        )
        events.append(NewEvent(Scored(**key, score=1.0, passed=True, status="ok", threshold=0.5), f"{run}-s{i}"))
    encoded = EventStore.encode_events(events)
    fields = [read_fields(e.payload.type, encode(e.payload)) for e in events]
    data = f"blob of {run} {tests}".encode()
    return encoded, fields, {sha256_hex(data): data}


@pytest.fixture(params=["here", "processes"])
def processes(request: pytest.FixtureRequest) -> Iterator[Executor | None]:
    """Records and blobs compressed by this process, or by two forked ones (an import's writing pass)."""
    if request.param == "here":
        yield None
        return
    with forked.pool(2) as pool:
        yield pool


def _started(store: EventStore, run: str) -> None:
    store.append(run, [NewEvent(RunStarted(run_id=run, kind="imported", tool_version="0"), f"{run}-start")])


def test_batches_interleaved_with_another_writer_chain_and_project_exactly(
    store: EventStore, processes: Executor | None
) -> None:
    _started(store, "run-a")
    _started(store, "run-b")

    def batches():  # type: ignore[no-untyped-def]
        for n in range(4):
            yield _batch("run-a", range(n * 10, n * 10 + 10))
            # Another writer appends while the batch just given is prepared or written: the next batch's
            # plan assumed the log ended where the batch before leaves it.
            store.append(
                "run-b", [NewEvent(Scored(test_id=f"b{n}", score=0.0, passed=False, status="ok", threshold=0.5))]
            )

    store.append_batches("run-a", batches(), processes=processes)
    events = list(store.read_stream("run-a"))
    assert [e.stream_version for e in events] == list(range(1, 82))
    assert [e.event_id for e in events[1:3]] == ["run-a-v0", "run-a-s0"]
    assert len(store.query("results", run_id="run-a")) == 40
    assert len(store.query("verdicts", run_id="run-a")) == 40
    assert len(store.query("results", run_id="run-b")) == 4
    assert store.verify().ok


def test_batches_appended_again_or_in_part_already_are_stored_once(
    store: EventStore, processes: Executor | None
) -> None:
    _started(store, "run-a")
    # an import killed after its first batch
    store.append_batches("run-a", [_batch("run-a", range(5))], processes=processes)
    for _ in range(2):
        store.append_batches("run-a", [_batch("run-a", range(10)), _batch("run-a", range(10, 20))], processes=processes)
    events = list(store.read_stream("run-a"))
    assert len(events) == 1 + 40
    assert len({e.event_id for e in events}) == 41
    assert len(store.query("results", run_id="run-a")) == 20
    assert store.verify().ok


def test_a_blob_given_under_another_digest_is_refused_with_its_batch(
    store: EventStore, processes: Executor | None
) -> None:
    """Blobs are checked against their keys (on the preparing thread): the batch that holds a wrong one is
    not written, the batches before it are."""
    _started(store, "run-a")
    bad_events, bad_fields, _ = _batch("run-a", range(10, 20))
    wrong = sha256_hex(b"something else")
    with pytest.raises(StoreError, match=f"blob given as {wrong} has digest"):
        store.append_batches(
            "run-a",
            [_batch("run-a", range(10)), (bad_events, bad_fields, {wrong: b"some bytes"})],
            processes=processes,
        )
    assert len(store.query("results", run_id="run-a")) == 10
    assert not store.has_blobs([wrong])
    assert store.verify().ok


def test_many_blobs_and_records_compressed_by_other_processes_read_back_exactly(store: EventStore) -> None:
    """Batches with more blob bytes than one thread compresses (``THREADED_BLOB_BYTES``): on forked
    processes, the blobs (each against the dictionary of the first of its kind) and the records come back
    as they were given, and the log verifies."""
    from evalstore.store import recorder

    _started(store, "run-a")
    given: dict[str, bytes] = {}

    def batches():  # type: ignore[no-untyped-def]
        for n in range(3):
            events, fields, _ = _batch("run-a", range(n * 40, n * 40 + 40))
            blobs = {}
            for i in range(40):
                data = ("system prompt shared by all\n" * 1000 + f"row {n} {i}: " + "x" * (i * 37)).encode()
                blobs[sha256_hex(data)] = data
            given.update(blobs)
            assert sum(map(len, blobs.values())) > recorder.THREADED_BLOB_BYTES
            yield events, fields, blobs

    with forked.pool(2) as pool:
        store.append_batches("run-a", batches(), processes=pool)
    assert store.get_blobs(list(given)) == given
    events = list(store.read_stream("run-a"))
    assert [e.event_id for e in events[1:3]] == ["run-a-v0", "run-a-s0"]
    assert len(store.query("results", run_id="run-a")) == 120
    assert store.verify().ok


def test_the_writer_thread_is_given_a_short_switch_interval_while_batches_are_written(store: EventStore) -> None:
    """While the preparing thread runs Python, the writer thread (back from SQLite for each statement)
    waits for the interpreter's switch interval: shortened while the batches are appended, and put back
    after, also when a batch fails."""
    import sys

    from evalstore.store import recorder

    _started(store, "run-a")
    before = sys.getswitchinterval()
    seen: list[float] = []

    def batches():  # type: ignore[no-untyped-def]
        for n in range(2):
            seen.append(sys.getswitchinterval())
            yield _batch("run-a", range(n * 10, n * 10 + 10))

    store.append_batches("run-a", batches())
    assert before > recorder.WRITER_SWITCH_S
    assert seen == [recorder.WRITER_SWITCH_S] * 2
    assert sys.getswitchinterval() == before

    def failing():  # type: ignore[no-untyped-def]
        yield _batch("run-a", range(20, 30))
        raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError, match="went away"):
        store.append_batches("run-a", failing())
    assert sys.getswitchinterval() == before
    assert len(store.query("results", run_id="run-a")) == 30


def test_the_batches_queued_after_one_that_fails_are_not_written(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to two batches wait for the writer thread: when one fails, those queued after it are not written
    (they would leave a gap in the stream where it is), and its error is raised."""
    from evalstore.store import log

    _started(store, "run-a")
    real = log.insert_records
    calls: list[int] = []

    def failing_second(conn, rows, dictionary):  # type: ignore[no-untyped-def]
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("the disk is full")
        real(conn, rows, dictionary)

    monkeypatch.setattr(log, "insert_records", failing_second)
    batches = [_batch("run-a", range(n * 10, n * 10 + 10)) for n in range(4)]
    with pytest.raises(RuntimeError, match="disk is full"):
        store.append_batches("run-a", batches)
    assert len(calls) == 2  # the batches after the failing one never reached the database
    assert len(store.query("results", run_id="run-a")) == 10
    assert [e.stream_version for e in store.read_stream("run-a")] == list(range(1, 22))
    assert store.verify().ok
