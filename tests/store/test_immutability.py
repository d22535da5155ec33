"""The database itself refuses to change or remove stored events and blobs (triggers, both backends)."""

from __future__ import annotations

import sqlite3

import pytest
from sample_runs import append_run, execute, scalar
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from evalstore.store import EventStore


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    append_run(store, "run-a", tests=("paris",))
    return store


def _snapshot(store: EventStore) -> tuple:
    return (
        scalar(store.engine, "SELECT count(*) FROM events"),
        scalar(store.engine, "SELECT count(*) FROM blobs"),
        scalar(store.engine, "SELECT payload FROM events WHERE seq = 1"),
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET payload = '{}' WHERE seq = 1",
        "UPDATE events SET stream_id = 'elsewhere'",
        "DELETE FROM events WHERE seq = 1",
        "DELETE FROM events",
        "UPDATE blobs SET size = 0",
        "DELETE FROM blobs",
    ],
)
def test_update_and_delete_are_rejected_as_append_only(filled: EventStore, sql: str) -> None:
    before = _snapshot(filled)
    table = "events" if "events" in sql else "blobs"
    with pytest.raises(DBAPIError, match=rf"{table} is append-only; (UPDATE|DELETE) is not allowed"):
        execute(filled.engine, sql)
    assert _snapshot(filled) == before
    assert filled.verify().ok


@pytest.mark.parametrize("table", ["events", "blobs"])
def test_truncate_is_rejected_on_postgres(postgres_url: str, table: str) -> None:
    from evalstore.store import make_engine

    store = EventStore(make_engine(postgres_url))
    try:
        append_run(store, "run-a", tests=("paris",))
        before = _snapshot(store)
        with pytest.raises(DBAPIError, match=rf"{table} is append-only; TRUNCATE is not allowed"):
            execute(store.engine, f"TRUNCATE {table} CASCADE")
        assert _snapshot(store) == before
    finally:
        store.close()


REPLACES = [
    "INSERT OR REPLACE INTO events SELECT * FROM events WHERE seq = 1",
    "REPLACE INTO events SELECT * FROM events WHERE seq = 2",
    # A different seq but a taken event id, or a taken (stream, version): REPLACE would delete the old row.
    "REPLACE INTO events (seq, event_id, stream_id, stream_version, type, schema_version, payload, recorded_at,"
    " prev_hash, hash) SELECT seq + 1000, event_id, stream_id, stream_version + 1000, type, schema_version,"
    " '{}', recorded_at, prev_hash, hash FROM events WHERE seq = 1",
    "REPLACE INTO events (seq, event_id, stream_id, stream_version, type, schema_version, payload, recorded_at,"
    " prev_hash, hash) SELECT seq + 1000, 'another-id', stream_id, stream_version, type, schema_version,"
    " '{}', recorded_at, prev_hash, hash FROM events WHERE seq = 1",
    "INSERT OR REPLACE INTO blobs (sha256, size, encoding, data) SELECT sha256, 1, 'identity', x'00' FROM blobs",
    # The rowid a blob row asks for is a key too.
    "REPLACE INTO blobs (rowid, sha256, size, encoding, data) SELECT rowid, 'f00d', 1, 'identity', x'00' FROM blobs",
]


@pytest.mark.parametrize("sql", REPLACES)
def test_replace_is_refused_on_sqlite_for_any_client(sqlite_url: str, sql: str) -> None:
    # Another program, with its own connection and default pragmas (recursive_triggers off), not evalstore.
    from evalstore.store import make_engine

    store = EventStore(make_engine(sqlite_url))
    try:
        append_run(store, "run-a", tests=("paris",))
        before = _snapshot(store)
        blobs_before = scalar(store.engine, "SELECT group_concat(sha256 || size, ',') FROM blobs")
    finally:
        store.close()
    path = sqlite_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        table = "events" if "INTO events" in sql else "blobs"
        with pytest.raises(sqlite3.IntegrityError, match=rf"{table} is append-only; REPLACE is not allowed"):
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
    store = EventStore(make_engine(sqlite_url))
    try:
        assert _snapshot(store) == before
        assert scalar(store.engine, "SELECT group_concat(sha256 || size, ',') FROM blobs") == blobs_before
        assert store.verify().ok
        # New rows are still welcome.
        append_run(store, "run-b", tests=("madrid",))
        assert store.verify().ok
    finally:
        store.close()


def test_replica_role_does_not_bypass_the_triggers_on_postgres(postgres_url: str) -> None:
    # A superuser in replica mode skips ordinary triggers; the append-only ones are ENABLE ALWAYS.
    from evalstore.store import make_engine

    store = EventStore(make_engine(postgres_url))
    try:
        append_run(store, "run-a", tests=("paris",))
        before = _snapshot(store)
        for sql, table, op in (
            ("DELETE FROM events WHERE seq = 1", "events", "DELETE"),
            ("UPDATE blobs SET size = 0", "blobs", "UPDATE"),
            ("TRUNCATE events CASCADE", "events", "TRUNCATE"),
        ):
            with (
                pytest.raises(DBAPIError, match=rf"{table} is append-only; {op} is not allowed"),
                store.engine.begin() as conn,
            ):
                conn.execute(text("SET LOCAL session_replication_role = replica"))
                assert conn.execute(text("SHOW session_replication_role")).scalar() == "replica"
                conn.execute(text(sql))
        assert _snapshot(store) == before
    finally:
        store.close()


def test_projections_are_not_append_only(filled: EventStore) -> None:
    # They are derived data: rebuild must be able to clear them.
    execute(filled.engine, "DELETE FROM verdicts")
    assert scalar(filled.engine, "SELECT count(*) FROM verdicts") == 0
    filled.rebuild_projections()
    assert scalar(filled.engine, "SELECT count(*) FROM verdicts") == 2
