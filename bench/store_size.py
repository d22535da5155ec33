"""How big a SQLite store is, and where its bytes are: what the benchmarks that compare a store with its
source (import.py, inspect_log.py, store_layouts.py) read of it; and import.py's rows, for those that import them."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path
from types import ModuleType


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


def import_bench() -> ModuleType:
    """bench/import.py as a module (its rows: ``write_rows``, ``make_row``; its child import), loaded by path:
    ``import`` is a keyword, so it cannot be imported by name."""
    spec = importlib.util.spec_from_file_location("bench_import_rows", Path(__file__).with_name("import.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
