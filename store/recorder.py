"""The append-only event log and blob store behind one small interface.

``EventStore.append`` is the only way anything is written. It runs in one transaction that (1) takes
the database-wide append lock, (2) drops events already stored with identical content (idempotent
retries), (3) checks the stream's expected version, (4) extends the hash chain, (5) stores the new
blobs once each, and (6) updates the projections. Either all of it lands or none of it does.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Integer, bindparam, case, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from evalstore.store import bulk, log, projections, reading, records, schema
from evalstore.store.blobs import (
    CHUNKS,
    BlobReader,
    Dictionaries,
    Dictionary,
    FileBlob,
    encode_blob,
    is_large,
    pieces_of,
    prefix_key,
    zdict_of,
)
from evalstore.store.codec import canonical_json, event_hasher, sha256_hex
from evalstore.store.engine import IMMEDIATE, ensure_current, make_engine
from evalstore.store.envelope import NewEvent, StoredEvent, new_event_id
from evalstore.store.errors import (
    AppendOnlyError,
    ConcurrencyError,
    DamagedRead,
    DatabaseFailure,
    IdempotencyError,
    NotFound,
    StoreError,
)
from evalstore.store.verify import verify as verify_store

if TYPE_CHECKING:
    from evalstore.store.events import DomainEvent

T = TypeVar("T")

Encoded = tuple[str, str, int, str] | tuple[str, str, int, str, dict[str, Any]]
"""An encoded event (:meth:`EventStore.encode_events`), with or without its payload dict
(:meth:`EventStore.encode_with_payloads`)."""
# An append compresses its blobs on a worker thread from this many bytes on (an import's batch of 1,000
# results has about 10 MB); a test's few blobs are not worth the hand-over.
THREADED_BLOB_BYTES = 1 << 20

# The one-row reads a replay makes per grader (a reuse-index lookup, a blob), built once: building and
# compiling the statement on each call cost as much as running it.
_BLOB_BY_DIGEST = select(schema.blobs.c.encoding, schema.blobs.c.data, schema.blobs.c.dictionary).where(
    schema.blobs.c.sha256 == bindparam("sha256")
)
_LOOKUPS = {
    index: select(table.c.seq, *log.RECORD, schema.streams.c.stream_id)
    .select_from(
        table.join(schema.records, schema.records.c.seq == log.containing(table.c.seq)).join(
            schema.streams, schema.streams.c.stream == schema.records.c.stream
        )
    )
    .where(table.c[projections.KEYS[index][0]] == bindparam("key"))
    for index, table in projections.TABLES.items()
    if index in projections.REUSE_INDEXES
}


def _run(run_id: str) -> Any:
    """The number that keys a run's rows in the results and verdicts projections (``streams``)."""
    s = schema.streams
    return select(s.c.stream).where(s.c.stream_id == run_id).scalar_subquery()


class _Recheck(Exception):
    """An optimistic append met something that may be a retry; run it again looking ids up."""


def _is_duplicate_event_id(exc: IntegrityError) -> bool:
    return "event_ids" in str(exc.orig)


def _given_id(event: NewEvent | DomainEvent) -> bool:
    return isinstance(event, NewEvent) and event.event_id is not None


WRITER_QUEUE = 2
"""Batches of :meth:`EventStore.append_batches` planned and waiting for the writer thread at most: with one,
the thread planning batch n + 1 waited for batch n to be written before planning n + 2, and each of
the two threads waited on the other in turn."""

WRITER_SWITCH_S = 0.0005
"""The interpreter's thread switch interval while :meth:`EventStore.append_batches` runs (Python's default
is 5 ms). Its writer thread gives up the GIL for every statement SQLite runs and needs it back to bind
the next one's rows; while the preparing thread runs Python (the next batch's hash chain), each time back
waited for that thread's interval to end: an import of 20,000 rubric rows (bench/import.py) left its
writer, the pass's longest thread, blocked ~1.1 s at 5 ms, ~0.5 s at 0.5 ms (its schedstat: wall minus
time on a CPU or in the run queue)."""

COMPRESSORS = min(os.cpu_count() or 1, 2)
"""Threads compressing the blobs of a large append, each a share of them: zlib releases the GIL, and one
thread compressing an Inspect log's samples (190 MB for 10,000) was the longest part of its writing pass
while the other core waited (bench/inspect_log.py). Also the shares an :meth:`EventStore.append_batches`
cuts a batch's records and blobs into for its ``processes``."""


@functools.cache
def _compressor(pid: int) -> ThreadPoolExecutor:
    """The worker threads that compress the blobs of large appends (every store of the process shares
    them). Per process id: a forked child has no copy of its parent's threads, and would wait for them forever."""
    return ThreadPoolExecutor(max_workers=COMPRESSORS, thread_name_prefix="evalstore-blobs")


def _fetched(conn: Connection, query: Any) -> list[tuple]:
    """The query's rows as the driver returns them (tuples), all at once: for small rows whose number the
    caller keeps anyway (the dialects' ``rows`` streams them, for reads of any size)."""
    result = conn.execute(query)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _drained(queued: deque[tuple[Future[_Head | None], _Head]]) -> _Head | None:
    """Where the log ends once the batches ``queued`` are written (None: none was)."""
    end = None
    while queued:
        end = queued.popleft()[0].result()
    return end


def _blob_size(job: tuple[bytes, str, Dictionary | None]) -> int:
    return len(job[0])


def _blob_rows(jobs: list[tuple[bytes, str, Dictionary | None]]) -> list[dict[str, object]]:
    """The rows of blobs (``data, digest, dictionary``): a module function, so a process can run it."""
    return [encode_blob(data, digest, dictionary).row() for data, digest, dictionary in jobs]


def _shares(items: list[T], count: int, size: Callable[[T], int]) -> list[list[T]]:
    """``items`` cut, in order, into at most ``count`` runs of about as many bytes (``size``) each."""
    total = sum(map(size, items))
    shares: list[list[T]] = [[]]
    done = 0
    for item in items:
        if done >= total * len(shares) / count and len(shares) < count:
            shares.append([])
        shares[-1].append(item)
        done += size(item)
    return shares


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class VerifyReport:
    events: int
    blobs: int
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


class EventStore:
    """An evalstore database: open with :meth:`open`, or wrap an existing engine."""

    def __init__(self, engine: Engine, *, check_schema: bool = True, create: bool = True) -> None:
        self.engine = engine
        # Each backend module imports its SQLAlchemy dialect; load only the one this store uses.
        self.dialect = importlib.import_module(
            "evalstore.store.postgres" if engine.dialect.name == "postgresql" else "evalstore.store.sqlite"
        )
        self._dictionaries = Dictionaries()
        self._blobs = BlobReader(self._blob_row, self._blob_rows, self._dictionaries)
        self._log = log.Log(engine, self.dialect)
        if check_schema:
            ensure_current(engine, create=create)

    @classmethod
    def open(cls, db: str | None = None) -> EventStore:
        return cls(make_engine(db))

    def close(self) -> None:
        self.engine.dispose()

    def drop_connections(self, *, close: bool = True) -> None:
        """Let go of the pool's connections: before a fork (``close``), so no child inherits one in use,
        and in the forked child (not ``close``: those are the parent's, which a child must not close)."""
        self.engine.dispose(close=close)

    @property
    def reopenable(self) -> bool:
        """Whether another process can open this store (forked workers, Ray's): any but an in-memory SQLite
        database, which lives and dies with this process's connections."""
        url = self.engine.url
        return not (url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"))

    @property
    def on_server(self) -> bool:
        """Whether the store is on a database server, each read a round trip (not a SQLite file)."""
        return self.engine.dialect.name != "sqlite"

    # --- writing -------------------------------------------------------------------------------

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent | DomainEvent],
        *,
        expected_version: int | None = None,
        blobs: Mapping[str, bytes | FileBlob] | None = None,
    ) -> list[StoredEvent]:
        """Append events to a stream, atomically with the blobs they reference.

        ``expected_version`` is the stream's current version as the caller last saw it (0 for a new
        stream); None appends wherever the stream is. Events whose id is already stored with identical
        content are skipped; the stored copies are returned in their place.
        """
        from evalstore.store.events import encode  # loaded by whoever built the events already

        prepared = []  # (event id, type, schema version, payload JSON, payload dict)
        for e in events:
            new = e if isinstance(e, NewEvent) else NewEvent(e)
            payload = encode(new.payload)
            prepared.append(
                (
                    new.event_id,  # None: the id derived from where it lands (store/records.py)
                    new.payload.type,
                    new.payload.schema_version,
                    canonical_json(payload),
                    payload,
                )
            )
        given = [p for p, e in zip(prepared, events) if _given_id(e)]
        return self._append_prepared(stream_id, prepared, given, expected_version, blobs)

    @staticmethod
    def encode_events(events: Sequence[NewEvent]) -> list[tuple[str, str, int, str]]:
        """Events as :meth:`append_encoded` and :meth:`append_units` take them: ``(event id, type, schema
        version, canonical payload JSON)``, an id drawn for an event that brings none. Where the work of
        encoding should not fall on the appending process (a Ray worker encodes what it graded)."""
        return [e[:4] for e in EventStore.encode_with_payloads(events)]

    @staticmethod
    def encode_with_payloads(events: Sequence[NewEvent]) -> list[tuple[str, str, int, str, dict[str, Any]]]:
        """:meth:`encode_events`, each with the payload dict its JSON encodes: given to :meth:`append_units`
        in the same process, the projections read it instead of parsing the JSON again (a sixth of
        appending an unchanged replay's tests)."""
        from evalstore.store.events import encode

        out = []
        for e in events:
            payload = encode(e.payload)
            event_id = e.event_id or new_event_id()
            out.append((event_id, e.payload.type, e.payload.schema_version, canonical_json(payload), payload))
        return out

    def append_units(
        self,
        stream_id: str,
        units: Sequence[tuple[tuple[str, str | None, int], Sequence[Encoded]]],
        *,
        blobs: Mapping[str, bytes | FileBlob] | None = None,
    ) -> set[tuple[str, str, int]]:
        """Append whole results exactly once: each unit is one result's events, keyed by ``(test id,
        target, attempt)``, ending in the ``test_scored`` that the ``results`` projection records. Under the
        append lock, a unit whose result the stream already holds is dropped whole, whatever its event ids:
        a regrade that was done twice (a Ray task retried after its worker died, a driver resumed while
        its tasks were still out) leaves one copy. Returns the keys appended (target ``""`` for none).
        Events are encoded as :meth:`encode_events` makes them, or with their payload dicts as
        :meth:`encode_with_payloads` does."""
        from evalstore.store.events import event_class

        keyed: list[tuple[str, str, int]] = []
        prepared = []
        for (test_id, target, attempt), events in units:
            key = (test_id, target or "", attempt)
            for event in events:
                event_class(event[1])  # an unknown type is refused here, as append would
                keyed.append(key)
                prepared.append((*event[:4], event[4] if len(event) > 4 else None))
        appended: set[tuple[str, str, int]] = set()

        def keep(conn: Connection) -> list[bool]:
            held = self._held_results(conn, stream_id, set(keyed))
            appended.clear()
            appended.update(k for k in keyed if k not in held)
            return [k not in held for k in keyed]

        try:
            try:
                self._append(stream_id, prepared, prepared, None, blobs, optimistic=True, keep=keep)
            except _Recheck:
                self._append(stream_id, prepared, prepared, None, blobs, optimistic=False, keep=keep)
        except DBAPIError as exc:
            raise _translate(exc) from exc
        return appended

    def _held_results(self, conn: Connection, run_id: str, keys: set[tuple[str, str, int]]) -> set[tuple]:
        """Which of these result keys the run's ``results`` projection already holds."""
        r = schema.results
        held: set[tuple] = set()
        for chunk in reading.chunks(sorted({k[0] for k in keys})):
            query = select(r.c.test_id, r.c.target, r.c.attempt).where(r.c.run == _run(run_id), r.c.test_id.in_(chunk))
            held.update(tuple(row) for row in conn.execute(query))
        return held & keys

    def append_encoded(
        self,
        stream_id: str,
        events: Sequence[tuple[str, str, int, str]],
        *,
        blobs: Mapping[str, bytes | FileBlob] | None = None,
        fields: Sequence[dict[str, Any] | None] | None = None,
    ) -> list[StoredEvent]:
        """:meth:`append` of events the caller has already encoded, each ``(event id, type, schema version,
        payload)`` with the payload as :func:`evalstore.store.events.encode` and
        :func:`~evalstore.store.codec.canonical_json` make it (an import encodes each result once, while
        checking it). Ids are given, so appending the same events again is a no-op. ``fields``, when given,
        holds per event :func:`evalstore.store.projections.read_fields` of its encoded payload (or None),
        so the projections are written without parsing the payloads again."""
        from evalstore.store.events import event_class

        prepared = []
        for i, (event_id, type_, schema_version, payload) in enumerate(events):
            event_class(type_)  # an unknown type is refused here, as append would
            # Without fields, the projections parse only the payloads they read.
            prepared.append((event_id, type_, schema_version, payload, fields[i] if fields is not None else None))
        return self._append_prepared(stream_id, prepared, prepared, None, blobs)

    def _append_prepared(
        self,
        stream_id: str,
        prepared: list[tuple],
        given: list[tuple],
        expected_version: int | None,
        blobs: Mapping[str, bytes | FileBlob] | None,
    ) -> list[StoredEvent]:
        try:
            if given:
                try:
                    return self._append(stream_id, prepared, given, expected_version, blobs, optimistic=True)
                except _Recheck:
                    pass
            return self._append(stream_id, prepared, given, expected_version, blobs, optimistic=False)
        except DBAPIError as exc:
            raise _translate(exc) from exc

    def append_copies(
        self,
        stream_id: str,
        copies: Sequence[tuple[str, str, int, str]],
        *,
        blobs: Mapping[str, bytes | FileBlob] | None = None,
    ) -> list[StoredEvent]:
        """Append events exactly as another store held them: ``(event id, type, schema version, payload
        JSON)``, the payload neither upcast nor re-encoded (moving a run between stores). The stream must
        be new or already hold these events (then nothing is written); seq, hashes and ``recorded_at``
        are this log's own. Idempotent like :meth:`append`."""
        # No payload dicts: the projections parse only the payloads they read.
        prepared = [(event_id, type_, version, payload, None) for event_id, type_, version, payload in copies]
        try:
            return self._append(stream_id, prepared, prepared, 0, blobs, optimistic=False)
        except DBAPIError as exc:
            raise _translate(exc) from exc

    def _append(
        self,
        stream_id: str,
        prepared: list[tuple],
        given: list[tuple],
        expected_version: int | None,
        blobs: Mapping[str, bytes | FileBlob] | None,
        *,
        optimistic: bool,
        keep: Callable[[Connection], list[bool]] | None = None,
    ) -> list[StoredEvent]:
        """One append transaction. ``optimistic`` skips looking up the caller's event ids (ids generated
        here cannot be stored yet) and lets the unique index on event_id catch a retry instead: anything
        that might be a retry (an id already stored, or a stream that moved) raises :class:`_Recheck`,
        and the caller runs the transaction again with the lookup. ``keep``, asked under the lock, says
        which of the prepared events to append at all (:meth:`append_units`); the rest are left out, and
        out of the returned list."""
        candidates: dict[bytes, Dictionary] = {}
        with self.engine.connect().execution_options(**{IMMEDIATE: True}) as conn, conn.begin():
            self.dialect.lock_for_append(conn)
            if keep is not None:
                kept = keep(conn)
                prepared = [p for p, k in zip(prepared, kept) if k]
                ids = {p[0] for p in prepared}
                given = [p for p in given if p[0] in ids]
            existing = {} if optimistic else self._existing(conn, stream_id, given)
            fresh = [p for p in prepared if p[0] is None or p[0] not in existing]
            if fresh:
                version = self._stream_version(conn, stream_id)
                if expected_version is not None and version != expected_version:
                    if optimistic:
                        raise _Recheck
                    raise ConcurrencyError(
                        f"stream {stream_id} is at version {version}, expected {expected_version}: "
                        "someone else appended to it; re-read and retry"
                    )
                # The blobs are compressed while the events are inserted (see _encoded_blobs); large ones
                # are read and stored a chunk at a time, after them.
                small, large = _split_large(blobs)
                blob_rows, candidates = self._encoded_blobs(conn, small) if small else (None, {})
                try:
                    stored = self._insert_events(conn, stream_id, version, fresh)
                except log.MisplacedId:
                    if optimistic:  # another place's id: an event stored already, looked up on the recheck
                        raise _Recheck from None
                    raise
                if blob_rows is not None:
                    self._insert_blob_rows(conn, blob_rows())
                for digest, data in large.items():
                    self._insert_chunked(conn, digest, data)
                # The payload dicts we encoded (if any) are what parsing the stored JSON would give back.
                number = self._number(conn, stream_id, version)
                numbers = {} if number is None else {stream_id: number}
                try:  # an id already stored is caught here, by the event_ids projection's key
                    projections.apply(conn, self.dialect, stored, [p[4] for p in fresh], numbers)
                except IntegrityError as exc:
                    if optimistic and _is_duplicate_event_id(exc):
                        raise _Recheck from exc
                    raise
            else:
                stored = []
        self._remember(candidates)
        appended = iter(stored)
        return [existing[p[0]] if p[0] is not None and p[0] in existing else next(appended) for p in prepared]

    def _existing(self, conn: Connection, stream_id: str, prepared: list[tuple]) -> dict[str, StoredEvent]:
        found = self._log.find(conn, [p[0] for p in prepared])
        for event_id, type_, version, payload, _ in prepared:
            old = found.get(event_id)
            if old and (old.stream_id, old.type, old.schema_version, old.payload_json) != (
                stream_id,
                type_,
                version,
                payload,
            ):
                raise IdempotencyError(
                    f"event {event_id} is already stored (seq {old.seq}) with different content; "
                    "event ids must not be reused"
                )
        return found

    def _stream_version(self, conn: Connection, stream_id: str) -> int:
        s = schema.streams
        return log.stream_version(conn, conn.execute(select(s.c.stream).where(s.c.stream_id == stream_id)).scalar())

    def _insert_events(self, conn: Connection, stream_id: str, version: int, fresh: list[tuple]) -> list[StoredEvent]:
        seq, prev = log.head(conn)
        rows = _chained(stream_id, _Head(seq, prev, version, None), fresh)
        parts = log.plain_records(rows)
        dictionary, zdict = self._record_dictionary(conn, [plain for _, plain in parts])
        number = None if version == 0 else self._number(conn, stream_id, version)
        bodies = log.deflated([plain for _, plain in parts], zdict)
        log.insert_records(conn, log.record_rows(number, parts, bodies), dictionary)
        return [StoredEvent.chained(row[:8], row[8], row[9]) for row in rows]

    def _record_dictionary(self, conn: Connection, plains: list[bytes]) -> tuple[int | None, bytes | None]:
        """The dictionary an append's records are compressed against, its number and bytes: the store's
        newest, or one made from these records when the store has none and they are many (under the
        append's lock)."""
        newest = self._log.newest_dictionary(conn)
        if newest is None and len(plains) >= records.DICTIONARY_RECORDS:
            data = records.dictionary_of(plains[: 2 * records.DICTIONARY_RECORDS])
            return self._log.add_dictionary(conn, data), data
        return newest, self._log.dictionary(conn, newest)

    @staticmethod
    def _number(conn: Connection, stream_id: str, version: int) -> int | None:
        """The stream's number for the projections (``streams``); None when this append starts the stream."""
        if version == 0:
            return None
        s = schema.streams
        number = conn.execute(select(s.c.stream).where(s.c.stream_id == stream_id)).scalar()
        if number is None:
            raise StoreError(f"projection streams lacks stream {stream_id}; run `evalstore db rebuild`")
        return number

    def append_batches(
        self,
        stream_id: str,
        batches: Iterable[
            tuple[Sequence[tuple[str, str, int, str]], Sequence[dict[str, Any] | None], Mapping[str, bytes | FileBlob]]
        ],
        *,
        processes: Executor | None = None,
    ) -> None:
        """Append batches of events the caller has already encoded, each in a transaction of its own, in order:
        ``(events, fields, blobs)``, each event ``(event id, type, schema version, payload)`` with the payload
        as :func:`evalstore.store.events.encode` and :func:`~evalstore.store.codec.canonical_json` make it
        (an import encodes each result once, while checking it), ``fields`` per event
        :func:`evalstore.store.projections.read_fields` of its payload (or None), so the projections are
        written without parsing the payloads again. Ids are given, so appending the same events again is a
        no-op, as with :meth:`append`.

        A batch is written on a worker thread while the next ones are prepared on this one (their hash chains
        and projection rows, from where the batches before will leave the log; :data:`WRITER_QUEUE` at most
        wait): the database's work releases the GIL. A batch that finds the log elsewhere (another writer
        appended between two transactions, or some of its events are stored already: an import run again
        after it was killed) is appended as :meth:`append` would, and the next is prepared again. A batch
        queued after one that failed is not written.

        ``processes``: worker processes (an import's, forked) that compress the batches' records and blobs,
        a share each. Compressing is most of the pass's work that is not Python, but each of an import's
        records and blobs is a few kilobytes, so threads giving up the GIL for each of them only took
        turns with the others: the pass took as long as doing all of it on one thread (bench/import.py)."""
        from evalstore.store.events import event_class

        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalstore-append")
        failed = threading.Event()

        def write(*args: Any) -> _Head | None:
            # A batch after one that failed is not written (the log would have a gap where that one is):
            # the failure is raised when its batch's turn comes.
            if failed.is_set():
                return None
            try:
                return self._append_planned(*args)
            except BaseException:
                failed.set()
                raise

        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WRITER_SWITCH_S))
        try:
            # The batches on the writer's queue, each with where its plan leaves the log.
            queued: deque[tuple[Future[_Head | None], _Head]] = deque()
            head: _Head | None = None
            dictionary = _Dictionary()
            for events, fields, blobs in batches:
                for type_ in {event[1] for event in events}:
                    event_class(type_)  # an unknown type is refused here, as append would
                prepared = [(*event, field) for event, field in zip(events, fields, strict=True)]
                if not prepared:
                    continue
                if head is None:
                    head = self._stream_head(stream_id)
                plan = _Plan.of(stream_id, head, prepared, dictionary, self, processes)
                while len(queued) >= WRITER_QUEUE:
                    landed, planned = queued.popleft()
                    if (actual := landed.result()) != planned:
                        # The log is not where the plans assumed: the batches queued after this one find
                        # that out themselves (_append_planned), this one is planned again.
                        actual = _drained(queued) or actual
                        assert actual is not None  # None: a batch before failed, and raised
                        plan = _Plan.of(stream_id, actual, prepared, dictionary, self, processes)
                if plan is None:
                    # Ids of other places in the stream: events stored already (the same file imported by
                    # another process meanwhile). Appended as append does it, looking the ids up.
                    _drained(queued)
                    self._append(stream_id, prepared, prepared, None, blobs, optimistic=False)
                    head = None
                    continue
                # Checked here (a hash of every blob's bytes), not on the writer thread, the pass's longest.
                landed = writer.submit(
                    write, stream_id, plan, prepared, blobs, _split_large(blobs), dictionary, processes
                )
                queued.append((landed, plan.end))
                head = plan.end
            _drained(queued)
        except DBAPIError as exc:
            raise _translate(exc) from exc
        finally:
            # The batches queued before a failure here are written, as they were when one was queued at most.
            writer.shutdown(wait=True)
            sys.setswitchinterval(interval)

    def _stream_head(self, stream_id: str) -> _Head:
        with self.engine.connect() as conn:
            return self._head_of(conn, stream_id)

    def _head_of(self, conn: Connection, stream_id: str) -> _Head:
        seq, prev = log.head(conn)
        version = self._stream_version(conn, stream_id)
        return _Head(seq, prev, version, self._number(conn, stream_id, version))

    def _append_planned(
        self,
        stream_id: str,
        plan: _Plan,
        prepared: list[tuple],
        blobs: Mapping[str, bytes | FileBlob],
        split: tuple[dict[str, bytes], dict[str, bytes | FileBlob]],
        dictionary: _Dictionary,
        processes: Executor | None,
    ) -> _Head:
        """One batch of :meth:`append_batches` (on its writer thread): the planned rows when the log is
        where the plan starts, else an append as :meth:`append` makes it. Returns where the log ends."""
        candidates: dict[bytes, Dictionary] = {}
        number = dictionary.number
        try:
            with self.engine.connect().execution_options(**{IMMEDIATE: True}) as conn, conn.begin():
                self.dialect.lock_for_append(conn)
                if self._head_of(conn, stream_id) != plan.start:
                    raise _Recheck
                small, large = split
                blob_rows, candidates = self._encoded_blobs(conn, small, processes) if small else (None, {})
                if number is None and dictionary.data is not None:
                    number = self._log.add_dictionary(conn, dictionary.data)
                log.insert_records(conn, plan.records(), number)
                if blob_rows is not None:
                    self._insert_blob_rows(conn, blob_rows())
                for digest, data in large.items():
                    self._insert_chunked(conn, digest, data)
                try:
                    projections.write(conn, self.dialect, plan.projections)
                except IntegrityError as exc:
                    if _is_duplicate_event_id(exc):
                        raise _Recheck from exc
                    raise
        except _Recheck:
            self._append(stream_id, prepared, prepared, None, blobs, optimistic=False)
            return self._stream_head(stream_id)
        dictionary.number = number  # committed: the next batches name it
        self._remember(candidates)
        return plan.end

    def _insert_blobs(self, conn: Connection, blobs: Mapping[str, bytes | FileBlob]) -> dict[bytes, Dictionary]:
        """Store the blobs not stored yet, each against the dictionary for its opening bytes if there is one.

        Returns the blobs (stored without a dictionary) that can serve as dictionaries for later blobs
        beginning alike, to :meth:`_remember` once this transaction has committed.
        """
        small, large = _split_large(blobs)
        rows, candidates = self._encoded_blobs(conn, small)
        self._insert_blob_rows(conn, rows())
        for digest, data in large.items():
            self._insert_chunked(conn, digest, data)
        return candidates

    def _insert_chunked(self, conn: Connection, claimed: str, data: bytes | FileBlob) -> None:
        """A large blob as chunk rows and the row naming them (:mod:`evalstore.store.blobs`), read, hashed,
        compressed and inserted a chunk at a time; refused (the transaction with it) when the whole does
        not hash to ``claimed``: a file that changed since its digest was taken."""
        b = schema.blobs
        if conn.execute(select(b.c.sha256).where(b.c.sha256 == claimed)).first() is not None:
            return
        whole, size, digests = hashlib.sha256(), 0, []
        held: set[str] = set()  # chunks stored here or before (a run of zeros repeats one chunk)
        try:
            for piece in pieces_of(data):
                whole.update(piece)
                size += len(piece)
                digest = sha256_hex(piece)
                if digest not in held:
                    held.add(digest)
                    if conn.execute(select(b.c.sha256).where(b.c.sha256 == digest)).first() is None:
                        self._insert_blob_rows(conn, [encode_blob(piece, digest).row()])
                digests.append(bytes.fromhex(digest))
        except OSError as exc:
            raise StoreError(f"{exc.filename}: cannot be read ({exc.strerror or exc})") from None
        if whole.hexdigest() != claimed:
            what = f"{data.path} changed while it was stored" if isinstance(data, FileBlob) else "blob given"
            raise StoreError(
                f"{what}: its bytes have digest {whole.hexdigest()}, not {claimed}; blobs are keyed by their sha256"
            )
        row = {"sha256": claimed, "size": size, "encoding": CHUNKS, "data": b"".join(digests), "dictionary": None}
        self._insert_blob_rows(conn, [row])

    def _encoded_blobs(
        self, conn: Connection, blobs: Mapping[str, bytes], processes: Executor | None = None
    ) -> tuple[Callable[[], list[dict[str, object]]], dict[bytes, Dictionary]]:
        """The rows of the blobs (checked by :func:`_split_large`) not stored yet (a function returning them),
        and the dictionary candidates (see :meth:`_insert_blobs`). Which dictionary each blob is compressed
        against is decided here, in order; the compressing itself, of many bytes, runs on worker threads, a
        share each (zlib and SQLite release the GIL, so it overlaps the append's inserts) and the function
        waits for it; on ``processes`` when given (:meth:`append_batches`)."""
        stored: dict[str, str | None] = {}  # digest -> its dictionary, for blobs already stored
        b = schema.blobs
        for chunk in reading.chunks(list(blobs)):
            stored.update(
                (sha, d) for sha, d in conn.execute(select(b.c.sha256, b.c.dictionary).where(b.c.sha256.in_(chunk)))
            )
        candidates: dict[bytes, Dictionary] = {}
        jobs: list[tuple[bytes, str, Dictionary | None]] = []
        for digest, data in blobs.items():
            key = prefix_key(data)
            if key is None:  # too small to compress: no dictionary, never one for others
                dictionary = None
            else:
                dictionary = self._dictionaries.for_prefix(key) or candidates.get(key)
            if digest not in stored:
                jobs.append((data, digest, dictionary))
            # The first blob of its kind stored without a dictionary (now or before) serves the next ones.
            if key is not None and dictionary is None and stored.get(digest) is None:
                candidates[key] = Dictionary(digest, zdict_of(data))

        if sum(len(job[0]) for job in jobs) < THREADED_BLOB_BYTES:
            return functools.partial(_blob_rows, jobs), candidates
        pool: Executor = processes or _compressor(os.getpid())
        shares = [pool.submit(_blob_rows, share) for share in _shares(jobs, COMPRESSORS, _blob_size)]
        return (lambda: [row for share in shares for row in share.result()]), candidates

    def _insert_blob_rows(self, conn: Connection, rows: list[dict[str, object]]) -> None:
        b = schema.blobs
        # Bytes stored under the same digest by a concurrent writer are the same bytes: keep theirs.
        bulk.executemany(
            conn,
            lambda: self.dialect.insert(b).on_conflict_do_nothing(index_elements=["sha256"]),
            rows,
            key=("insert-ignore", "blobs"),
        )

    def _remember(self, candidates: Mapping[bytes, Dictionary]) -> None:
        for key, dictionary in candidates.items():
            self._dictionaries.remember(key, dictionary)

    def put_blobs(self, blobs: Mapping[str, bytes | FileBlob]) -> None:
        """Store blobs on their own (content-addressed, so harmless to repeat); events should still link them."""
        with self.engine.connect().execution_options(**{IMMEDIATE: True}) as conn, conn.begin():
            candidates = self._insert_blobs(conn, blobs)
        self._remember(candidates)

    # --- reading -------------------------------------------------------------------------------

    def read_stream(
        self,
        stream_id: str,
        *,
        types: Iterable[str] | None = None,
        limit: int | None = None,
        after: int = 0,
        upto: int | None = None,
    ) -> Iterator[StoredEvent]:
        """A stream's events in order; ``limit``: at most that many; ``after`` and ``upto`` bound the stream
        versions read (``after < stream_version <= upto``), as :meth:`stream_payloads`'s do."""
        wanted = None if types is None else frozenset(types)
        if limit is not None and limit <= 0:
            return
        with self.engine.connect() as conn:
            yield from reading.stream_slice(
                self._log.read(conn, _stream_records(stream_id, after, upto), wanted), wanted, after, upto, limit
            )

    def stream_payloads(
        self, stream_id: str, *, types: Iterable[str], after: int = 0, upto: int | None = None
    ) -> Iterator[tuple[str, int, str, str]]:
        """A stream's events of ``types`` in order as plain ``(type, schema_version, payload JSON,
        recorded_at)`` tuples: what reading a whole run out again needs (exports), without the envelope
        objects :meth:`read_stream` builds per event. ``after`` and ``upto`` bound the stream versions
        read (``after < stream_version <= upto``): one chunk of a run (``replay/agentv/chunked.py``)."""
        with self.engine.connect() as conn:
            rows = self.dialect.rows(conn, _stream_records(stream_id, after, upto))
            yield from reading.payloads(rows, partial(self._log.plain, conn), frozenset(types), after, upto)

    def result_ends(self, run_id: str, *, every: int, upto_seq: int | None = None) -> list[int]:
        """The stream versions of every ``every``-th result's ``test_scored`` of a run, and of its last, in
        order: where to cut the run's stream into chunks of results. Read from the ``results``
        projection (a result's latest score) and the records' keys, not the stream's events. ``upto_seq``:
        only the results scored at or before that seq (those a summary counted)."""
        r, rec = schema.results, schema.records
        scored = select(r.c.seq).where(r.c.run == _run(run_id))
        if upto_seq is not None:
            scored = scored.where(r.c.seq <= upto_seq)
        with self.engine.connect() as conn:
            # Fetched whole, a number or two a row: one at a time, through the driver's cursor, took as long
            # as the queries (bench/read.py's export, 20,000 results: 40 ms -> 20 ms before its workers start).
            seqs = [seq for (seq,) in _fetched(conn, scored.order_by(r.c.seq))]
            if not seqs:
                return []
            # In version order, the (stream, version) index's: the same order as seq's within a stream, unsorted.
            starts = _fetched(
                conn, select(rec.c.seq, rec.c.version).where(rec.c.stream == _run(run_id)).order_by(rec.c.version)
            )
        return reading.result_ends(seqs, starts, every)

    def test_events(self, stream_id: str, test_id: str, *, types: Iterable[str]) -> Iterator[StoredEvent]:
        """The events of ``types`` in a stream that belong to one test, in order, without parsing the rest of
        the stream: only records whose text names the test id (canonical JSON writes it as
        ``"test_id":"..."``) are read into events; the caller still checks each decoded event's
        ``test_id``, as this also keeps payloads that merely quote that text elsewhere."""
        needle = '"test_id":' + canonical_json(test_id)
        wanted = frozenset(types)
        with self.engine.connect() as conn:
            for row in self.dialect.rows(conn, _stream_records(stream_id, 0, None)):
                plain = self._log.plain(conn, row)
                if needle.encode("utf-8") not in plain:
                    continue
                for ev in self._log.events(conn, row, plain):
                    if ev.type in wanted and needle in ev.payload_json:
                        yield ev

    def read_all(self, *, after_seq: int = 0) -> Iterator[StoredEvent]:
        rec = schema.records
        with self.engine.connect() as conn:
            for ev in self._log.read(conn, log.select_records(rec.c.seq + rec.c.count > after_seq + 1)):
                if ev.seq > after_seq:
                    yield ev

    def get_event(self, event_id: str) -> StoredEvent:
        found = self.get_events([event_id])
        if event_id not in found:
            raise NotFound(f"no event {event_id}")
        return found[event_id]

    def events_at(self, seqs: Iterable[int]) -> dict[int, StoredEvent]:
        """Events by their seq (what projection rows name them by), many in one query per few hundred."""
        with self.engine.connect() as conn:
            return self._log.at(conn, seqs)

    def get_events(self, event_ids: Iterable[str]) -> dict[str, StoredEvent]:
        with self.engine.connect() as conn:
            return self._log.find(conn, event_ids)

    def stream_version(self, stream_id: str) -> int:
        with self.engine.connect() as conn:
            return self._stream_version(conn, stream_id)

    def get_blob(self, sha256: str) -> bytes:
        return self._blobs.get_blob(sha256)

    def blob_pieces(self, sha256: str) -> Iterator[bytes]:
        return self._blobs.blob_pieces(sha256)

    def blob_digest(self, encoding: str, data: bytes, dictionary: str | None) -> tuple[str, int]:
        return self._blobs.blob_digest(encoding, data, dictionary)

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        return self._blobs.get_blobs(digests)

    def _blob_row(self, sha256: str) -> tuple[str, bytes, str | None] | None:
        with self.engine.connect() as conn:
            row = conn.execute(_BLOB_BY_DIGEST, {"sha256": sha256}).first()
        return None if row is None else tuple(row)

    def _blob_rows(self, keys: list[str]) -> list[tuple]:
        b = schema.blobs
        rows: list[tuple] = []
        with self.engine.connect() as conn:
            for chunk in reading.chunks(keys):
                query = select(b.c.sha256, b.c.encoding, b.c.data, b.c.dictionary).where(b.c.sha256.in_(chunk))
                rows.extend(self.dialect.rows(conn, query))
        return rows

    def has_blobs(self, digests: Iterable[str]) -> set[str]:
        keys = list(dict.fromkeys(digests))
        found: set[str] = set()
        with self.engine.connect() as conn:
            for chunk in reading.chunks(keys):
                found.update(
                    conn.execute(select(schema.blobs.c.sha256).where(schema.blobs.c.sha256.in_(chunk))).scalars()
                )
        return found

    def lookup(self, index: str, key: str) -> StoredEvent | None:
        """The event a reuse index (``judge_cache`` or ``conversions``) holds for a key."""
        # One query: a replay looks up every grader execution and judge call it might reuse.
        with self.engine.connect() as conn:
            row = conn.execute(_LOOKUPS[index], {"key": key}).first()
            if row is None:
                return None
            return next(ev for ev in self._log.events(conn, row[1:]) if ev.seq == row[0])

    def index_entries(self, index: str, stream_ids: Iterable[str], *, limit: int) -> dict[str, StoredEvent] | None:
        """The entries of a reuse index whose events belong to these streams, by key, each the event
        :meth:`lookup` gives for that key; None when there are more than ``limit``. A replay reads what the
        runs sharing its transcripts recorded at once, instead of one lookup per grader execution."""
        table = projections.TABLES[index]
        key_column = table.c[projections.KEYS[index][0]]
        rec, st = schema.records, schema.streams
        streams = list(dict.fromkeys(stream_ids))
        found: dict[str, StoredEvent] = {}
        with self.engine.connect() as conn:
            for chunk in reading.chunks(streams):
                query = (
                    select(key_column, table.c.seq, *log.RECORD, st.c.stream_id)
                    .select_from(
                        table.join(rec, rec.c.seq == log.containing(table.c.seq)).join(st, st.c.stream == rec.c.stream)
                    )
                    .where(st.c.stream_id.in_(chunk))
                    .limit(limit + 1 - len(found))
                )
                held: dict[int, list[StoredEvent]] = {}  # a record's events, read once for its entries
                for row in self.dialect.rows(conn, query):
                    events = held.get(row[2])
                    if events is None:
                        events = held[row[2]] = self._log.events(conn, row[2:])
                    found[row[0]] = events[row[1] - row[2]]
                if len(found) > limit:
                    return None
        return found

    def query(self, table: str, **where: Any) -> list[dict[str, Any]]:
        """Rows of a projection table matching column equalities, in key order."""
        tbl = projections.TABLES[table]
        stmt = select(tbl)
        for column, value in where.items():
            # Results and verdicts are keyed by the run's number; a caller names the run.
            if column == "run_id" and "run" in tbl.c:
                stmt = stmt.where(tbl.c.run == _run(value))
            else:
                stmt = stmt.where(tbl.c[column] == value)
        stmt = stmt.order_by(*[tbl.c[k] for k in projections.KEYS[table]])
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    RESULT_COLUMNS = reading.RESULT_COLUMNS
    VERDICT_COLUMNS = reading.VERDICT_COLUMNS

    def results_with_verdicts(self, run_id: str) -> Iterator[tuple[tuple, list[tuple]]]:
        """A run's results projection in key order, each with its verdict rows (by grader name), streamed:
        ``(result, verdicts)`` as plain tuples laid out as :attr:`RESULT_COLUMNS` and
        :attr:`VERDICT_COLUMNS` (``passed`` as the driver returns it: 0 or 1 from SQLite). One query; no
        event is decoded, and the rows are the driver's (``dialect.rows``: text, numbers, no processing)."""
        r, v = schema.results, schema.verdicts
        query = (
            select(*[r.c[c] for c in self.RESULT_COLUMNS], *[v.c[c] for c in self.VERDICT_COLUMNS])
            .select_from(r.outerjoin(v, (v.c.run == r.c.run) & _same_result(r, v)))
            .where(r.c.run == _run(run_id))
            .order_by(r.c.test_id, r.c.target, r.c.attempt, v.c.grader)
        )
        with self.engine.connect() as conn:
            yield from reading.grouped_verdicts(self.dialect.rows(conn, query))

    def result_counts(self, run_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Per run: number of results, passed, execution errors, the score sum and that of the execution
        errors, the least and greatest target of its results, and the seq of the last result counted
        (``last_seq``: one aggregate query, so the counts are of exactly the results up to it).
        Results with status ``not_regradable`` are counted apart (``not_regradable``), in none of the others."""
        r, s = schema.results, schema.streams
        scored = r.c.status != "not_regradable"
        query = (
            select(
                s.c.stream_id.label("run_id"),
                func.sum(case((scored, 1), else_=0)).label("tests"),
                func.sum(case((r.c.passed, 1), else_=0)).label("passed"),
                func.sum(case((r.c.status == "execution_error", 1), else_=0)).label("errors"),
                func.sum(case((scored, r.c.score), else_=None)).label("score_sum"),
                func.sum(case((r.c.status == "execution_error", r.c.score), else_=0)).label("error_score_sum"),
                func.sum(case((scored, 0), else_=1)).label("not_regradable"),
                func.min(r.c.target).label("target_min"),
                func.max(r.c.target).label("target_max"),
                func.max(r.c.seq).label("last_seq"),
            )
            .select_from(r.join(s, s.c.stream == r.c.run))
            .group_by(s.c.stream_id)
        )
        if run_id is not None:
            query = query.where(r.c.run == _run(run_id))
        with self.engine.connect() as conn:
            return reading.counts(dict(row) for row in conn.execute(query).mappings())

    def results_page(
        self,
        run_id: str,
        *,
        status: str | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        grader: str | None = None,
        grader_verdict: str | None = None,
        text: str | None = None,
        order: str = "test_id",
        descending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of a run's results (projection rows) matching the filters, and how many match in all.

        ``grader`` keeps results that have a verdict from that grader (``grader_verdict``: with that
        verdict); ``text`` is a substring of the test id; ``order`` is a results column."""
        r, v = schema.results, schema.verdicts
        conditions = [r.c.run == _run(run_id)]
        if status:
            conditions.append(r.c.status == status)
        if min_score is not None:
            conditions.append(r.c.score >= min_score)
        if max_score is not None:
            conditions.append(r.c.score <= max_score)
        if text:
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            conditions.append(r.c.test_id.like(f"%{escaped}%", escape="\\"))
        if grader:
            match = [v.c.run == r.c.run, _same_result(r, v), v.c.grader == grader]
            if grader_verdict:
                match.append(v.c.verdict == grader_verdict)
            conditions.append(select(v.c.grader).where(*match).exists())
        column = r.c.get(order, r.c.test_id)
        keys = [r.c.test_id, r.c.target, r.c.attempt]
        ordering = [column.desc() if descending else column, *[k.desc() if descending else k for k in keys]]
        page = select(r).where(*conditions).order_by(*ordering).limit(limit).offset(offset)
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(r).where(*conditions)).scalar() or 0
            rows = [dict(row) for row in conn.execute(page).mappings()]
        return rows, int(total)

    def verdicts_of(self, run_id: str, test_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The verdict projection rows of some tests of a run (every target and attempt)."""
        v = schema.verdicts
        found: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for chunk in reading.chunks(list(dict.fromkeys(test_ids))):
                query = select(v).where(v.c.run == _run(run_id), v.c.test_id.in_(chunk))
                found.extend(dict(row) for row in conn.execute(query).mappings())
        return found

    def graders_of(self, run_id: str) -> list[tuple[str, str, int, str, str]]:
        """Each verdict of a run as ``(test_id, target, attempt, grader, grader_type)`` (target ``""`` when
        none), the driver's rows: what a replay asks of its parent's graders before it grades."""
        v = schema.verdicts
        query = select(v.c.test_id, v.c.target, v.c.attempt, v.c.grader, v.c.grader_type).where(v.c.run == _run(run_id))
        with self.engine.connect() as conn:
            return list(self.dialect.rows(conn, query))

    def verdict_events(self, run_id: str, test_ids: Iterable[str]) -> Iterator[tuple[tuple, str, StoredEvent]]:
        """The verdict events of some tests of a run (every target and attempt), found through the
        verdicts projection: ``((test_id, target, attempt), grader, event)``, the target as the projection
        keeps it ("" for none)."""
        v = schema.verdicts
        with self.engine.connect() as conn:
            for chunk in reading.chunks(list(dict.fromkeys(test_ids))):
                query = select(v.c.test_id, v.c.target, v.c.attempt, v.c.grader, v.c.seq).where(
                    v.c.run == _run(run_id), v.c.test_id.in_(chunk)
                )
                rows = conn.execute(query).all()
                events = self._log.at(conn, [row[4] for row in rows])
                for row in rows:
                    yield (row[0], row[1], row[2]), row[3], events[row[4]]

    def grader_counts(self, run_id: str) -> list[dict[str, Any]]:
        """A run's verdicts tallied per grader and (status, verdict): their number, cache hits and score
        sum. Apart by status and verdict, so the reader applies its own rule of which verdicts count (a
        failed grader's recorded 0 is left out of the viewer's mean: ``grading.errored``)."""
        v = schema.verdicts
        query = (
            select(
                v.c.grader,
                func.min(v.c.grader_type).label("grader_type"),
                v.c.status,
                v.c.verdict,
                func.count().label("verdicts"),
                func.sum(case((v.c.cache_hit, 1), else_=0)).label("cache_hits"),
                func.sum(v.c.score).label("score_sum"),
            )
            .where(v.c.run == _run(run_id))
            .group_by(v.c.grader, v.c.status, v.c.verdict)
            .order_by(v.c.grader)
        )
        with self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def cache_hit_counts(self, run_id: str, origin: str) -> dict[tuple[str, bool], int]:
        """A run's verdicts of one ``origin`` counted by (grader type, cache hit): one aggregate, so a run of
        10^5 results is not read row by row (a list of every verdict was ~1.3 KB a test on PostgreSQL)."""
        v = schema.verdicts
        hit = case((v.c.cache_hit, 1), else_=0).label("hit")
        query = (
            select(v.c.grader_type, hit, func.count().label("n"))
            .where(v.c.run == _run(run_id), v.c.origin == origin)
            .group_by(v.c.grader_type, hit)
        )
        counts: dict[tuple[str, bool], int] = {}
        with self.engine.connect() as conn:
            for grader_type, cache_hit, n in conn.execute(query):
                key = (grader_type, bool(cache_hit))
                counts[key] = counts.get(key, 0) + n
        return counts

    def score_histogram(self, run_id: str, bins: int = 10) -> list[int]:
        """How many of a run's results score in each of ``bins`` equal bins of [0, 1] (1.0 in the last;
        scores outside [0, 1] in the nearest end bin)."""
        r = schema.results
        scaled = r.c.score * bins
        # CAST truncates on SQLite but rounds on PostgreSQL, which has FLOOR (SQLite may lack it).
        floor = func.floor(scaled) if self.engine.dialect.name == "postgresql" else scaled
        bucket = func.cast(floor, Integer).label("bucket")
        query = select(bucket, func.count().label("n")).where(r.c.run == _run(run_id)).group_by(bucket)
        counts = [0] * bins
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                counts[min(max(int(row["bucket"] or 0), 0), bins - 1)] += row["n"]
        return counts

    def paired_results(self, run_a: str, run_b: str) -> list[tuple]:
        """The results two runs share a key with: ``(test_id, target, attempt, score_a, score_b,
        passed_a, passed_b, status_a, status_b)``, in no particular order (one join, no decoding)."""
        a, b = schema.results.alias("a"), schema.results.alias("b")
        query = (
            select(
                a.c.test_id,
                a.c.target,
                a.c.attempt,
                a.c.score,
                b.c.score,
                a.c.passed,
                b.c.passed,
                a.c.status,
                b.c.status,
            )
            .select_from(a)
            .join(b, (b.c.run == _run(run_b)) & _same_result(a, b))
            .where(a.c.run == _run(run_a))
        )
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(query)]

    def paired_verdicts(self, run_a: str, run_b: str) -> list[tuple]:
        """Every verdict of either run beside the same grader's verdict on the same result in the other:
        ``(test_id, target, attempt, grader, score_a, verdict_a, score_b, verdict_b)``, the side without
        one None. Whether the results themselves pair is the caller's business (``paired_results``)."""
        a, b = schema.verdicts.alias("a"), schema.verdicts.alias("b")
        same = _same_result(a, b) & (b.c.grader == a.c.grader)
        cols = (a.c.test_id, a.c.target, a.c.attempt, a.c.grader)
        left = (
            select(*cols, a.c.score, a.c.verdict, b.c.score, b.c.verdict)
            .select_from(a)
            .outerjoin(b, (b.c.run == _run(run_b)) & same)
        )
        right = (
            select(b.c.test_id, b.c.target, b.c.attempt, b.c.grader, b.c.score, b.c.verdict)
            .where(b.c.run == _run(run_b))
            .where(~select(a.c.grader).where(a.c.run == _run(run_a), same).exists())
        )
        with self.engine.connect() as conn:
            rows = [tuple(row) for row in conn.execute(left.where(a.c.run == _run(run_a)))]
            rows.extend((t, tg, at, g, None, None, sc, v) for t, tg, at, g, sc, v in conn.execute(right))
        return rows

    def unpaired_results(self, run_a: str, run_b: str, *, limit: int = 200) -> tuple[list[tuple[str, str, int]], int]:
        """The first ``limit`` result keys of ``run_a`` that ``run_b`` has no result for (key order), and
        how many there are."""
        a, b = schema.results.alias("a"), schema.results.alias("b")
        conditions = [
            a.c.run == _run(run_a),
            ~select(b.c.test_id).where(b.c.run == _run(run_b), _same_result(a, b)).exists(),
        ]
        keys = select(a.c.test_id, a.c.target, a.c.attempt).where(*conditions)
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(a).where(*conditions)).scalar() or 0
            rows = conn.execute(keys.order_by(a.c.test_id, a.c.target, a.c.attempt).limit(limit))
            return [(t, tg, at) for t, tg, at in rows], int(total)

    def run_ids(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(schema.runs.c.run_id).order_by(schema.runs.c.started_seq)).scalars())

    def chain_hashes(self, *, upto: int | None = None) -> Iterator[tuple[int, str]]:
        """``(seq, hash)`` of every event with ``seq <= upto`` (all when None), in seq order: the Merkle
        tree's leaves (:mod:`evalstore.store.merkle`). Read by one statement, so one consistent prefix."""
        with self.engine.connect() as conn:
            for ev in log.replay(conn, self._log, upto=upto):
                yield ev.seq, ev.hash

    # --- maintenance ---------------------------------------------------------------------------

    def rebuild_projections(self) -> int:
        """Drop every projection row and derive them again from the log alone; returns events read."""
        count = 0
        with self.engine.connect().execution_options(**{IMMEDIATE: True}) as conn, conn.begin():
            self.dialect.lock_for_append(conn)
            projections.clear(conn)
            batch: list[StoredEvent] = []
            numbers: dict[str, int] = {}  # each stream's number, from its first event (read before the rest)
            for ev in list(log.replay(conn, self._log)):
                batch.append(ev)
                count += 1
                if len(batch) >= 5000:
                    projections.apply(conn, self.dialect, batch, numbers=numbers)
                    numbers.update(projections.first_numbers(batch))
                    batch = []
            if batch:
                projections.apply(conn, self.dialect, batch, numbers=numbers)
        return count

    def damage_behind(self, failure: BaseException) -> DamagedRead | None:
        """The damage that made a read fail with ``failure`` (an error of the code reading, not of the
        store's API), as one error naming it and how to repair it; None when the store verifies, so the
        failure is a bug. Only called once a read has failed: it reads the whole store."""
        try:
            problem = self.verify().problem
        except Exception:  # a store too damaged to verify leaves the original failure to be reported
            return None
        if problem is None:
            return None
        return DamagedRead(
            f"the store is damaged ({type(failure).__name__} reading it), as `evalstore verify` reports: {problem}"
        )

    def verify(self) -> VerifyReport:
        """Recompute the hash chain, every blob digest, the blobs events need, and the projections; stop
        at the first problem (see :mod:`evalstore.store.verify`)."""
        events, blobs, problem = verify_store(self.engine, self.blob_digest)
        return VerifyReport(events, blobs, problem)


StoreOrOpener = EventStore | Callable[[], EventStore]
"""A store, or what opens one, making it if need be: an import given the second checks its whole source
before any store exists, so a source it refuses leaves none behind (nothing could be imported into it)."""


def opened(store: StoreOrOpener) -> EventStore:
    return store if isinstance(store, EventStore) else store()


def completed_run(store: StoreOrOpener, run_id: str) -> dict[str, Any] | None:
    """The run's row when the store holds it completed (an import already made); None otherwise, and for a
    store not made yet."""
    if not isinstance(store, EventStore):
        return None
    rows = store.query("runs", run_id=run_id)
    return rows[0] if rows and rows[0]["status"] == "completed" else None


@dataclass(frozen=True)
class _Head:
    """Where the log ends: its last seq and hash, and the version and number (None before its first event)
    of the stream appended to."""

    seq: int
    hash: str
    version: int
    number: int | None


def _chained(stream_id: str, head: _Head, fresh: Sequence[tuple]) -> list[tuple]:
    """Events rows (in the table's column order, which is also StoredEvent's field order) for ``fresh``
    ``(event id, type, schema version, payload, ...)`` appended after ``head``, one time for all."""
    recorded_at = _now()
    hashed = event_hasher(stream_id, recorded_at)
    seq, prev, version = head.seq, head.hash, head.version
    rows = []
    for event_id, type_, schema_version, payload, *_ in fresh:
        seq += 1
        version += 1
        event_id = event_id or records.derived_id(stream_id, version)
        digest = hashed(prev, seq, event_id, version, type_, schema_version, payload)
        rows.append((seq, event_id, stream_id, version, type_, schema_version, payload, recorded_at, prev, digest))
        prev = digest
    return rows


class _Dictionary:
    """The dictionary an import's records are compressed against (:meth:`EventStore.append_batches`): made
    from its first batch's records, or the store's newest when that batch is small; ``number`` once stored."""

    def __init__(self) -> None:
        self.decided = False
        self.data: bytes | None = None
        self.number: int | None = None

    def decide(self, store: EventStore, plains: list[bytes]) -> None:
        if self.decided:
            return
        self.decided = True
        if len(plains) >= records.DICTIONARY_RECORDS:
            self.data = records.dictionary_of(plains[: 2 * records.DICTIONARY_RECORDS])
            return
        with store.engine.connect() as conn:
            self.number = store._log.newest_dictionary(conn)
            self.data = store._log.dictionary(conn, self.number)


@dataclass(frozen=True)
class _Plan:
    """A batch of :meth:`EventStore.append_batches` ready to insert, if the log ends at ``start``."""

    start: _Head
    rows: list[tuple]
    records: Callable[[], list[list[Any]]]
    """The ``records`` rows, once their bodies are compressed (on other processes, maybe)."""
    projections: projections.Planned

    @property
    def end(self) -> _Head:
        first, last = self.rows[0], self.rows[-1]
        return _Head(last[0], last[9], last[3], first[0] if self.start.number is None else self.start.number)

    @classmethod
    def of(
        cls,
        stream_id: str,
        start: _Head,
        prepared: list[tuple],
        dictionary: _Dictionary,
        store: EventStore,
        processes: Executor | None = None,
    ) -> _Plan | None:
        """The plan; None when an event's id is the derived id of another place in the stream. Its records
        are compressed on ``processes`` when given, a share each."""
        rows = _chained(stream_id, start, prepared)
        try:
            parts = log.plain_records(rows)
        except log.MisplacedId:
            return None
        plains = [plain for _, plain in parts]
        dictionary.decide(store, plains)
        bodies = _deflating(plains, dictionary.data, processes)

        # Most of an import's events (cases, transcripts) have no projection rows: no StoredEvent for them;
        # a stream's first event always has one (``streams``), and so has an event whose id is its own
        # (``event_ids``).
        projected = [
            (StoredEvent.of_row(row[:8]), p[4])
            for row, p in zip(rows, prepared)
            if row[4] in projections.PROJECTED or row[3] == 1 or row[1] != records.derived_id(stream_id, row[3])
        ]
        numbers = {} if start.number is None else {stream_id: start.number}
        events, fields = [e for e, _ in projected], [f for _, f in projected]
        return cls(
            start,
            rows,
            lambda: log.record_rows(start.number, parts, bodies()),
            projections.planned(events, fields, numbers),
        )


def _deflating(plains: list[bytes], dictionary: bytes | None, processes: Executor | None) -> Callable[[], list[bytes]]:
    """The records' bodies (a function that gives them): compressed here, or on ``processes``, a share each."""
    if processes is None:
        bodies = log.deflated(plains, dictionary)
        return lambda: bodies
    shares = [processes.submit(log.deflated, share, dictionary) for share in _shares(plains, COMPRESSORS, len)]
    return lambda: [body for share in shares for body in share.result()]


def _split_large(
    blobs: Mapping[str, bytes | FileBlob] | None,
) -> tuple[dict[str, bytes], dict[str, bytes | FileBlob]]:
    """The blobs stored whole, each checked against the digest it is given under (a blob stored in chunks
    is checked as it is read: :meth:`EventStore._insert_chunked`), and those stored in chunks
    (:func:`evalstore.store.blobs.is_large`)."""
    small: dict[str, bytes] = {}
    large: dict[str, bytes | FileBlob] = {}
    for claimed, data in (blobs or {}).items():
        if is_large(data):
            large[claimed] = data
            continue
        digest = sha256_hex(data)  # type: ignore[arg-type]
        if claimed != digest:
            raise StoreError(f"blob given as {claimed} has digest {digest}; blobs are keyed by their sha256")
        small[digest] = data  # type: ignore[assignment]
    return small, large


def _same_result(a: Any, b: Any) -> Any:
    """Two aliases of a results-keyed table on the same (test id, target, attempt)."""
    return (b.c.test_id == a.c.test_id) & (b.c.target == a.c.target) & (b.c.attempt == a.c.attempt)


def _stream_records(stream_id: str, after: int, upto: int | None) -> Any:
    """The records of a stream holding versions ``after < version <= upto``, in order."""
    rec = schema.records
    where = [schema.streams.c.stream_id == stream_id]
    if after:
        # The first bound keeps the read a range of the (stream, version) index: no record is longer.
        where += [rec.c.version > after - records.MAX_EVENTS, rec.c.version + rec.c.count > after + 1]
    if upto is not None:
        where.append(rec.c.version <= upto)
    return log.select_records(*where, order=rec.c.version)


def _translate(exc: DBAPIError) -> StoreError:
    message = str(exc.orig) if exc.orig is not None else str(exc)
    if "append-only" in message:
        return AppendOnlyError(message.splitlines()[0])
    if "uq_records_stream_version" in message or "records.stream, records.version" in message:
        return ConcurrencyError("another writer appended to this stream at the same time; re-read and retry")
    return DatabaseFailure(f"database error: {message.splitlines()[0] if message else type(exc).__name__}", exc.orig)
