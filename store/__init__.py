"""evalstore's persistence layer: an append-only, hash-chained event log with content-addressed blobs.

Knows nothing about grading. Public API: open an :class:`EventStore`, append :mod:`store.events`
payloads, read streams and blobs, verify, rebuild projections.
"""

from .codec import canonical_json, digest_json, sha256_hex
from .engine import make_engine, resolve_url
from .envelope import NewEvent, StoredEvent
from .errors import (
    AppendOnlyError,
    BlobCorrupt,
    BlobNotFound,
    ConcurrencyError,
    IdempotencyError,
    NotFound,
    SchemaOutOfDate,
    StoreError,
)
from .recorder import EventStore, VerifyReport

__all__ = [
    "AppendOnlyError",
    "BlobCorrupt",
    "BlobNotFound",
    "ConcurrencyError",
    "EventStore",
    "IdempotencyError",
    "NewEvent",
    "NotFound",
    "SchemaOutOfDate",
    "StoreError",
    "StoredEvent",
    "VerifyReport",
    "canonical_json",
    "digest_json",
    "make_engine",
    "resolve_url",
    "sha256_hex",
]
