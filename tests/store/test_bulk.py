"""bulk.insert_tuples: several rows per statement, with the rows left over one by one, in order."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select, text

from evalstore.store import bulk

metadata = MetaData()
items = Table("items", metadata, Column("n", Integer, primary_key=True), Column("name", String(20)))


@pytest.mark.parametrize("count", [0, 1, bulk.ROWS_PER_INSERT - 1, bulk.ROWS_PER_INSERT, 2 * bulk.ROWS_PER_INSERT + 3])
def test_insert_tuples_stores_every_row_in_order(count: int) -> None:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    rows = [(i, f"row {i}") for i in range(count)]
    with engine.begin() as conn:
        bulk.insert_tuples(conn, items, ("n", "name"), rows)
        assert [tuple(r) for r in conn.execute(select(items.c.n, items.c.name).order_by(text("rowid")))] == rows


def test_insert_tuples_takes_columns_in_any_order() -> None:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    rows = [(f"row {i}", i) for i in range(bulk.ROWS_PER_INSERT + 2)]
    with engine.begin() as conn:
        bulk.insert_tuples(conn, items, ("name", "n"), rows)
        assert [tuple(r) for r in conn.execute(select(items.c.name, items.c.n).order_by(items.c.n))] == rows
