"""Content-addressed blobs: the key is the SHA-256 of the raw bytes; large text is stored compressed."""

from __future__ import annotations

import zlib

from .codec import sha256_hex
from .errors import StoreError

IDENTITY = "identity"
ZLIB = "zlib"
# Below this size compression rarely pays for its header and the CPU time.
COMPRESS_MIN_BYTES = 512


def encode_blob(data: bytes) -> tuple[str, int, str, bytes]:
    """``(sha256, size, encoding, stored bytes)`` for raw bytes."""
    digest = sha256_hex(data)
    if len(data) >= COMPRESS_MIN_BYTES:
        packed = zlib.compress(data, 6)
        if len(packed) < len(data) * 0.9:
            return digest, len(data), ZLIB, packed
    return digest, len(data), IDENTITY, data


def decode_blob(encoding: str, stored: bytes) -> bytes:
    if encoding == IDENTITY:
        return bytes(stored)
    if encoding == ZLIB:
        return zlib.decompress(stored)
    raise StoreError(f"unknown blob encoding {encoding!r}")
