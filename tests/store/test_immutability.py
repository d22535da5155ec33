"""The database itself refuses to change or remove stored events and blobs (triggers, both backends)."""

from __future__ import annotations

import pytest
from sample_runs import append_run, execute, scalar
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


def test_projections_are_not_append_only(filled: EventStore) -> None:
    # They are derived data: rebuild must be able to clear them.
    execute(filled.engine, "DELETE FROM verdicts")
    assert scalar(filled.engine, "SELECT count(*) FROM verdicts") == 0
    filled.rebuild_projections()
    assert scalar(filled.engine, "SELECT count(*) FROM verdicts") == 2
