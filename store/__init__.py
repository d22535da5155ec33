"""evalstore's persistence layer: an append-only, hash-chained event log with content-addressed blobs.

Knows nothing about grading. Public API: open an :class:`EventStore`, append :mod:`evalstore.store.events`
payloads, read streams and blobs, verify, rebuild projections.
"""

from typing import TYPE_CHECKING

from evalstore.lazy import lazy_getattr
from evalstore.store.codec import canonical_json, digest_json, sha256_hex
from evalstore.store.envelope import NewEvent, StoredEvent
from evalstore.store.errors import (
    AppendOnlyError,
    BlobCorrupt,
    BlobNotFound,
    ConcurrencyError,
    IdempotencyError,
    NotFound,
    SchemaOutOfDate,
    StoreError,
    StoreMissing,
    error_line,
    is_database_failure,
)

if TYPE_CHECKING:
    from evalstore.store.engine import locate, make_engine, resolve_url
    from evalstore.store.recorder import EventStore, StoreOrOpener, VerifyReport, completed_run, opened

# Imported on first use: these load SQLAlchemy, which a command reading a SQLite file does without
# (store/sqlite_reads.py).
_LAZY = {
    "locate": "evalstore.store.engine",
    "make_engine": "evalstore.store.engine",
    "resolve_url": "evalstore.store.engine",
    "EventStore": "evalstore.store.recorder",
    "StoreOrOpener": "evalstore.store.recorder",
    "VerifyReport": "evalstore.store.recorder",
    "completed_run": "evalstore.store.recorder",
    "opened": "evalstore.store.recorder",
}
__getattr__ = lazy_getattr(__name__, _LAZY, globals())

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
    "StoreMissing",
    "StoreOrOpener",
    "StoredEvent",
    "VerifyReport",
    "canonical_json",
    "completed_run",
    "digest_json",
    "error_line",
    "is_database_failure",
    "locate",
    "make_engine",
    "opened",
    "resolve_url",
    "sha256_hex",
]
