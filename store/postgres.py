"""What is particular to PostgreSQL: serializing appends with an advisory lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection

# One lock id for the whole database: every append takes it, so the hash chain never forks.
APPEND_LOCK_ID = 0x65767374  # "evst"


def lock_for_append(conn: Connection) -> None:
    conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": APPEND_LOCK_ID})
