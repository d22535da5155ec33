"""The database itself refuses to change or remove the stored log (its records and their compression
dictionaries) and blobs (triggers, both backends)."""

from __future__ import annotations

import sqlite3

import pytest
from log_rows import event_count, payload_at
from sample_runs import append_many_results, append_run, execute, scalar
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from evalstore.store import EventStore


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    append_run(store, "run-a", tests=("paris",))
    return store


@pytest.fixture
def filled_with_dictionary(filled: EventStore) -> EventStore:
    """A store whose records are compressed against a dictionary too (so the dictionaries' guards are tried
    on a row): a run whose single append cuts into enough records to make one (store/records.py)."""
    _append_with_dictionary(filled)
    return filled


def _append_with_dictionary(store: EventStore) -> None:
    append_many_results(store)
    assert scalar(store.engine, "SELECT count(*) FROM dictionaries") == 1


def _snapshot(store: EventStore) -> tuple:
    return (
        event_count(store.engine),
        scalar(store.engine, "SELECT count(*) FROM records"),
        scalar(store.engine, "SELECT count(*) FROM dictionaries"),
        scalar(store.engine, "SELECT count(*) FROM blobs"),
        payload_at(store.engine, 1),
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE records SET body = hash WHERE seq = 1",
        "UPDATE records SET stream = 1000",
        "UPDATE records SET hash = hash WHERE seq = 2",
        "DELETE FROM records WHERE seq = 1",
        "DELETE FROM records",
        "UPDATE dictionaries SET data = data",
        "DELETE FROM dictionaries",
        "UPDATE blobs SET size = 0",
        "DELETE FROM blobs",
    ],
)
def test_update_and_delete_are_rejected_as_append_only(filled_with_dictionary: EventStore, sql: str) -> None:
    filled = filled_with_dictionary
    before = _snapshot(filled)
    table = sql.split()[2 if sql.startswith("DELETE") else 1]
    with pytest.raises(DBAPIError, match=rf"{table} is append-only; (UPDATE|DELETE) is not allowed"):
        execute(filled.engine, sql)
    assert _snapshot(filled) == before
    assert filled.verify().ok


@pytest.mark.parametrize("table", ["records", "dictionaries", "blobs"])
def test_truncate_is_rejected_on_postgres(postgres_url: str, table: str) -> None:
    from evalstore.store import make_engine

    store = EventStore(make_engine(postgres_url))
    try:
        append_run(store, "run-a", tests=("paris",))
        _append_with_dictionary(store)
        before = _snapshot(store)
        with pytest.raises(DBAPIError, match=rf"{table} is append-only; TRUNCATE is not allowed"):
            execute(store.engine, f"TRUNCATE {table} CASCADE")
        assert _snapshot(store) == before
    finally:
        store.close()


REPLACES = [
    "INSERT OR REPLACE INTO records SELECT * FROM records WHERE seq = 1",
    "REPLACE INTO records SELECT * FROM records WHERE seq = 2",
    # A different seq but a taken (stream, version): REPLACE would delete the old row.
    "REPLACE INTO records (seq, stream, version, count, recorded_at, dictionary, body, hash)"
    " SELECT seq + 1000, stream, version, count, recorded_at, dictionary, x'00', hash FROM records WHERE seq = 1",
    "INSERT OR REPLACE INTO dictionaries SELECT id, x'00' FROM dictionaries",
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
        _append_with_dictionary(store)
        before = _snapshot(store)
        blobs_before = scalar(store.engine, "SELECT group_concat(sha256 || size, ',') FROM blobs")
    finally:
        store.close()
    path = sqlite_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        table = sql.split(" INTO ")[1].split()[0]
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
        _append_with_dictionary(store)
        before = _snapshot(store)
        for sql, table, op in (
            ("DELETE FROM records WHERE seq = 1", "records", "DELETE"),
            ("UPDATE dictionaries SET data = data", "dictionaries", "UPDATE"),
            ("UPDATE blobs SET size = 0", "blobs", "UPDATE"),
            ("TRUNCATE records CASCADE", "records", "TRUNCATE"),
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
