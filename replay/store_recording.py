"""A Recorder backed by the event store: buffers one unit of work, then appends it atomically."""

from __future__ import annotations

import threading
import uuid

from store import EventStore, NewEvent
from store.codec import sha256_hex
from store.events import DomainEvent, GraderCalled, PreprocessingRecorded


class StoreRecorder:
    """Buffers events and blobs for one test; :meth:`flush` appends them to the run's stream in one go."""

    def __init__(self, store: EventStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.events: list[NewEvent] = []
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put_blob(self, data: bytes) -> str:
        digest = sha256_hex(data)
        with self._lock:
            self.blobs[digest] = data
        return digest

    def get_blob(self, sha256: str) -> bytes:
        with self._lock:
            data = self.blobs.get(sha256)
        return data if data is not None else self.store.get_blob(sha256)

    def record(self, event: DomainEvent, event_id: str | None = None) -> str:
        event_id = event_id or str(uuid.uuid4())
        with self._lock:
            self.events.append(NewEvent(event, event_id))
        return event_id

    def _buffered(self, cls: type, match) -> tuple[str, DomainEvent] | None:  # type: ignore[no-untyped-def]
        with self._lock:
            for new in self.events:
                if isinstance(new.payload, cls) and match(new.payload):
                    return new.event_id, new.payload  # type: ignore[return-value]
        return None

    def find_conversion(self, fingerprint: str) -> tuple[str, PreprocessingRecorded] | None:
        hit = self._buffered(
            PreprocessingRecorded,
            lambda e: e.fingerprint == fingerprint and e.status in ("converted", "read_as_text"),
        )
        if hit:
            return hit  # type: ignore[return-value]
        stored = self.store.lookup("conversions", fingerprint)
        return (stored.event_id, stored.event) if stored else None  # type: ignore[return-value]

    def find_judge_call(self, cache_key: str) -> tuple[str, GraderCalled] | None:
        hit = self._buffered(
            GraderCalled, lambda e: e.cache_key == cache_key and e.outcome == "ok" and not e.cache_hit
        )
        if hit:
            return hit  # type: ignore[return-value]
        stored = self.store.lookup("judge_cache", cache_key)
        return (stored.event_id, stored.event) if stored else None  # type: ignore[return-value]

    def flush(self) -> None:
        with self._lock:
            events, blobs = self.events, self.blobs
            self.events, self.blobs = [], {}
        if events:
            self.store.append(self.run_id, events, blobs=blobs)
        elif blobs:
            self.store.put_blobs(blobs)
