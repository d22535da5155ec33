"""What is particular to PostgreSQL: serializing appends with an advisory lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection

# One lock id for the whole database: every append takes it, so the hash chain never forks.
APPEND_LOCK_ID = 0x65767374  # "evst"


def lock_for_append(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": APPEND_LOCK_ID})


class _AbortedPipelineNoise(logging.Filter):
    """psycopg logs ``error ignored terminating <psycopg.Pipeline ...>: pipeline aborted`` when an
    ``executemany`` (run in pipeline mode) fails, e.g. an append racing another writer for the same
    event ids: the failure itself is raised, and handled, so the line only repeats it on stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.msg == "error ignored terminating %r: %s"
            and isinstance(record.args, tuple)
            and len(record.args) == 2
            and type(record.args[0]).__name__ == "Pipeline"
            and "pipeline aborted" in str(record.args[1])
        )


_NOISE_FILTER = _AbortedPipelineNoise()


def quiet_aborted_pipelines() -> None:
    """Drop psycopg's duplicate report of an aborted pipeline (idempotent)."""
    logging.getLogger("psycopg").addFilter(_NOISE_FILTER)
