"""The stored-event envelope: what the recorder writes and reads, whatever the payload's type."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

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


class Chain(Protocol):
    """The hash chain of a record's events, recomputed when one of them is asked for its hashes (a record
    stores only its last event's: store/records.py)."""

    def hashes(self, event: StoredEvent) -> tuple[str, str]:
        """``(prev_hash, hash)`` of one of the record's events."""
        ...


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

    @classmethod
    def of_row(cls, row: Sequence[Any], chain: Chain | None = None) -> StoredEvent:
        """An event from its fields in their order (a record's event as :mod:`evalstore.store.records`
        reads it), and the chain that gives its hashes when asked. Built without the frozen dataclass's
        ``__init__``, which sets each field through ``object.__setattr__``: reading a replay's parent run
        builds one per event."""
        event = object.__new__(cls)
        event.__dict__.update(zip(_FIELDS, row))
        if chain is not None:
            event.__dict__["_chain"] = chain
        return event

    @classmethod
    def chained(cls, row: Sequence[Any], prev_hash: str, hash: str) -> StoredEvent:
        """An event whose hashes are known (just appended, or read from a checkpoint or an attestation)."""
        event = cls.of_row(row)
        event.__dict__["prev_hash"] = prev_hash
        event.__dict__["hash"] = hash
        return event

    @cached_property
    def prev_hash(self) -> str:
        """The hash of the event before this one (``seq - 1``), or the genesis hash."""
        return self._record_chain().hashes(self)[0]

    @cached_property
    def hash(self) -> str:
        """This event's chain hash (:func:`evalstore.store.codec.event_hash`)."""
        return self._record_chain().hashes(self)[1]

    def _record_chain(self) -> Chain:
        chain = self.__dict__.get("_chain")
        if chain is None:
            raise AttributeError(f"event seq {self.seq} was built without its hash chain")
        return chain

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
"""The fields of :class:`StoredEvent` in order."""
