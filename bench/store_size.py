"""How big a SQLite store is, and where its bytes are: what the benchmarks that compare a store with its
source (import.py, inspect_log.py) read of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def store_bytes(db: Path) -> int:
    """The store's file and its write-ahead log."""
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def table_pages(con: sqlite3.Connection) -> dict[str, int]:
    """Bytes of pages per table, its indexes counted with it (``dbstat``: raises ``sqlite3.OperationalError``
    where SQLite was built without it)."""
    owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"))
    pages: dict[str, int] = {}
    for name, size in con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        pages[table] = pages.get(table, 0) + size
    return pages
