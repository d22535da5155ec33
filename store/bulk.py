"""Executing one Core statement for many rows without SQLAlchemy's per-row parameter processing.

An import appends hundreds of thousands of events; ``Connection.execute(stmt, rows)`` spends more time
building each row's parameters than the database spends storing it. The statement is still built with
Core (so each dialect renders its own SQL: placeholders, ON CONFLICT); only the rows skip the per-row
work and go straight to the driver's ``executemany``. The rows hold only values every driver takes
as they are (str, int, float, bool, None, bytes), so no bind processing is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Table, bindparam
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

_COMPILED: dict[tuple[Hashable, ...], tuple[str, tuple[str, ...] | None]] = {}
"""(driver, statement key, bind names) -> (SQL, positional bind order or None).

Building and compiling a Core statement costs more than a small append's inserts: a replay appends
about seven events per test, and compiling its three statements each time was a third of the append
(bench/replay.py). The store runs the same few statements over and over, so each is compiled once.
"""


def _compile(
    conn: Connection, stmt: Executable | Callable[[], Executable], names: list[str], key: Hashable | None
) -> tuple[str, tuple[str, ...] | None]:
    dialect = conn.dialect
    cache_key = (dialect.name, dialect.driver, dialect.paramstyle, key, tuple(names))
    found = _COMPILED.get(cache_key) if key is not None else None
    if found is None:
        built = stmt() if callable(stmt) else stmt
        # column_keys: an INSERT or UPDATE names only the columns the rows carry, as execute() would.
        compiled = built.compile(dialect=dialect, column_keys=names)  # type: ignore[attr-defined]
        found = (compiled.string, tuple(compiled.positiontup) if compiled.positional else None)
        if key is not None:
            _COMPILED[cache_key] = found
    return found


def executemany(
    conn: Connection,
    stmt: Executable | Callable[[], Executable],
    rows: Sequence[Mapping[str, Any]],
    *,
    key: Hashable | None = None,
) -> None:
    """Run ``stmt`` once per row; every row maps the same bind names (column names) to values.

    With ``key`` (whatever identifies the statement apart from the driver and the bind names, e.g.
    ``("upsert", table)``) the compiled SQL is cached, and ``stmt`` may be a function that builds the
    statement, called only on a cache miss.
    """
    if not rows:
        return
    sql, order = _compile(conn, stmt, list(rows[0]), key)
    if order is not None:
        if len(order) == 1:
            params: list[Any] = [(row[order[0]],) for row in rows]
        else:
            pick = itemgetter(*order)
            params = [pick(row) for row in rows]
    else:
        params = [dict(row) for row in rows]
    conn.exec_driver_sql(sql, params)


# Rows per INSERT in insert_tuples. With the append-only BEFORE INSERT triggers (migration 0003) each
# INSERT statement into events costs about as much again as its row (80,000 events: 0.35 s CPU without
# triggers, 0.73 s with them, one row a statement); at 10 rows a statement, 0.58 s. Larger statements
# measured slower, and 10 rows of 10 columns stay under SQLite's oldest limit of 999 parameters. Drivers
# with named parameters (psycopg) keep one row per statement.
ROWS_PER_INSERT = 10


def insert_tuples(conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
    """INSERT rows given as tuples in ``columns`` order (saves building a dict per row), several rows per
    statement where the driver takes positional parameters."""
    if not rows:
        return
    key = ("insert", table.name)
    sql, order = _compile(conn, table.insert, list(columns), key)
    if order != tuple(columns):
        executemany(conn, table.insert, [dict(zip(columns, row)) for row in rows], key=key)
        return
    whole = len(rows) - len(rows) % ROWS_PER_INSERT
    if whole:
        names = [f"{c}_{i}" for i in range(ROWS_PER_INSERT) for c in columns]
        many, many_order = _compile(
            conn,
            lambda: table.insert().values(
                [{c: bindparam(f"{c}_{i}") for c in columns} for i in range(ROWS_PER_INSERT)]
            ),
            names,
            ("insert-many", table.name, ROWS_PER_INSERT),
        )
        if many_order == tuple(names):
            step = ROWS_PER_INSERT
            conn.exec_driver_sql(many, [sum(rows[i : i + step], ()) for i in range(0, whole, step)])
            rows = rows[whole:]
    if rows:
        conn.exec_driver_sql(sql, list(rows))
