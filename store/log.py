"""Reading and writing the log's records (:mod:`evalstore.store.records`) with SQL: which records hold the
events a read asks for, and the events a record holds. The recorder's reads and appends go through here;
nothing else reads ``records``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Select, func, select, union_all
from sqlalchemy.engine import Connection, Engine

from evalstore.store import bulk, reading, records, schema
from evalstore.store.codec import GENESIS_HASH
from evalstore.store.envelope import StoredEvent
from evalstore.store.errors import StoreError

r, s = schema.records, schema.streams


class MisplacedId(StoreError):
    """An event given the derived id of another place than where it would be appended."""


RECORD = tuple(r.c[name] for name in records.ROW)


def select_records(*where: Any, order: Any = r.c.seq) -> Select:
    """Records with their stream's id, in seq order (or ``order``: a stream's by version, the order of the
    index it is read through, is the same order without sorting the rows first)."""
    joined = r.join(s, s.c.stream == r.c.stream)
    return select(*RECORD, s.c.stream_id).select_from(joined).where(*where).order_by(order)


def containing(seq: Any) -> Any:
    """The seq of the record holding the event at ``seq`` (a value or a column of another table)."""
    holder = r.alias("holder")  # not ``records`` itself, which the enclosing query joins to this
    return select(func.max(holder.c.seq)).where(holder.c.seq <= seq).scalar_subquery()


def prev_hash(conn: Connection, seq: int) -> str:
    """The hash of the event before ``seq``: the stored hash of the record before the one starting there."""
    found = conn.execute(select(r.c.hash).where(r.c.seq < seq).order_by(r.c.seq.desc()).limit(1)).scalar()
    return GENESIS_HASH if found is None else bytes(found).hex()


def head(conn: Connection) -> tuple[int, str]:
    """The log's last ``(seq, hash)``; ``(0, GENESIS_HASH)`` for an empty log."""
    last = conn.execute(select(r.c.seq, r.c.count, r.c.hash).order_by(r.c.seq.desc()).limit(1)).first()
    return (last[0] + last[1] - 1, bytes(last[2]).hex()) if last else (0, GENESIS_HASH)


def stream_version(conn: Connection, number: int | None) -> int:
    """The version of a stream's last event (0 for a stream with none)."""
    if number is None:
        return 0
    last = conn.execute(
        select(r.c.version + r.c.count - 1).where(r.c.stream == number).order_by(r.c.version.desc()).limit(1)
    ).scalar()
    return last or 0


class Log:
    """The records of one store: their dictionaries (kept once read: they never change) and which stream a
    derived id names (its key: :func:`evalstore.store.records.stream_key`)."""

    def __init__(self, engine: Engine, dialect: Any) -> None:
        self.engine = engine
        self.dialect = dialect
        self._dictionaries: dict[int, bytes] = {}
        self._streams_by_key: dict[str, int] = {}

    # --- dictionaries ----------------------------------------------------------------------------

    def dictionary(self, conn: Connection, number: int | None) -> bytes | None:
        if number is None:
            return None
        found = self._dictionaries.get(number)
        if found is None:
            d = schema.dictionaries
            data = conn.execute(select(d.c.data).where(d.c.id == number)).scalar()
            if data is None:
                raise records.missing_dictionary(number)
            found = self._dictionaries[number] = bytes(data)
        return found

    def newest_dictionary(self, conn: Connection) -> int | None:
        return conn.execute(select(func.max(schema.dictionaries.c.id))).scalar()

    def add_dictionary(self, conn: Connection, data: bytes) -> int:
        """A new dictionary (inside an append's transaction, under its lock); its number. Not kept here: the
        transaction may yet roll back, and the number then go to other bytes."""
        number = (self.newest_dictionary(conn) or 0) + 1
        conn.execute(schema.dictionaries.insert().values(id=number, data=data))
        return number

    # --- reading ---------------------------------------------------------------------------------

    def plain(self, conn: Connection, row: Sequence[Any]) -> bytes:
        """A record row's plain body (:func:`evalstore.store.records.plain_body`)."""
        return records.row_plain(row, self.dictionary(conn, row[5]))

    def events(
        self, conn: Connection, row: Sequence[Any], plain: bytes | None = None, prev: str | None = None
    ) -> list[StoredEvent]:
        """The events of a record row (:data:`RECORD` and the stream id, as :func:`select_records` reads);
        ``prev``, the previous record's hash, when the caller knows it."""
        return records.row_events(row, self.plain(conn, row) if plain is None else plain, self._prev_hash, prev)

    def _prev_hash(self, seq: int) -> str:
        with self.engine.connect() as conn:
            return prev_hash(conn, seq)

    def read(self, conn: Connection, query: Select, types: Iterable[str] | None = None) -> Iterator[StoredEvent]:
        """The events of the records a :func:`select_records` query finds, in order (streamed); with
        ``types``, only records holding an event of one of them are parsed (the type is a field of its own
        in the plain body, between separators nothing else holds: a run's few ``line_skipped`` events are
        found without building its other events)."""
        needles = reading.type_needles(types)
        for row in self.dialect.rows(conn, query):
            plain = self.plain(conn, row)
            if needles is None or any(needle in plain for needle in needles):
                yield from self.events(conn, row, plain)

    def at(self, conn: Connection, seqs: Iterable[int]) -> dict[int, StoredEvent]:
        """Events by seq (what projection rows name them by)."""
        wanted = set(seqs)
        holders = [select(func.max(r.c.seq)).where(r.c.seq <= q) for q in sorted(wanted)]
        return {ev.seq: ev for ev in self._holding(conn, holders) if ev.seq in wanted}

    def _holding(self, conn: Connection, holders: list[Select]) -> Iterator[StoredEvent]:
        """The events of the records whose seqs the ``holders`` subqueries select (a few hundred per query)."""
        for part in reading.chunks(holders, reading.HOLDERS):
            yield from self.read(conn, select_records(r.c.seq.in_(union_all(*part))))

    def find(self, conn: Connection, event_ids: Iterable[str]) -> dict[str, StoredEvent]:
        """Events by id (:func:`evalstore.store.reading.find_events`)."""
        e = schema.event_ids

        def seqs_of(ids: Sequence[str]) -> Iterable[tuple[str, int]]:
            return conn.execute(select(e.c.event_id, e.c.seq).where(e.c.event_id.in_(ids)))

        def at_versions(places: Sequence[tuple[int, int]]) -> Iterator[StoredEvent]:
            holders = [select(func.max(r.c.seq)).where(r.c.stream == n, r.c.version <= v) for n, v in places]
            return self._holding(conn, holders)

        return reading.find_events(
            event_ids,
            seqs_of=seqs_of,
            at=lambda seqs: self.at(conn, seqs),
            stream_numbers=lambda: conn.execute(select(s.c.stream, s.c.stream_id)),
            at_versions=at_versions,
            streams_by_key=self._streams_by_key,
        )


# --- writing -------------------------------------------------------------------------------------

RECORD_COLUMNS = records.ROW
EventRow = tuple  # (seq, event id, stream id, version, type, schema version, payload, recorded_at, prev hash, hash)


def plain_records(rows: Sequence[EventRow]) -> list[tuple[Sequence[EventRow], bytes]]:
    """An append's chained event rows (one stream, one time) cut into records, each with its plain body."""
    out = []
    for start, end in records.cuts([row[4] for row in rows]):
        part = rows[start:end]
        stream_id = part[0][2]
        events = []
        for row in part:
            derived = records.derived_id(stream_id, row[3])
            if row[1] != derived and records.split_derived(row[1]) is not None:
                # Another position's derived id here would name two events (store/records.py).
                raise MisplacedId(
                    f"event id {row[1]} is the id of another stream version than {row[3]} of {stream_id}; "
                    "give the event no id, or one of its own"
                )
            events.append(("" if row[1] == derived else row[1], row[4], row[5], row[6]))
        out.append((part, records.plain_body(stream_id if part[0][3] == 1 else None, events)))
    return out


def record_rows(
    number: int | None, parts: Sequence[tuple[Sequence[EventRow], bytes]], bodies: Sequence[bytes]
) -> list[list[Any]]:
    """``records`` rows (:data:`RECORD_COLUMNS`, the dictionary's number left None for the caller to set)
    of :func:`plain_records`, with their plain bodies compressed (:func:`deflated`); ``number`` is the
    stream's (None: the append starts it, its first seq)."""
    out = []
    for (part, _), body in zip(parts, bodies, strict=True):
        first, last = part[0], part[-1]
        stream = first[0] if number is None else number
        out.append([first[0], stream, first[3], len(part), first[7], None, body, bytes.fromhex(last[9])])
        number = stream
    return out


def deflated(plains: Sequence[bytes], dictionary: bytes | None) -> list[bytes]:
    """Plain bodies compressed as records hold them (:func:`records.compress`); a function of plain values,
    so a process of its own can run it (``EventStore.append_batches``)."""
    return [records.compress(plain, dictionary) for plain in plains]


def insert_records(conn: Connection, rows: list[list[Any]], dictionary: int | None) -> None:
    for row in rows:
        row[5] = dictionary
    bulk.insert_tuples(conn, schema.records, RECORD_COLUMNS, [tuple(row) for row in rows])


def replay(conn: Connection, store_log: Log, *, upto: int | None = None) -> Iterator[StoredEvent]:
    """Every event in seq order, each with its hashes, read from the records alone: a stream's id from its
    first record (not the ``streams`` projection, which a rebuild clears first)."""
    query = select(*RECORD).order_by(r.c.seq)
    if upto is not None:
        query = query.where(r.c.seq <= upto)
    streams: dict[int, str] = {}
    prev = GENESIS_HASH
    for row in store_log.dialect.rows(conn, query):
        seq, stream = row[0], row[1]
        plain = store_log.plain(conn, row)
        header = plain.partition(records.HEADER_END.encode())[0]
        if header:
            streams[stream] = header.decode("utf-8")
        if stream not in streams:
            raise StoreError(f"record seq {seq}: the first record of its stream {stream} is missing")
        for ev in store_log.events(conn, (*row, streams[stream]), plain, prev):
            if upto is None or ev.seq <= upto:
                yield ev
        prev = bytes(row[7]).hex()
