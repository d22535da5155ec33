"""The log's rows as the tests read and alter them behind the store's back.

The log is the ``records`` table (store/records.py): a record holds consecutive events of one stream in
one DEFLATE body and stores only its last event's chain hash. Reading an event, or forging one the way
someone with write access to the database could, means decoding its record, changing the event and
compressing the body again. That is done here once, from the format's own definition (records.py's
body functions and codec.event_hash), not through the store's reader: a test of the reader or of
``verify`` should not rely on the code it checks to read or damage the rows.

Altering rows needs the append-only guards out of the way first: :func:`drop_append_only_triggers`
(sample_runs.py), as the tests that tamper call it themselves.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from sample_runs import execute
from sqlalchemy import Engine, text

from evalstore.store import StoredEvent
from evalstore.store import records as fmt
from evalstore.store.codec import GENESIS_HASH

COLUMNS = ("seq", "stream", "version", "count", "recorded_at", "dictionary", "body", "hash")
CHANGEABLE = ("event_id", "type", "schema_version", "payload")


@dataclass(frozen=True)
class Item:
    """One event of a record, as its body holds it (``event_id`` empty where it is derived)."""

    event_id: str
    type: str
    schema_version: int
    payload: str


@dataclass(frozen=True)
class Record:
    """A ``records`` row, its body decoded."""

    seq: int
    stream: int
    version: int
    count: int
    recorded_at: str
    dictionary: int | None
    body: bytes
    hash: bytes
    header: str  # the stream id in a stream's first record, else ""
    stream_id: str
    items: list[Item] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.seq + len(self.items) - 1

    def event_id(self, i: int) -> str:
        return self.items[i].event_id or fmt.derived_id(self.stream_id, self.version + i)

    def events(self, prev_hash: str) -> list[StoredEvent]:
        """Its events with their chain hashes, after ``prev_hash`` (the last one's recomputed, not stored)."""
        out = []
        for i, item in enumerate(self.items):
            row = (
                self.seq + i,
                self.event_id(i),
                self.stream_id,
                self.version + i,
                item.type,
                item.schema_version,
                item.payload,
                self.recorded_at,
            )
            ev = StoredEvent.of_row(row)
            digest = ev.computed_hash(prev_hash)
            out.append(StoredEvent.chained(row, prev_hash, digest))
            prev_hash = digest
        return out

    def plain(self) -> bytes:
        items = [(item.event_id, item.type, item.schema_version, item.payload) for item in self.items]
        return fmt.plain_body(self.header or None, items)


def _dictionaries(engine: Engine) -> dict[int, bytes]:
    with engine.connect() as conn:
        return {number: bytes(data) for number, data in conn.execute(text("SELECT id, data FROM dictionaries"))}


def records_rows(engine: Engine) -> list[Record]:
    """Every record, decoded, in seq order (a stream's id from its first record's body)."""
    zdicts = _dictionaries(engine)
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {', '.join(COLUMNS)} FROM records ORDER BY seq")).all()
        named = dict(conn.execute(text("SELECT stream, stream_id FROM streams")).all())
    streams: dict[int, str] = {}
    out = []
    for seq, stream, version, count, recorded_at, dictionary, body, hash_ in rows:
        header, items = fmt.parse_body(fmt.inflate(bytes(body), zdicts.get(dictionary)))
        if header:
            streams[stream] = header
        stream_id = streams.get(stream) or named[stream]
        decoded = [Item(*item) for item in items]
        out.append(
            Record(
                seq,
                stream,
                version,
                count,
                recorded_at,
                dictionary,
                bytes(body),
                bytes(hash_),
                header,
                stream_id,
                decoded,
            )
        )
    return out


def record_at(engine: Engine, seq: int) -> Record:
    """The record holding the event at ``seq``."""
    return next(rec for rec in records_rows(engine) if rec.seq <= seq <= rec.last)


def record_span(engine: Engine, seq: int) -> tuple[int, int]:
    """``(first, last)`` seq of the events in the record holding ``seq``."""
    rec = record_at(engine, seq)
    return rec.seq, rec.last


def altered_problem(engine: Engine, seq: int) -> str:
    """What ``verify`` reports when the record holding ``seq`` no longer matches its stored hash."""
    first, last = record_span(engine, seq)
    span = f"event seq {first}" if first == last else f"events seq {first}-{last}"
    return f"record seq {first} ({span}): content does not match its hash (altered after it was written)"


def events_rows(engine: Engine) -> list[StoredEvent]:
    """Every event in seq order, with its chain hashes recomputed from the start of the log (an event's
    ``hash`` is what its content makes it, whatever its record stores)."""
    out: list[StoredEvent] = []
    prev = GENESIS_HASH
    for rec in records_rows(engine):
        events = rec.events(prev)
        out.extend(events)
        prev = rec.hash.hex()
    return out


def event_at(engine: Engine, seq: int) -> StoredEvent:
    return next(ev for ev in events_rows(engine) if ev.seq == seq)


def payload_at(engine: Engine, seq: int) -> str:
    return event_at(engine, seq).payload_json


def event_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT coalesce(sum(count), 0) FROM records")).scalar() or 0)


def stored_hash(engine: Engine, seq: int) -> str:
    """The chain hash of the event at ``seq``: stored for a record's last event, else recomputed."""
    rec = record_at(engine, seq)
    if seq == rec.last:
        return rec.hash.hex()
    return event_at(engine, seq).hash


def records_reading_otherwise(engine: Engine, dictionary: int, data: bytes) -> list[int]:
    """The seqs of the records compressed against dictionary ``dictionary`` whose body would inflate to
    something else (or not at all) against ``data``: those a change to the dictionary damages. DEFLATE
    copies from only some of a dictionary's bytes; a change to the others alters no record."""
    altered = []
    for rec in records_rows(engine):
        if rec.dictionary == dictionary:
            try:
                same = fmt.inflate(rec.body, data) == rec.plain()
            except zlib.error:
                same = False
            if not same:
                altered.append(rec.seq)
    return altered


# --- altering the rows (the guards dropped first) -------------------------------------------------


def set_record(engine: Engine, seq: int, **columns: Any) -> None:
    """``UPDATE records SET column = value, ... WHERE seq = seq`` (``seq``: the record's first event)."""
    assignments = ", ".join(f"{column} = :{column}" for column in columns)
    execute(engine, f"UPDATE records SET {assignments} WHERE seq = :record_seq", record_seq=seq, **columns)


def write_record(engine: Engine, rec: Record, *, rehash: bool = False) -> None:
    """Store ``rec``'s items as the body of the record at ``rec.seq``, compressed against its dictionary,
    and its count; with ``rehash``, its hash recomputed too (from the previous record's stored hash)."""
    zdicts = _dictionaries(engine)
    body = fmt.compress(rec.plain(), zdicts.get(rec.dictionary))
    columns: dict[str, Any] = {"body": body, "count": len(rec.items)}
    if rehash:
        columns["hash"] = bytes.fromhex(rec.events(_prev_stored(engine, rec.seq))[-1].hash)
    set_record(engine, rec.seq, **columns)


def set_plain(engine: Engine, seq: int, plain: bytes) -> None:
    """Store ``plain`` (any bytes, even what :func:`evalstore.store.records.plain_body` would refuse) as
    the body of the record at ``seq``, compressed against its dictionary: damage beneath the DEFLATE."""
    rec = record_at(engine, seq)
    set_record(engine, rec.seq, body=fmt.compress(plain, _dictionaries(engine).get(rec.dictionary)))


def rewrite_event(engine: Engine, seq: int, *, rehash: bool = False, rechain: bool = False, **changes: Any) -> Record:
    """Change the event at ``seq`` (its ``payload``, ``type``, ``schema_version`` or ``event_id`` as the
    body holds it) in its record, compressed again against the same dictionary. ``rehash``: the record's
    stored hash recomputed to match (a forger who knows the chain); ``rechain``: every later record's too
    (a whole forged chain). Returns the record as it was before."""
    unknown = set(changes) - set(CHANGEABLE)
    assert not unknown, f"cannot change {unknown}"
    rec = record_at(engine, seq)
    items = list(rec.items)
    items[seq - rec.seq] = replace(items[seq - rec.seq], **changes)
    write_record(engine, replace(rec, items=items), rehash=rehash or rechain)
    if rechain:
        rehash_from(engine, rec.last + 1)
    return rec


def rehash_from(engine: Engine, seq: int) -> None:
    """Recompute the stored hash of every record from ``seq`` on, so the chain holds over forged content."""
    prev = GENESIS_HASH
    for rec in records_rows(engine):
        if rec.seq >= seq:
            digest = rec.events(prev)[-1].hash
            if digest != rec.hash.hex():
                set_record(engine, rec.seq, hash=bytes.fromhex(digest))
            prev = digest
        else:
            prev = rec.hash.hex()


def delete_record(engine: Engine, seq: int) -> tuple[int, int]:
    """Delete the record holding ``seq``; returns the ``(first, last)`` seq of the events it held."""
    first, last = record_span(engine, seq)
    execute(engine, "DELETE FROM records WHERE seq = :s", s=first)
    return first, last


def truncate_log(engine: Engine, keep: int) -> None:
    """Cut the log after the event at ``keep``, consistently (a record holding it and later ones shortened,
    its stored hash then the hash of its new last event): a log that is a sound prefix of the old one."""
    execute(engine, "DELETE FROM records WHERE seq > :s", s=keep)
    rec = record_at(engine, keep)
    if rec.last > keep:
        write_record(engine, replace(rec, items=rec.items[: keep - rec.seq + 1]), rehash=True)


def _prev_stored(engine: Engine, seq: int) -> str:
    """The stored hash of the record before the one at ``seq`` (the genesis hash for the first)."""
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT hash FROM records WHERE seq < :s ORDER BY seq DESC LIMIT 1"), {"s": seq}
        ).scalar()
    return GENESIS_HASH if found is None else bytes(found).hex()
