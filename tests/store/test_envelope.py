"""The stored-event envelope: built from the fields a record's event has (store/records.py), its chain
hashes known (``chained``) or recomputed when first asked for (a record stores only its last event's)."""

from __future__ import annotations

import dataclasses

import pytest

from evalstore.store.envelope import StoredEvent

ROW = (7, "e-1", "run-1", 3, "test_scored", 2, '{"score":1.0}', "2026-01-01T00:00:00Z")


def test_its_fields_are_an_events_fields_in_order_and_the_hashes_are_not_among_them() -> None:
    assert [f.name for f in dataclasses.fields(StoredEvent)] == [
        "seq",
        "event_id",
        "stream_id",
        "stream_version",
        "type",
        "schema_version",
        "payload_json",
        "recorded_at",
    ]


def test_an_event_built_from_a_row_is_the_one_its_constructor_builds() -> None:
    built = StoredEvent.of_row(ROW)
    assert built == StoredEvent(*ROW) and vars(built) == vars(StoredEvent(*ROW))
    assert built.payload == {"score": 1.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seq = 8  # type: ignore[misc]
    with pytest.raises(AttributeError, match="event seq 7 was built without its hash chain"):
        _ = built.hash


def test_a_chained_event_has_the_hashes_it_was_given_and_compares_by_its_fields() -> None:
    chained = StoredEvent.chained(ROW, "0" * 64, "f" * 64)
    assert (chained.prev_hash, chained.hash) == ("0" * 64, "f" * 64)
    assert chained == StoredEvent.of_row(ROW)
    assert chained.computed_hash("0" * 64) == StoredEvent(*ROW).computed_hash("0" * 64) != "f" * 64


def test_an_events_hashes_come_from_its_records_chain_once_asked_for() -> None:
    asked: list[int] = []

    class Chain:
        def hashes(self, event: StoredEvent) -> tuple[str, str]:
            asked.append(event.seq)
            return "a" * 64, "b" * 64

    event = StoredEvent.of_row(ROW, Chain())
    assert asked == []  # nothing computed until a hash is read
    assert (event.prev_hash, event.hash, event.hash) == ("a" * 64, "b" * 64, "b" * 64)
    assert asked == [7, 7]  # once for each, then kept
