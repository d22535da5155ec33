"""The log as records: consecutive events of one stream and one append in one compressed row.

``events`` (one row per event: hex hashes, UUID strings, the stream id, the time, two unique indexes) is
replaced by ``records`` (store/records.py: the events' ids, types, schema versions and payloads in one
DEFLATE body against a preset dictionary from ``dictionaries``, the stream as its number, one time and
only the last event's chain hash, as bytes). The hash chain is the same: every event's hash, and so every
checkpoint and attestation made before, still holds. The ids of the events already stored are kept in
the new ``event_ids`` projection (an event appended from now on without an id of its own gets one derived
from its stream and version, and has no row there). On a run of many small verdicts the store was five
times the AgentV file it came from; it is now less than it (issue 31, bench/store_layouts.py).

Upgrading reads the events in seq order and cuts them as an append now does (a stream's events from one
append, up to each ``test_scored``, at most 64); downgrading writes every event back with its hashes.
Both run on either backend, with the append-only guards of the tables they create.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from alembic import op

from evalstore.store import records
from evalstore.store.codec import GENESIS_HASH, event_hasher

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
EVENT_COLUMNS = (
    "seq",
    "event_id",
    "stream_id",
    "stream_version",
    "type",
    "schema_version",
    "payload",
    "recorded_at",
    "prev_hash",
    "hash",
)
RECORD_COLUMNS = ("seq", "stream", "version", "count", "recorded_at", "dictionary", "body", "hash")
BATCH = 2000

# The append-only guards, as store/guards.py checks them. SQLite: UPDATE, DELETE, and a REPLACE over a
# stored key; PostgreSQL: the row and truncate triggers, ENABLE ALWAYS (migrations 0001 and 0003).
NEW_LOG = ("records", "dictionaries")
SQLITE_REPLACE = {
    "records_no_replace": ("records", "seq", "SELECT 1 FROM records WHERE seq = NEW.seq"),
    "records_no_reuse_stream_version": (
        "records",
        "records.stream, records.version",
        "SELECT 1 FROM records WHERE stream = NEW.stream AND version = NEW.version",
    ),
    "dictionaries_no_replace": ("dictionaries", "id", "SELECT 1 FROM dictionaries WHERE id = NEW.id"),
}
OLD_SQLITE_REPLACE = {
    "events_no_replace": ("events", "seq", "SELECT 1 FROM events WHERE seq = NEW.seq"),
    "events_no_reuse_event_id": ("events", "events.event_id", "SELECT 1 FROM events WHERE event_id = NEW.event_id"),
    "events_no_reuse_stream_version": (
        "events",
        "events.stream_id, events.stream_version",
        "SELECT 1 FROM events WHERE stream_id = NEW.stream_id AND stream_version = NEW.stream_version",
    ),
}


def _guard(tables: tuple[str, ...], replace: dict[str, tuple[str, str, str]]) -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in tables:
            for operation in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{operation.lower()} BEFORE {operation} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'evalstore: {table} is append-only; {operation} is not allowed'); END"
                )
        for trigger, (table, key, taken) in replace.items():
            message = f"evalstore: {table} is append-only; REPLACE is not allowed ({key} is already stored)"
            op.execute(
                f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} WHEN EXISTS ({taken}) "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
    elif dialect == "postgresql":
        for table in tables:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION evalstore_append_only()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION evalstore_append_only()"
            )
            for trigger in (f"{table}_append_only", f"{table}_no_truncate"):
                op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")


def _rows(conn: sa.Connection, sql: str) -> Iterator[tuple]:
    """A query's rows a batch at a time (PostgreSQL: a server-side cursor)."""
    # Per statement: Connection.execution_options would set it on the migration's connection for good.
    result = conn.exec_driver_sql(sql, execution_options={"stream_results": True, "max_row_buffer": BATCH})
    while batch := result.fetchmany(BATCH):
        yield from batch


def _groups(conn: sa.Connection) -> Iterator[list[tuple]]:
    """The events in seq order, cut into records: consecutive events of one stream and one time (one
    append), then as an append cuts them (store/records.py)."""
    group: list[tuple] = []
    for row in _rows(conn, f"SELECT {', '.join(EVENT_COLUMNS)} FROM events ORDER BY seq"):
        if group and (row[2] != group[0][2] or row[7] != group[0][7]):
            yield from _cut(group)
            group = []
        group.append(row)
    yield from _cut(group)


def _cut(group: list[tuple]) -> Iterator[list[tuple]]:
    for start, end in records.cuts([row[4] for row in group]):
        yield group[start:end]


def _own_id(row: tuple) -> str:
    """The id the body keeps: empty where it is derived (a store downgraded from 0005 and upgraded again)."""
    return "" if row[1] == records.derived_id(row[2], row[3]) else row[1]


def _plain(part: list[tuple]) -> bytes:
    first = part[0]
    events = [(_own_id(row), row[4], row[5], row[6]) for row in part]
    return records.plain_body(first[2] if first[3] == 1 else None, events)


def upgrade() -> None:
    conn = op.get_bind()
    op.create_table(
        "records",
        sa.Column("seq", Seq, primary_key=True, autoincrement=False),
        sa.Column("stream", Seq, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("dictionary", sa.Integer, nullable=True),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("hash", sa.LargeBinary, nullable=False),
        sa.UniqueConstraint("stream", "version", name="uq_records_stream_version"),
    )
    op.create_table(
        "dictionaries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "event_ids",
        sa.Column("event_id", sa.String(36), primary_key=True),
        sa.Column("seq", Seq, nullable=False),
        sqlite_with_rowid=False,
    )
    meta = sa.MetaData()
    records_t = sa.Table("records", meta, autoload_with=conn)
    event_ids_t = sa.Table("event_ids", meta, autoload_with=conn)
    dictionaries_t = sa.Table("dictionaries", meta, autoload_with=conn)
    numbers: dict[str, int] = {}
    dictionary: bytes | None = None
    pending: list[list[tuple]] = []  # the first records, until there are enough to make the dictionary of

    def write(parts: list[list[tuple]]) -> None:
        rows: list[dict] = []
        ids: list[dict] = []
        for part in parts:
            first, last = part[0], part[-1]
            number = numbers.setdefault(first[2], first[0])
            body = records.compress(_plain(part), dictionary)
            rows.append(
                dict(
                    zip(
                        RECORD_COLUMNS,
                        (first[0], number, first[3], len(part), first[7], 1 if dictionary else None, body),
                    ),
                    hash=bytes.fromhex(last[9]),
                )
            )
            ids.extend({"event_id": row[1], "seq": row[0]} for row in part if _own_id(row))
        if rows:
            conn.execute(records_t.insert(), rows)
        if ids:
            conn.execute(event_ids_t.insert(), ids)

    for part in _groups(conn):
        if dictionary is None and len(pending) < 2 * records.DICTIONARY_RECORDS:
            pending.append(part)
            continue
        if dictionary is None:
            dictionary = records.dictionary_of([_plain(p) for p in pending])
            conn.execute(dictionaries_t.insert(), [{"id": 1, "data": dictionary}])
            write(pending)
            pending = []
        pending.append(part)
        if len(pending) >= BATCH // 10:
            write(pending)
            pending = []
    write(pending)
    op.drop_table("events")  # its triggers with it
    _guard(NEW_LOG, SQLITE_REPLACE)


def downgrade() -> None:
    conn = op.get_bind()
    op.create_table(
        "events",
        sa.Column("seq", Seq, primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("stream_version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    )
    events_t = sa.Table("events", sa.MetaData(), autoload_with=conn)
    dictionaries = {number: bytes(data) for number, data in conn.exec_driver_sql("SELECT id, data FROM dictionaries")}
    streams: dict[int, str] = {}
    prev = GENESIS_HASH
    batch: list[dict] = []
    for row in _rows(conn, f"SELECT {', '.join(RECORD_COLUMNS)} FROM records ORDER BY seq"):
        seq, stream, version, _, recorded_at, dictionary, body, last_hash = row
        header, items = records.parse_body(records.inflate(bytes(body), dictionaries.get(dictionary)))
        if header:
            streams[stream] = header
        stream_id = streams[stream]
        hashed = event_hasher(stream_id, recorded_at)
        last = seq + len(items) - 1
        for fields in records.event_fields(seq, stream_id, version, recorded_at, items):
            digest = bytes(last_hash).hex() if fields[0] == last else hashed(prev, *fields[:2], *fields[3:7])
            batch.append(dict(zip(EVENT_COLUMNS, (*fields, prev, digest))))
            prev = digest
        if len(batch) >= BATCH:
            conn.execute(events_t.insert(), batch)
            batch = []
    if batch:
        conn.execute(events_t.insert(), batch)
    for table in ("event_ids", "records", "dictionaries"):
        op.drop_table(table)
    _guard(("events",), OLD_SQLITE_REPLACE)
