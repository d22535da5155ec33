"""The stored-event envelope built from a row of the ``events`` table."""

from __future__ import annotations

import dataclasses

import pytest

from evalstore.store import schema
from evalstore.store.envelope import StoredEvent


def test_its_fields_are_the_events_tables_columns_in_order() -> None:
    columns = [c.name for c in schema.events.columns]
    assert [f.name for f in dataclasses.fields(StoredEvent)] == [
        "payload_json" if c == "payload" else c for c in columns
    ]


def test_an_event_built_from_a_row_is_the_one_its_constructor_builds() -> None:
    row = (7, "e-1", "run-1", 3, "test_scored", 2, '{"score":1.0}', "2026-01-01T00:00:00Z", "0" * 64, "f" * 64)
    built = StoredEvent.of_row(row)
    assert built == StoredEvent(*row) and vars(built) == vars(StoredEvent(*row))
    assert built.payload == {"score": 1.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seq = 8  # type: ignore[misc]
