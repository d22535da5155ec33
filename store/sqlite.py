"""What is particular to SQLite: how an append takes the write lock, and its INSERT with ON CONFLICT."""

from __future__ import annotations

from sqlalchemy.dialects.sqlite import insert  # noqa: F401  (the dialect's upsert-capable insert)
from sqlalchemy.engine import Connection


def lock_for_append(conn: Connection) -> None:
    """Nothing to do: append transactions begin with BEGIN IMMEDIATE (see evalstore.store.engine.IMMEDIATE)."""
