"""Executing one Core statement for many rows without SQLAlchemy's per-row parameter processing.

An import appends hundreds of thousands of events; ``Connection.execute(stmt, rows)`` spends more time
building each row's parameters than the database spends storing it. The statement is still built with
Core (so each dialect renders its own SQL: placeholders, ON CONFLICT); only the rows skip the per-row
work and go straight to the driver's ``executemany``. The rows hold only values every driver takes
as they are (str, int, float, bool, None, bytes), so no bind processing is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable


def executemany(conn: Connection, stmt: Executable, rows: Sequence[Mapping[str, Any]]) -> None:
    """Run ``stmt`` once per row; every row maps the same bind names (column names) to values."""
    if not rows:
        return
    # column_keys: an INSERT or UPDATE names only the columns the rows carry, as execute() would.
    compiled = stmt.compile(dialect=conn.dialect, column_keys=list(rows[0]))  # type: ignore[attr-defined]
    if compiled.positional:
        order = compiled.positiontup
        if len(order) == 1:
            params: list[Any] = [(row[order[0]],) for row in rows]
        else:
            pick = itemgetter(*order)
            params = [pick(row) for row in rows]
    else:
        params = [dict(row) for row in rows]
    conn.exec_driver_sql(compiled.string, params)
