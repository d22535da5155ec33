"""The stored-event envelope: what the recorder writes and reads, whatever the payload's type."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

from evalstore.store.codec import event_hash

if TYPE_CHECKING:
    from evalstore.store.events import DomainEvent


def new_event_id() -> str:
    """The id of an event that brings none: a version 7 UUID (RFC 9562), the time in milliseconds and then
    74 random bits. Ids made one after another sort together, so the unique index on event ids takes an
    append's new ids on a few pages at its end; random (version 4) ids landed each on a page of its own,
    and an append of a few hundred events rewrote as many index pages when it committed. The bits come
    from the ``random`` module's generator (seeded from the OS, and again in a forked child): reading
    ``os.urandom`` per id, a system call, cost each grading thread a wait for the GIL."""
    millis = time.time_ns() // 1_000_000
    bits = random.getrandbits(74)
    value = (millis & _MILLIS) << 80 | 7 << 76 | (bits >> 62) << 64 | 0b10 << 62 | (bits & _RAND_B)
    h = f"{value:032x}"  # str(uuid.UUID(int=value)), without the UUID object (checked and built per event)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MILLIS = (1 << 48) - 1
_RAND_B = (1 << 62) - 1


@dataclass(frozen=True)
class NewEvent:
    """An event to append. Give ``event_id`` to make the append idempotent (retries, resumes)."""

    payload: DomainEvent
    event_id: str | None = None


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    event_id: str
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    payload_json: str
    recorded_at: str
    prev_hash: str
    hash: str

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> StoredEvent:
        """An event from a row of the ``events`` table's columns in their order (``select(events)``), as
        the driver gives it. Built without the frozen dataclass's ``__init__``, which sets each of the ten
        fields through ``object.__setattr__``: reading a replay's parent run builds one per event."""
        event = object.__new__(cls)
        event.__dict__.update(zip(_FIELDS, row))
        return event

    @cached_property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.payload_json)

    @cached_property
    def event(self) -> DomainEvent:
        """The payload as its current event class (older schema versions upcast)."""
        # Imported here: reading projections (`evalstore runs`) never needs the pydantic catalogue.
        from evalstore.store.events import decode, decode_json

        if "payload" not in self.__dict__:  # not parsed yet: let pydantic parse the JSON itself (faster)
            return decode_json(self.type, self.schema_version, self.payload_json)
        return decode(self.type, self.schema_version, self.payload)

    def computed_hash(self, prev_hash: str) -> str:
        """What this event's hash must be when it follows ``prev_hash`` in the chain."""
        return event_hash(
            prev_hash,
            seq=self.seq,
            event_id=self.event_id,
            stream_id=self.stream_id,
            stream_version=self.stream_version,
            type=self.type,
            schema_version=self.schema_version,
            payload=self.payload_json,
            recorded_at=self.recorded_at,
        )


_FIELDS = tuple(f.name for f in fields(StoredEvent))
"""The fields of :class:`StoredEvent` in the order of the ``events`` table's columns (``schema.py``;
tests/store/test_envelope.py holds the two together)."""
