"""Recorders: where grading writes its events and blobs (see ``evalstore.replay.grading.graders.base.Recorder``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from evalstore.replay.grading.reuse import reusable_conversion, reusable_judge_call, reusable_process_call
from evalstore.store import EventStore, NewEvent
from evalstore.store.codec import sha256_hex
from evalstore.store.envelope import new_event_id
from evalstore.store.errors import BlobNotFound
from evalstore.store.events import DomainEvent, GraderCalled, PreprocessingRecorded


class MemoryRecorder:
    """Keeps everything in memory: for grading without a store, and for tests.

    ``events`` holds ``(event_id, event)`` in recording order; ``blobs`` maps sha256 to bytes.
    """

    def __init__(self, blob_source: Callable[[str], bytes] | None = None) -> None:
        self.events: list[tuple[str, DomainEvent]] = []
        self.blobs: dict[str, bytes] = {}
        self._blob_source = blob_source
        """Where blobs not recorded here come from (e.g. a store's ``get_blob``)."""

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        self.blobs.setdefault(digest, bytes(data))
        return digest

    def get_blob(self, sha256: str) -> bytes:
        if sha256 in self.blobs:
            return self.blobs[sha256]
        if self._blob_source is not None:
            return self._blob_source(sha256)
        raise BlobNotFound(f"no blob with sha256 {sha256}")

    def record(self, event: DomainEvent, event_id: str | None = None) -> str:
        event_id = event_id or new_event_id()
        self.events.append((event_id, event))
        return event_id

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        """The most recent successful conversion with this fingerprint."""
        for event_id, event in reversed(self.events):
            if reusable_conversion(event, fingerprint):
                return event_id, event  # type: ignore[return-value]
        return None

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """The most recent successful judge call with this cache key."""
        for event_id, event in reversed(self.events):
            if reusable_judge_call(event, cache_key):
                return event_id, event  # type: ignore[return-value]
        return None

    def find_process_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """The most recent reusable code-grader execution with this cache key (``process_cache``)."""
        for event_id, event in reversed(self.events):
            if reusable_process_call(event, cache_key):
                return event_id, event  # type: ignore[return-value]
        return None

    def of_type(self, cls: type[DomainEvent]) -> list[tuple[str, DomainEvent]]:
        """Recorded events of one class, in order."""
        return [(event_id, event) for event_id, event in self.events if isinstance(event, cls)]


@dataclass(frozen=True)
class ReadAhead:
    """Code-grader executions (``judge_cache`` entries, by cache key) and the blobs of their replies, read
    in a few queries before a replay grades: those the runs sharing its transcripts recorded. An unchanged
    replay reuses every execution, and looking each up (and its reply) one query at a time was most of
    its work. Each entry is the event :meth:`EventStore.lookup` gives for its key, so reading it here
    changes nothing but the number of queries."""

    process_calls: Mapping[str, tuple[str, GraderCalled]] = field(default_factory=dict)
    blobs: Mapping[str, bytes] = field(default_factory=dict)

    LIMIT: ClassVar[int] = 50_000
    """More executions than this are not read ahead (bounding the memory their replies take): they are
    looked up one by one, as without."""

    @classmethod
    def of_runs(cls, store: EventStore, run_ids: Iterable[str]) -> ReadAhead:
        entries = store.index_entries("judge_cache", run_ids, limit=cls.LIMIT)
        calls: dict[str, tuple[str, GraderCalled]] = {}
        for key, stored in (entries or {}).items():
            if stored.type == "grader_called" and reusable_process_call(event := stored.event, key):
                calls[key] = (stored.event_id, event)  # type: ignore[assignment]
        digests = [d for _, c in calls.values() for d in (c.reply_sha256, c.stderr_sha256) if d]
        return cls(calls, store.get_blobs(digests) if digests else {})


class StoreRecorder:
    """Buffers one test's events and blobs; :meth:`flush` appends them to the run's stream atomically.

    Lookups see this test's buffered work first, then what was read ahead (``ahead``), then the store's
    reuse indexes (``conversions``, ``judge_cache``), which span every run in the store. ``waiting`` (a
    replay's ``GradingContext.test_waiting``) is called before each read of a store on a database server:
    its round trip is a wait, during which the replay grades its next test; SQLite's reads, in this
    process, are not.
    """

    def __init__(
        self,
        store: EventStore,
        run_id: str,
        ahead: ReadAhead | None = None,
        *,
        key: tuple[str, str, int] | None = None,
        waiting: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.key = key
        """The result this recorder holds whole (a replay's test), appended exactly once by
        :class:`BatchedAppends` (``EventStore.append_units``); None for a run's parts of a test."""
        self.events: list[NewEvent] = []
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._ahead = ahead or _NOTHING_AHEAD
        self._waiting = waiting if store.on_server else None

    def _read(self) -> EventStore:
        """The store, for a read (see ``waiting``)."""
        if self._waiting is not None:
            self._waiting()
        return self.store

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        with self._lock:
            self.blobs[digest] = data
        return digest

    def get_blob(self, sha256: str) -> bytes:
        with self._lock:
            data = self.blobs.get(sha256)
        if data is None:
            data = self._ahead.blobs.get(sha256)
        return data if data is not None else self._read().get_blob(sha256)

    def record(self, event: DomainEvent, event_id: str | None = None) -> str:
        event_id = event_id or new_event_id()
        with self._lock:
            self.events.append(NewEvent(event, event_id))
        return event_id

    def _buffered(self, match: Callable[[DomainEvent], bool]) -> tuple[str, DomainEvent] | None:
        with self._lock:
            for new in reversed(self.events):
                if match(new.payload):
                    return new.event_id, new.payload  # type: ignore[return-value]
        return None

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        hit = self._buffered(lambda e: reusable_conversion(e, fingerprint))
        if hit is None and (stored := self._read().lookup("conversions", fingerprint)) is not None:
            hit = (stored.event_id, stored.event)
        return hit  # type: ignore[return-value]

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        hit = self._buffered(lambda e: reusable_judge_call(e, cache_key))
        if hit is None and (stored := self._read().lookup("judge_cache", cache_key)) is not None:
            hit = (stored.event_id, stored.event)
        return hit  # type: ignore[return-value]

    def find_process_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """This test's buffered executions, then the store's reuse index (``process_cache``)."""
        hit = self._buffered(lambda e: reusable_process_call(e, cache_key))
        if hit is None:
            hit = self._ahead.process_calls.get(cache_key)
        stored = self._read().lookup("judge_cache", cache_key) if hit is None else None
        if stored is not None and reusable_process_call(stored.event, cache_key):
            hit = (stored.event_id, stored.event)
        return hit  # type: ignore[return-value]

    def flush(self) -> None:
        """Append what was recorded since the last flush, with its blobs, in one transaction."""
        with self._lock:
            events, blobs = self.events, self.blobs
            self.events, self.blobs = [], {}
        if events:
            self.store.append(self.run_id, events, blobs=blobs)
        elif blobs:
            self.store.put_blobs(blobs)


_NOTHING_AHEAD = ReadAhead()


class BatchedAppends:
    """Appends several finished tests in one transaction.

    Each test's events go in whole, so a batch is as atomic per test as single appends. A test is
    durable at the latest ``max_seconds`` after it finished (a timer flushes), so a crash loses at most
    that much work, which a resume grades again. Used where per-test work is small next to the cost of
    a transaction (regrading). A batch is taken from the pending tests under a short lock and appended
    outside it (one append at a time), so the tests finishing meanwhile are not held up by the database."""

    def __init__(self, store: EventStore, run_id: str, *, max_tests: int = 16, max_seconds: float = 0.5) -> None:
        self.store = store
        self.run_id = run_id
        self.max_tests = max_tests
        self.max_seconds = max_seconds
        self._pending: list[StoreRecorder] = []
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._writing = threading.Lock()

    def add(self, recorder: StoreRecorder) -> None:
        with self._lock:
            self._raise_pending_error()
            if not self._pending:
                # However long the next test takes, this one is durable within max_seconds.
                timer = threading.Timer(self.max_seconds, self._flush_from_timer)
                timer.daemon = True
                timer.start()
            self._pending.append(recorder)
            batch = self._take() if len(self._pending) >= self.max_tests else []
        self._write(batch)

    def flush(self) -> None:
        with self._lock:
            self._raise_pending_error()
            batch = self._take()
        self._write(batch)
        with self._writing:  # and whatever another thread is appending now
            pass

    def _flush_from_timer(self) -> None:
        with self._lock:
            batch = self._take()
        try:
            self._write(batch)
        except Exception as exc:
            with self._lock:
                self._error = exc

    def _raise_pending_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _take(self) -> list[StoreRecorder]:
        batch, self._pending = self._pending, []
        return batch

    def _write(self, batch: list[StoreRecorder]) -> None:
        if not batch:
            return
        events = [e for r in batch for e in r.events]
        blobs = {k: v for r in batch for k, v in r.blobs.items()}
        try:
            with self._writing:
                if events and all(r.key is not None for r in batch):
                    # Whole results: a result the stream already holds is not appended again.
                    units = [(r.key, self.store.encode_with_payloads(r.events)) for r in batch if r.key is not None]
                    self.store.append_units(self.run_id, units, blobs=blobs)
                elif events:
                    self.store.append(self.run_id, events, blobs=blobs)
                elif blobs:
                    self.store.put_blobs(blobs)
        except BaseException:
            with self._lock:  # pending again, ahead of what came since: a later flush tries it again
                self._pending[:0] = batch
            raise
