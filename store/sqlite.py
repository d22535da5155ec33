"""What is particular to SQLite: how an append takes the write lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy.dialects.sqlite import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

BATCH = 2000


def lock_for_append(conn: Connection) -> None:
    """Nothing to do: append transactions begin with BEGIN IMMEDIATE (see evalstore.store.engine.IMMEDIATE)."""


def rows(conn: Connection, query: Select) -> Iterator[tuple]:
    """The query's rows as the driver returns them (tuples), fetched a batch at a time. Reading a whole
    run out, SQLAlchemy's processing of each row was a tenth of the work; the columns read this way are
    plain text, integers and bytes, which need none."""
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = [compiled.params[name] for name in compiled.positiontup or ()]
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(compiled.string, params)
        while batch := cursor.fetchmany(BATCH):
            yield from batch
    finally:
        cursor.close()
