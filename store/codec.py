"""Canonical JSON and digests: the byte-level rules the hash chain and the blob store rest on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson

GENESIS_HASH = "0" * 64

# Built once: json.dumps with these options would build a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_json_str = json.encoder.encode_basestring  # a str as a JSON string literal, ensure_ascii=False


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 characters kept as they are."""
    return _CANONICAL.encode(value)


def canonical_json_bytes(value: Any) -> bytes:
    """``canonical_json(value)`` encoded as UTF-8 (what a JSON blob stores). A map of strings to strings (an
    LLM grader's rendered prompt, ``{systemPrompt, userPrompt}``: a blob for each verdict an import brings)
    is written by orjson, which writes such a map byte for byte as the stdlib does with these options (keys
    in code point order, every character but ``"``, ``\\`` and controls as it is; tests/store/test_codec.py
    holds the two to the same bytes for every character) in a sixth of the time. Anything else takes the
    stdlib's way: orjson spells some floats otherwise (``1e-5``, not ``1e-05``) and refuses what it cannot write."""
    if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # a lone surrogate: refused below as the stdlib's result is
            pass
    return canonical_json(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Digest of a value's canonical JSON; the key of caches and fingerprints."""
    return sha256_hex(canonical_json_bytes(value))


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
    """``sha256(prev_hash || canonical bytes of the event's other fields)``.

    The body is exactly ``canonical_json`` of the dict of those fields (keys in sorted order), written
    out directly because every append and every verify hashes every event (tests/store/test_codec.py
    holds the two to the same bytes).
    """
    return event_hasher(stream_id, recorded_at)(prev_hash, seq, event_id, stream_version, type, schema_version, payload)


def event_hasher(stream_id: str, recorded_at: str) -> Callable[[str, int, str, int, str, int, str], str]:
    """:func:`event_hash` for the events of one append (one stream, one time): what they share is
    written once, ``(prev_hash, seq, event_id, stream_version, type, schema_version, payload)`` per event."""
    recorded = f'"recorded_at":{_json_str(recorded_at)},'
    stream = f'"stream_id":{_json_str(stream_id)},'

    def digest(
        prev_hash: str, seq: int, event_id: str, stream_version: int, type: str, schema_version: int, payload: str
    ) -> str:
        body = (
            f'{{"event_id":{_json_str(event_id)},"payload":{_json_str(payload)},{recorded}'
            f'"schema_version":{schema_version:d},"seq":{seq:d},{stream}"stream_version":{stream_version:d},'
            f'"type":{_json_str(type)}}}'
        )
        return hashlib.sha256(prev_hash.encode("ascii") + body.encode("utf-8")).hexdigest()

    return digest
