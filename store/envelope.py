"""The stored-event envelope: what the recorder writes and reads, whatever the payload's type."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from evalstore.store.codec import event_hash

if TYPE_CHECKING:
    from evalstore.store.events import DomainEvent


def new_event_id() -> str:
    """A random (version 4) UUID for an event that brings no id of its own, drawn from the ``random``
    module's generator (seeded from the OS, and again in a forked child): ``uuid.uuid4`` reads
    ``os.urandom``, a system call that with several grading threads cost a wait for the GIL per event."""
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


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
