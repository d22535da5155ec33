"""Canonical JSON and digests: the byte-level rules the hash chain and the blob store rest on."""

from __future__ import annotations

import hashlib
import json
from typing import Any

GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 characters kept as they are."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Digest of a value's canonical JSON; the key of caches and fingerprints."""
    return sha256_hex(canonical_json(value).encode("utf-8"))


def event_hash(
    prev_hash: str,
    *,
    seq: int,
    event_id: str,
    stream_id: str,
    stream_version: int,
    type: str,
    schema_version: int,
    payload: str,
    recorded_at: str,
) -> str:
    """``sha256(prev_hash || canonical bytes of the event's other fields)``."""
    body = canonical_json(
        {
            "seq": seq,
            "event_id": event_id,
            "stream_id": stream_id,
            "stream_version": stream_version,
            "type": type,
            "schema_version": schema_version,
            "payload": payload,
            "recorded_at": recorded_at,
        }
    )
    return hashlib.sha256(prev_hash.encode("ascii") + body.encode("utf-8")).hexdigest()
