"""Recorders: where grading writes its events and blobs (see ``replay.graders.base.Recorder``)."""

from __future__ import annotations

import uuid

from store.codec import sha256_hex
from store.errors import BlobNotFound
from store.events import DomainEvent, GraderCalled, PreprocessingRecorded

_REUSABLE_CONVERSIONS = ("converted", "read_as_text")


class MemoryRecorder:
    """Keeps everything in memory: for grading without a store, and for tests.

    ``events`` holds ``(event_id, event)`` in recording order; ``blobs`` maps sha256 to bytes.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, DomainEvent]] = []
        self.blobs: dict[str, bytes] = {}

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        self.blobs.setdefault(digest, bytes(data))
        return digest

    def get_blob(self, sha256: str) -> bytes:
        try:
            return self.blobs[sha256]
        except KeyError:
            raise BlobNotFound(f"no blob with sha256 {sha256}") from None

    def record(self, event: DomainEvent) -> str:
        event_id = str(uuid.uuid4())
        self.events.append((event_id, event))
        return event_id

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        """The most recent successful conversion with this fingerprint."""
        for event_id, event in reversed(self.events):
            if (
                isinstance(event, PreprocessingRecorded)
                and event.fingerprint == fingerprint
                and event.status in _REUSABLE_CONVERSIONS
                and event.output_sha256 is not None
            ):
                return event_id, event
        return None

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        """The most recent successful judge call with this cache key."""
        for event_id, event in reversed(self.events):
            if (
                isinstance(event, GraderCalled)
                and event.call == "judge"
                and event.cache_key == cache_key
                and event.outcome == "ok"
            ):
                return event_id, event
        return None

    def of_type(self, cls: type[DomainEvent]) -> list[tuple[str, DomainEvent]]:
        """Recorded events of one class, in order."""
        return [(event_id, event) for event_id, event in self.events if isinstance(event, cls)]
