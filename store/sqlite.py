"""What is particular to SQLite: how an append takes the write lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.dialects.sqlite import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select


def lock_for_append(conn: Connection) -> None:
    """Nothing to do: append transactions begin with BEGIN IMMEDIATE (see evalstore.store.engine.IMMEDIATE)."""


def rows(conn: Connection, query: Select) -> Iterator[tuple]:
    """The query's rows as the driver returns them (tuples), from its cursor. Reading a whole run out,
    SQLAlchemy's processing of each row was a tenth of the work; the columns read this way are plain
    text, integers and bytes, which need none. The statement goes through SQLAlchemy's compiled cache
    (compiling it anew for each read of a run's blobs cost more than the read)."""
    result = conn.execute(query)
    try:
        yield from iter(result.cursor.fetchone, None)
    finally:
        result.close()
