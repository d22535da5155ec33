"""Content-addressed blobs: the key is the SHA-256 of the raw bytes; large text is stored compressed.

Blobs that begin alike usually share most of their text: the rendered prompts of one grader template,
the transcripts of one agent with its system prompt. Compressed one by one, each pays again for the
text they share (a prompt template is often most of the prompt). So a blob may be compressed against a
preset dictionary: an earlier stored blob that begins with the same bytes, named in the row's
``dictionary`` column. Which blob serves is remembered per :class:`Dictionaries` (one per open store):
a choice of the writer, not part of the content, so it never touches a digest, and any reader can
decode any row from the rows alone.

A blob larger than :data:`CHUNK_BYTES` (an imported artifact of a gigabyte) is never held whole: it is
given as a :class:`FileBlob`, read, hashed and compressed a chunk at a time, and stored as chunk rows
(each an ordinary blob, keyed by its own digest) and one row under the whole content's digest whose
``encoding`` is ``chunks`` and whose ``data`` is the chunks' digests, in order (32 bytes each). Its
``size`` is the whole content's, and ``verify`` hashes the chunks in order to check the whole digest, so
the store stays exact and browsable: every row is a blob keyed by the SHA-256 of what it holds.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from evalstore.store.errors import BlobCorrupt, BlobNotFound, StoreError

IDENTITY = "identity"
ZLIB = "zlib"
CHUNKS = "chunks"
# A blob larger than this is stored in chunks of this size, and a file larger than this is read a chunk at
# a time: what a blob costs in memory, whatever its size, is a few chunks (read, compressed, sent).
CHUNK_BYTES = 4 * 1024 * 1024
DIGEST_BYTES = 32
# Below this size compression rarely pays for its header and the CPU time.
COMPRESS_MIN_BYTES = 512
# Blobs whose first bytes agree share a dictionary: enough to tell templates apart, little to compare.
PREFIX_BYTES = 128
# zlib looks back at most 32 KB, so only a dictionary's last 32 KB can ever be matched.
ZDICT_BYTES = 32 * 1024
# Dictionaries remembered per open store (each at most ZDICT_BYTES): a handful of templates in practice.
MAX_DICTIONARIES = 256
# A dictionary may itself have been stored against one (two writers racing); the chain is short and
# always points at older rows, so a longer one is corruption.
MAX_CHAIN = 8


@dataclass(frozen=True)
class Dictionary:
    sha256: str
    zdict: bytes


@dataclass(frozen=True)
class EncodedBlob:
    """A blobs row: ``data`` as stored, decoded with ``encoding`` (and the ``dictionary`` blob, if named)."""

    sha256: str
    size: int
    encoding: str
    data: bytes
    dictionary: str | None = None

    def row(self) -> dict[str, object]:
        return {
            "sha256": self.sha256,
            "size": self.size,
            "encoding": self.encoding,
            "data": self.data,
            "dictionary": self.dictionary,
        }


@dataclass(frozen=True)
class FileBlob:
    """A blob given as a regular file of ``size`` bytes, whose digest its key claims: read a chunk at a
    time when it is stored, and checked then (a file that changed meanwhile is refused)."""

    path: str
    size: int

    def pieces(self, chunk: int) -> Iterator[bytes]:
        yield from read_pieces(self.path, chunk)


def read_pieces(path: str, chunk: int, max_bytes: int | None = None) -> Iterator[bytes]:
    """A regular file's bytes, ``chunk`` at a time (a FIFO would block, a device never end: refused with
    an ``OSError``, as is a file larger than ``max_bytes``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # opening a FIFO must not wait
    with os.fdopen(fd, "rb", buffering=0) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if max_bytes is not None and info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", path)
        while piece := handle.read(chunk):
            yield piece


def file_digest(path: str, max_bytes: int | None = None) -> tuple[str, int]:
    """(SHA-256 hex, size) of a regular file, read a chunk at a time."""
    hasher, size = hashlib.sha256(), 0
    for piece in read_pieces(path, CHUNK_BYTES, max_bytes):
        hasher.update(piece)
        size += len(piece)
    return hasher.hexdigest(), size


def blob_size(data: bytes | FileBlob) -> int:
    return data.size if isinstance(data, FileBlob) else len(data)


def is_large(data: bytes | FileBlob) -> bool:
    """Whether a blob is stored in chunks."""
    return isinstance(data, FileBlob) or is_large_size(len(data))


def is_large_size(size: int) -> bool:
    """Whether a blob of ``size`` bytes is stored in chunks (and read a chunk at a time, as a file)."""
    return size > CHUNK_BYTES


def pieces_of(data: bytes | FileBlob) -> Iterator[bytes]:
    if isinstance(data, FileBlob):
        yield from data.pieces(CHUNK_BYTES)
    else:
        for start in range(0, len(data), CHUNK_BYTES):
            yield data[start : start + CHUNK_BYTES]


def chunk_digests(stored: bytes) -> list[str]:
    """The digests a ``chunks`` row's data names, in order."""
    if isinstance(stored, str):
        stored = stored.encode("utf-8", "surrogateescape")
    if not stored or len(stored) % DIGEST_BYTES:
        raise BlobCorrupt(f"cannot be decoded ({CHUNKS}: {len(stored)} bytes is not a list of digests)")
    return [stored[i : i + DIGEST_BYTES].hex() for i in range(0, len(stored), DIGEST_BYTES)]


def zdict_of(raw: bytes) -> bytes:
    return raw[-ZDICT_BYTES:]


def prefix_key(data: bytes) -> bytes | None:
    """What blobs that may share a dictionary have in common; None for blobs too small to compress."""
    return data[:PREFIX_BYTES] if len(data) >= COMPRESS_MIN_BYTES else None


def encode_blob(data: bytes, digest: str, dictionary: Dictionary | None = None) -> EncodedBlob:
    """The row for ``data`` (whose SHA-256 the caller has already checked: ``digest``)."""
    if len(data) >= COMPRESS_MIN_BYTES:
        if dictionary is not None:
            packer = zlib.compressobj(6, zdict=dictionary.zdict)
            packed = packer.compress(data) + packer.flush()
            if len(packed) < len(data) * 0.9:
                return EncodedBlob(digest, len(data), ZLIB, packed, dictionary.sha256)
        packed = zlib.compress(data, 6)
        if len(packed) < len(data) * 0.9:
            return EncodedBlob(digest, len(data), ZLIB, packed)
    return EncodedBlob(digest, len(data), IDENTITY, data)


def decode_blob(encoding: str, stored: bytes, zdict: bytes | None = None) -> bytes:
    """Raw bytes of a stored blob; ``zdict`` is :func:`zdict_of` the dictionary blob, when the row names one."""
    if isinstance(stored, str):  # SQLite keeps a value written as text (an edit by hand) as text
        stored = stored.encode("utf-8", "surrogateescape")
    try:
        if encoding == IDENTITY and zdict is None:
            return bytes(stored)
        if encoding == ZLIB:
            if zdict is None:
                return zlib.decompress(stored)
            unpacker = zlib.decompressobj(zdict=zdict)
            raw = unpacker.decompress(stored)
            if not unpacker.eof:
                raise zlib.error("incomplete or truncated stream")
            return raw
    except zlib.error as exc:
        raise BlobCorrupt(f"cannot be decoded ({encoding}: {exc})") from None
    if encoding == CHUNKS:  # read through the store, which has the chunk rows (EventStore)
        raise BlobCorrupt("cannot be decoded on its own: it is stored in chunks")
    with_dictionary = " with a dictionary" if zdict is not None else ""
    raise BlobCorrupt(f"cannot be decoded: unknown blob encoding {encoding!r}{with_dictionary}")


class _Lru(OrderedDict):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def touch(self, key, value=None):  # type: ignore[no-untyped-def]
        """The value under ``key`` (stored first when ``value`` is given), as the most recently used."""
        if value is not None:
            self[key] = value
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)
        return found


class Dictionaries:
    """The dictionaries one open store writes with (by opening bytes) and reads with (by digest).

    A dictionary is remembered for writing only once the blob is known to be committed
    (:meth:`remember`, called after the append's transaction): a row may only name a stored blob.
    Shared by the threads of one process, hence the lock.
    """

    def __init__(self, limit: int = MAX_DICTIONARIES) -> None:
        self._by_prefix = _Lru(limit)
        self._zdicts = _Lru(limit)
        self._lock = threading.Lock()

    def for_prefix(self, key: bytes | None) -> Dictionary | None:
        if key is None:
            return None
        with self._lock:
            return self._by_prefix.touch(key)

    def remember(self, key: bytes, dictionary: Dictionary) -> None:
        with self._lock:
            self._by_prefix.touch(key, dictionary)
            self._zdicts.touch(dictionary.sha256, dictionary.zdict)

    def zdict(self, sha256: str) -> bytes | None:
        with self._lock:
            return self._zdicts.touch(sha256)

    def keep(self, sha256: str, zdict: bytes) -> None:
        with self._lock:
            self._zdicts.touch(sha256, zdict)


class BlobReader:
    """A store's blobs read back and decoded, over its rows: ``one(sha256)`` gives a ``blobs`` row's
    ``(encoding, data, dictionary)`` or None, ``many(digests)`` the ``(sha256, encoding, data, dictionary)``
    rows of those it finds. The dictionaries it reads are kept in ``dictionaries`` (the store's)."""

    def __init__(
        self,
        one: Callable[[str], tuple[str, bytes, str | None] | None],
        many: Callable[[list[str]], list[tuple]],
        dictionaries: Dictionaries,
    ) -> None:
        self._one = one
        self._many = many
        self._dictionaries = dictionaries

    def get_blob(self, sha256: str) -> bytes:
        return self._read(sha256, chain=0)

    def _read(self, sha256: str, *, chain: int) -> bytes:
        row = self._one(sha256)
        if row is None:
            raise BlobNotFound(f"no blob {sha256}")
        return self._decode(*row, chain=chain)

    def _decode(self, encoding: str, data: bytes, dictionary: str | None, *, chain: int) -> bytes:
        if encoding == CHUNKS:  # whole, for a caller that asked for the bytes (blob_pieces does not)
            return b"".join(self._chunks_of(data))
        if not dictionary:
            return decode_blob(encoding, data)
        try:
            return decode_blob(encoding, data, self._zdict(dictionary, chain + 1))
        except (BlobCorrupt, BlobNotFound) as exc:
            # Name the dictionary: that blob, not this one, may be what was altered or lost.
            raise BlobCorrupt(f"cannot be decoded against its dictionary, blob {dictionary}: {exc}") from None

    def _zdict(self, sha256: str, chain: int) -> bytes:
        """The compression dictionary a blob row names, read (and kept) from the dictionary blob."""
        found = self._dictionaries.zdict(sha256)
        if found is None:
            if chain > MAX_CHAIN:
                raise StoreError(f"blob dictionaries chain more than {MAX_CHAIN} deep at {sha256}")
            try:
                found = zdict_of(self._read(sha256, chain=chain))
            except BlobNotFound:
                raise BlobNotFound(f"no blob {sha256} (named as a compression dictionary)") from None
            self._dictionaries.keep(sha256, found)
        return found

    def blob_pieces(self, sha256: str) -> Iterator[bytes]:
        """A blob's bytes a chunk at a time (one piece for a blob stored whole): what writes a blob to a
        file or hashes it holds a chunk, never the whole of a large blob."""
        row = self._one(sha256)
        if row is None:
            raise BlobNotFound(f"no blob {sha256}")
        if row[0] == CHUNKS:
            yield from self._chunks_of(row[1])
        else:
            yield self._decode(*row, chain=0)

    def _chunks_of(self, stored: bytes) -> Iterator[bytes]:
        for digest in chunk_digests(stored):
            try:
                piece = self._read(digest, chain=0)
            except BlobNotFound:
                raise BlobCorrupt(f"cannot be read: its chunk {digest} is missing") from None
            if hashlib.sha256(piece).hexdigest() != digest:
                raise BlobCorrupt(f"cannot be read: its chunk {digest} does not match its digest")
            yield piece

    def blob_digest(self, encoding: str, data: bytes, dictionary: str | None) -> tuple[str, int]:
        """(SHA-256, size) of what a blobs row holds, its chunks hashed one at a time (``verify``)."""
        hasher, size = hashlib.sha256(), 0
        pieces = self._chunks_of(data) if encoding == CHUNKS else [self._decode(encoding, data, dictionary, chain=0)]
        for piece in pieces:
            hasher.update(piece)
            size += len(piece)
        return hasher.hexdigest(), size

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Several blobs at once (``many`` reads them), each decoded; a missing one is ``BlobNotFound``."""
        keys = list(dict.fromkeys(digests))
        found: dict[str, bytes] = {}
        zdicts: dict[str, bytes] = {}  # the few dictionaries many blobs name, each looked up once
        for sha256, encoding, data, dictionary in self._many(keys):
            if encoding == CHUNKS:
                found[sha256] = self._decode(encoding, data, dictionary, chain=0)
                continue
            if not dictionary:
                found[sha256] = decode_blob(encoding, data)
                continue
            try:
                if (zdict := zdicts.get(dictionary)) is None:
                    zdict = zdicts[dictionary] = self._zdict(dictionary, 1)
                found[sha256] = decode_blob(encoding, data, zdict)
            except (BlobCorrupt, BlobNotFound) as exc:  # as _decode names it
                raise BlobCorrupt(f"cannot be decoded against its dictionary, blob {dictionary}: {exc}") from None
        missing = [k for k in keys if k not in found]
        if missing:
            raise BlobNotFound(f"no blob {missing[0]}")
        return found
