"""A SQLite store read with the standard library's ``sqlite3`` alone, for the commands that only read it.

SQLAlchemy's import is the largest part of a command's start-up (0.17-0.22 s, more than half of the
``json.loads`` floor of a 20,000-result run: bench/read.py), and ``runs``, ``show``, ``compare`` and
``export`` need none of what it does for a SQLite file: their reads are a handful of fixed statements. :class:`SqliteReads` runs those
statements itself, and turns their rows into events, payloads and blobs with the same functions the
full store uses (:mod:`evalstore.store.reading`, :mod:`evalstore.store.records`,
:class:`evalstore.store.blobs.BlobReader`). Anything else asked of it (a write, any other read) goes to
a full :class:`~evalstore.store.recorder.EventStore` on the same file, opened on first use.

It opens only a store at this evalstore's schema revision, read exactly as the full store checks it;
for any other file (missing, damaged, older or newer, not a database) :func:`open_reads` says None and
the caller opens the full store, whose errors say what is wrong.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalstore.store import reading, records
from evalstore.store.blobs import BlobReader, Dictionaries
from evalstore.store.codec import GENESIS_HASH
from evalstore.store.envelope import StoredEvent

if TYPE_CHECKING:
    from evalstore.store.recorder import EventStore

_BUSY_TIMEOUT_S = 60.0  # as the full store's (engine.SQLITE_BUSY_TIMEOUT_MS): an import may hold the lock

_RECORDS = (
    "SELECT r.seq, r.stream, r.version, r.count, r.recorded_at, r.dictionary, r.body, r.hash, s.stream_id "
    "FROM records AS r JOIN streams AS s ON s.stream = r.stream"
)


def _run(mark: str = ":run") -> str:
    """The number keying a run's projection rows, of the run id bound at ``mark``."""
    return f"(SELECT stream FROM streams WHERE stream_id = {mark})"


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def open_reads(path: Path, full: Callable[[], EventStore]) -> SqliteReads | None:
    """The store in the SQLite file ``path``, read through :class:`SqliteReads`; None when the file is not
    a store this evalstore reads as it is (``full`` opens it then, and says why). ``full`` opens the full
    store on the same file, for whatever else is asked."""
    if not path.is_file():
        return None
    try:
        conn = _connect(path)
    except sqlite3.Error:
        return None
    try:
        # As engine._revision reads it: one row, stored as text, this evalstore's revision. Anything else
        # is the full store's to open (upgrade, refuse, or name the damage).
        rows = conn.execute("SELECT CAST(version_num AS BLOB), typeof(version_num) FROM alembic_version").fetchall()
    except sqlite3.Error:
        conn.close()
        return None
    if rows != [(reading.SCHEMA_REVISION.encode(), "text")]:
        conn.close()
        return None
    return SqliteReads(path, full, conn)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")  # this connection never writes, whatever asks it to
    return conn


class SqliteReads:
    """The reads ``runs``, ``show``, ``export`` and ``compare`` make, on a SQLite store, without SQLAlchemy (see the module).

    The same methods as :class:`~evalstore.store.recorder.EventStore`'s, giving the same values
    (tests/store/test_sqlite_reads.py holds them to it); every other attribute is the full store's."""

    on_server = False
    reopenable = True

    def __init__(self, path: Path, full: Callable[[], EventStore], conn: sqlite3.Connection) -> None:
        self.path = path
        self._full = full
        self._opened: EventStore | None = None
        self._local = threading.local()
        self._local.conn, self._local.pid = conn, os.getpid()
        self._dictionaries: dict[int, bytes] = {}
        self._streams_by_key: dict[str, int] = {}
        self._blobs = BlobReader(self._blob_row, self._blob_rows, Dictionaries())

    def __getattr__(self, name: str) -> Any:
        # Only for what the class does not define: the full store, opened once, does the rest.
        if name.startswith("__") or name in {"_local", "_full", "_opened"}:
            raise AttributeError(name)
        if self._opened is None:
            self._opened = self._full()
        return getattr(self._opened, name)

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; a forked worker's own (one made before the fork is the parent's)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._local.conn = _connect(self.path)
            self._local.pid = os.getpid()
        return conn

    def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[tuple]:
        return iter(self._conn().execute(sql, params))

    def _dicts(self, sql: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cursor = self._conn().execute(sql, params)
        names = [d[0] for d in cursor.description]
        return (dict(zip(names, row, strict=True)) for row in cursor)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None
        if self._opened is not None:
            self._opened.close()

    def drop_connections(self, *, close: bool = True) -> None:
        """As :meth:`EventStore.drop_connections`: before a fork (``close``), and in the forked child
        (not ``close``: the parent's connection is left to the parent)."""
        if close:
            conn = getattr(self._local, "conn", None)
            if conn is not None and self._local.pid == os.getpid():
                conn.close()
        self._local.conn = None
        if self._opened is not None:
            self._opened.drop_connections(close=close)

    # --- projections ------------------------------------------------------------------------------

    def run_ids(self) -> list[str]:
        return [run_id for (run_id,) in self._rows("SELECT run_id FROM runs ORDER BY started_seq")]

    def query(self, table: str, **where: Any) -> list[dict[str, Any]]:
        # The runs table only, whose columns are text and integers as sqlite3 gives them; another table's
        # values (booleans) are the full store's to convert.
        if table != "runs" or not set(where) <= {"run_id"}:
            return self.__getattr__("query")(table, **where)
        sql = "SELECT * FROM runs" + (" WHERE run_id = :run_id" if where else "") + " ORDER BY run_id"
        return list(self._dicts(sql, where))

    def result_counts(self, run_id: str | None = None) -> dict[str, dict[str, Any]]:
        sql = (
            "SELECT s.stream_id AS run_id,"
            " sum(CASE WHEN r.status != 'not_regradable' THEN 1 ELSE 0 END) AS tests,"
            " sum(CASE WHEN r.passed THEN 1 ELSE 0 END) AS passed,"
            " sum(CASE WHEN r.status = 'execution_error' THEN 1 ELSE 0 END) AS errors,"
            " sum(CASE WHEN r.status != 'not_regradable' THEN r.score END) AS score_sum,"
            " sum(CASE WHEN r.status = 'execution_error' THEN r.score ELSE 0 END) AS error_score_sum,"
            " sum(CASE WHEN r.status != 'not_regradable' THEN 0 ELSE 1 END) AS not_regradable,"
            " min(r.target) AS target_min, max(r.target) AS target_max, max(r.seq) AS last_seq"
            " FROM results AS r JOIN streams AS s ON s.stream = r.run"
            + (f" WHERE r.run = {_run()}" if run_id is not None else "")
            + " GROUP BY s.stream_id"
        )
        return reading.counts(self._dicts(sql, {"run": run_id}))

    def results_with_verdicts(self, run_id: str) -> Iterator[tuple[tuple, list[tuple]]]:
        columns = [f"r.{c}" for c in reading.RESULT_COLUMNS] + [f"v.{c}" for c in reading.VERDICT_COLUMNS]
        sql = (
            f"SELECT {', '.join(columns)} FROM results AS r LEFT OUTER JOIN verdicts AS v"
            " ON v.run = r.run AND v.test_id = r.test_id AND v.target = r.target AND v.attempt = r.attempt"
            f" WHERE r.run = {_run()} ORDER BY r.test_id, r.target, r.attempt, v.grader"
        )
        yield from reading.grouped_verdicts(self._rows(sql, {"run": run_id}))

    def result_ends(self, run_id: str, *, every: int, upto_seq: int | None = None) -> list[int]:
        sql = f"SELECT seq FROM results WHERE run = {_run()}" + (" AND seq <= :upto" if upto_seq is not None else "")
        seqs = [seq for (seq,) in self._conn().execute(sql + " ORDER BY seq", {"run": run_id, "upto": upto_seq})]
        if not seqs:
            return []
        starts = self._conn().execute(
            f"SELECT seq, version FROM records WHERE stream = {_run()} ORDER BY version", {"run": run_id}
        )
        return reading.result_ends(seqs, starts.fetchall(), every)

    def verdict_events(self, run_id: str, test_ids: Iterable[str]) -> Iterator[tuple[tuple, str, StoredEvent]]:
        for part in reading.chunks(list(dict.fromkeys(test_ids))):
            sql = (
                f"SELECT test_id, target, attempt, grader, seq FROM verdicts WHERE run = {_run('?')}"
                f" AND test_id IN ({_marks(part)})"
            )
            rows = self._conn().execute(sql, [run_id, *part]).fetchall()
            events = self.events_at([row[4] for row in rows])
            for row in rows:
                yield (row[0], row[1], row[2]), row[3], events[row[4]]

    # --- the log ----------------------------------------------------------------------------------

    def read_stream(
        self,
        stream_id: str,
        *,
        types: Iterable[str] | None = None,
        limit: int | None = None,
        after: int = 0,
        upto: int | None = None,
    ) -> Iterator[StoredEvent]:
        wanted = None if types is None else frozenset(types)
        if limit is not None and limit <= 0:
            return
        yield from reading.stream_slice(
            self._events(self._stream_records(stream_id, after, upto), wanted), wanted, after, upto, limit
        )

    def stream_payloads(
        self, stream_id: str, *, types: Iterable[str], after: int = 0, upto: int | None = None
    ) -> Iterator[tuple[str, int, str, str]]:
        yield from reading.payloads(
            self._stream_records(stream_id, after, upto), self._plain, frozenset(types), after, upto
        )

    def events_at(self, seqs: Iterable[int]) -> dict[int, StoredEvent]:
        wanted = set(seqs)
        holding = self._holding("seq <= ?", [(seq,) for seq in sorted(wanted)])
        return {ev.seq: ev for ev in holding if ev.seq in wanted}

    def get_events(self, event_ids: Iterable[str]) -> dict[str, StoredEvent]:
        def seqs_of(ids: Sequence[str]) -> Iterable[tuple[str, int]]:
            return self._rows(f"SELECT event_id, seq FROM event_ids WHERE event_id IN ({_marks(ids)})", ids)

        return reading.find_events(
            event_ids,
            seqs_of=seqs_of,
            at=self.events_at,
            stream_numbers=lambda: self._rows("SELECT stream, stream_id FROM streams"),
            at_versions=lambda places: self._holding("stream = ? AND version <= ?", places),
            streams_by_key=self._streams_by_key,
        )

    def _holding(self, bound: str, items: Sequence[Sequence[Any]]) -> Iterator[StoredEvent]:
        """The events of the records holding each item's event: the last record at or before it, ``bound``
        with the item's values bound (as log.Log's holders), a few hundred items per statement."""
        for part in reading.chunks(items, reading.HOLDERS):
            holders = " UNION ALL ".join([f"SELECT max(seq) FROM records WHERE {bound}"] * len(part))
            params = [value for item in part for value in item]
            yield from self._events(self._rows(f"{_RECORDS} WHERE r.seq IN ({holders}) ORDER BY r.seq", params), None)

    def _stream_records(self, stream_id: str, after: int, upto: int | None) -> Iterator[tuple]:
        """As the full store's ``_stream_records``: the records of a stream holding ``after < version <= upto``."""
        where = ["s.stream_id = :stream"]
        if after:
            # The first bound keeps the read a range of the (stream, version) index: no record is longer.
            where += ["r.version > :after - :most", "r.version + r.count > :after + 1"]
        if upto is not None:
            where.append("r.version <= :upto")
        sql = f"{_RECORDS} WHERE {' AND '.join(where)} ORDER BY r.version"
        return self._rows(sql, {"stream": stream_id, "after": after, "most": records.MAX_EVENTS, "upto": upto})

    def _events(self, rows: Iterable[tuple], types: frozenset[str] | None) -> Iterator[StoredEvent]:
        needles = reading.type_needles(types)
        for row in rows:
            plain = self._plain(row)
            if needles is None or any(needle in plain for needle in needles):
                yield from records.row_events(row, plain, self._prev_hash)

    def _plain(self, row: Sequence[Any]) -> bytes:
        return records.row_plain(row, self._dictionary(row[5]))

    def _dictionary(self, number: int | None) -> bytes | None:
        if number is None:
            return None
        found = self._dictionaries.get(number)
        if found is None:
            row = self._conn().execute("SELECT data FROM dictionaries WHERE id = ?", (number,)).fetchone()
            if row is None:
                raise records.missing_dictionary(number)
            found = self._dictionaries[number] = bytes(row[0])
        return found

    def _prev_hash(self, seq: int) -> str:
        row = (
            self._conn().execute("SELECT hash FROM records WHERE seq < ? ORDER BY seq DESC LIMIT 1", (seq,)).fetchone()
        )
        return GENESIS_HASH if row is None else bytes(row[0]).hex()

    # --- blobs ------------------------------------------------------------------------------------

    def get_blob(self, sha256: str) -> bytes:
        return self._blobs.get_blob(sha256)

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        return self._blobs.get_blobs(digests)

    def blob_pieces(self, sha256: str) -> Iterator[bytes]:
        return self._blobs.blob_pieces(sha256)

    def _blob_row(self, sha256: str) -> tuple[str, bytes, str | None] | None:
        sql = "SELECT encoding, data, dictionary FROM blobs WHERE sha256 = ?"
        return self._conn().execute(sql, (sha256,)).fetchone()

    def _blob_rows(self, keys: list[str]) -> list[tuple]:
        rows: list[tuple] = []
        for part in reading.chunks(keys):
            rows.extend(
                self._rows(
                    f"SELECT sha256, encoding, data, dictionary FROM blobs WHERE sha256 IN ({_marks(part)})", part
                )
            )
        return rows
