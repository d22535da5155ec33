"""What is particular to PostgreSQL: serializing appends with an advisory lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

BATCH = 2000

# One lock id for the whole database: every append takes it, so the hash chain never forks.
APPEND_LOCK_ID = 0x65767374  # "evst"


# Another for schema changes: two processes creating or upgrading one store take turns.
MIGRATION_LOCK_ID = 0x65766C73  # "evls"


def lock_for_append(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": APPEND_LOCK_ID})


def lock_for_migration(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})


def rows(conn: Connection, query: Select) -> Iterator[tuple]:
    """The query's rows, a batch at a time from a server-side cursor (memory stays flat)."""
    # Per statement: Connection.execution_options sets it on the connection for good (SQLAlchemy 2), and a
    # later write on it would run as a server-side cursor too.
    for batch in conn.execute(query, execution_options={"yield_per": BATCH}).partitions():
        yield from batch


class _AbortedPipelineNoise(logging.Filter):
    """psycopg logs ``error ignored terminating <psycopg.Pipeline ...>: ...`` when an ``executemany`` (run
    in pipeline mode) fails: ``pipeline aborted`` (an append racing another writer for the same event ids)
    or ``the connection is lost``. The failure itself is raised, and handled or reported in one line, so
    the log line only repeats it on stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.msg == "error ignored terminating %r: %s"
            and isinstance(record.args, tuple)
            and len(record.args) == 2
            and type(record.args[0]).__name__ == "Pipeline"
        )


_NOISE_FILTER = _AbortedPipelineNoise()


def quiet_aborted_pipelines() -> None:
    """Drop psycopg's duplicate report of an aborted pipeline (idempotent)."""
    logging.getLogger("psycopg").addFilter(_NOISE_FILTER)
