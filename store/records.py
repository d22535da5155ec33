"""The log's on-disk unit: a record holds consecutive events of one stream from one append.

Events are not rows of their own: an import of 20,000 small results made 200,000 rows whose fixed part
(hex hashes, UUID strings, stream ids, timestamps, two unique indexes) outweighed their payloads, and the
store came to five times its source (issue 31, bench/store_layouts.py). A record is a row of ``records``:

* ``seq``: the seq of its first event (the events after it are ``seq + 1`` ... ``seq + count - 1``);
* ``stream``: its stream's number (``streams``: the seq of the stream's first event), ``version``: the
  stream version of its first event, ``count``, ``recorded_at`` (one time per append);
* ``body``: raw DEFLATE (zlib, ``wbits=-15``), against the preset dictionary ``dictionaries.id =
  dictionary`` when there is one, of the plain body :func:`plain_body` writes;
* ``hash``: the chain hash of its last event, 32 bytes. The hashes of the others are recomputed from the
  previous record's: the chain (codec.event_hash) is the same as when every event kept its own.

An event's id is not stored when it is the id :func:`derived_id` makes from its stream id and version
(what an event appended without one gets, and what an import gives its events): a version 8 UUID, the
first ten bytes of ``sha256("evalstore:" + stream id)`` then the version in six. A reader makes it again,
and finds the event an id names from the id alone. Other ids are kept in the body and in the
``event_ids`` projection.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from evalstore.store.codec import event_hasher
from evalstore.store.envelope import StoredEvent
from evalstore.store.errors import StoreError

MAX_EVENTS = 64
"""At most this many events in a record: reading one event inflates its whole record."""
CUT_AFTER = "test_scored"
"""A record ends after each result's score: a result's events are read back together."""
DICTIONARY_BYTES = 32 * 1024  # DEFLATE's window: a preset dictionary longer than this is not used
DICTIONARY_RECORDS = 16
"""An append of at least this many records, in a store without a dictionary yet or in an import, makes
one from its first records' plain bodies."""
LEVEL = 3
"""zlib's level: 6 (its default) made an import's records 6% smaller than 3 in twice the time."""
MEMORY = 7
"""zlib's ``memLevel`` (the size of its match-finding tables): a record is a few kilobytes, and a copy of
a primed compressor with 9 (the largest) took seven times as long to make and use as one with 7, for
records of the same size (bench/import.py, 20,000 rubric rows: 4.2 s -> 0.66 s, 7.67 MB either way).
Only the writer's memory: a reader inflates any memLevel alike."""

HEADER_END = "\x1d"
EVENT_END = "\x1e"
FIELD_END = "\x1f"
_SEPARATORS = (HEADER_END, EVENT_END, FIELD_END)


def plain_body(stream_id: str | None, events: Sequence[tuple[str | None, str, int, str]]) -> bytes:
    """A record's content before compression, UTF-8: its stream id (only in a stream's first record, so the
    ``streams`` projection can be rebuilt from the log), then each event's ``id, type, schema version,
    payload JSON``, the id empty where it is derived. The separators are control characters that JSON
    text never holds unescaped; an id, type or payload holding one is refused."""
    parts = [f"{stream_id or ''}{HEADER_END}"]
    for event_id, type_, schema_version, payload in events:
        line = f"{event_id or ''}{FIELD_END}{type_}{FIELD_END}{schema_version:d}{FIELD_END}{payload}"
        parts.append(line)
    text = parts[0] + EVENT_END.join(parts[1:])
    if (
        text.count(FIELD_END) != 3 * len(events)
        or text.count(EVENT_END) != len(events) - 1
        or (text.count(HEADER_END) != 1)
    ):
        raise StoreError(_bad_field(stream_id, events))
    return text.encode("utf-8")


def _bad_field(stream_id: str | None, events: Sequence[tuple[str | None, str, int, str]]) -> str:
    if stream_id and any(c in stream_id for c in _SEPARATORS):
        return f"stream id {stream_id!r} holds a control character (\\x1d-\\x1f); stream ids are names"
    for event_id, type_, _, payload in events:
        for what, value in (("event id", event_id or ""), ("event type", type_), ("payload", payload)):
            if any(c in value for c in _SEPARATORS):
                return f"{what} of event {event_id or type_} holds an unescaped control character: not JSON"
    return "a record could not be written"


def parse_body(plain: bytes) -> tuple[str, list[tuple[str, str, int, str]]]:
    """``(stream id or "", [(id or "", type, schema version, payload JSON), ...])`` of a plain body."""
    text = plain.decode("utf-8")
    header, _, rest = text.partition(HEADER_END)
    events = []
    for line in rest.split(EVENT_END):
        event_id, type_, schema_version, payload = line.split(FIELD_END, 3)
        events.append((event_id, type_, int(schema_version), payload))
    return header, events


def event_fields(
    seq: int, stream_id: str, version: int, recorded_at: str, items: Sequence[tuple[str, str, int, str]]
) -> list[tuple[int, str, str, int, str, int, str, str]]:
    """A record's events as :class:`~evalstore.store.envelope.StoredEvent`'s fields, in order: its
    :func:`parse_body` items placed after ``seq`` and ``version``, an empty id made the derived one."""
    return [
        (
            seq + i,
            event_id or derived_id(stream_id, version + i),
            stream_id,
            version + i,
            type_,
            sv,
            payload,
            recorded_at,
        )
        for i, (event_id, type_, sv, payload) in enumerate(items)
    ]


ROW = ("seq", "stream", "version", "count", "recorded_at", "dictionary", "body", "hash")
"""A ``records`` row's columns as every read selects them, in this order, then its stream's id."""


def row_plain(row: Sequence[Any], dictionary: bytes | None) -> bytes:
    """The plain body of a record row (:data:`ROW`), inflated against ``dictionary`` (the bytes of the one
    it names, None for none)."""
    try:
        return inflate(row[6], dictionary)
    except zlib.error as exc:
        raise StoreError(f"record seq {row[0]} cannot be inflated ({exc}); run `evalstore verify`") from None


def missing_dictionary(number: int) -> StoreError:
    return StoreError(f"record compression dictionary {number} is missing; run `evalstore verify`")


def row_events(
    row: Sequence[Any], plain: bytes, prev_of: Callable[[int], str], prev: str | None = None
) -> list[StoredEvent]:
    """The events of a record row (:data:`ROW` and its stream id) whose plain body is ``plain``; their
    hashes come from ``prev``, the previous record's hash when the reader knows it, else from
    ``prev_of(seq)``, asked once, when a hash is first read."""
    seq, _, version, _, recorded_at, _, _, last_hash, stream_id = row
    _, items = parse_body(plain)
    chain = RecordChain(prev_of, [], bytes(last_hash).hex(), prev)
    chain.events = [
        StoredEvent.of_row(fields, chain) for fields in event_fields(seq, stream_id, version, recorded_at, items)
    ]
    return chain.events


class RecordChain:
    """The chain hashes of one record's events, computed when one is first asked for: from the previous
    record's stored hash, through this record's events; the last is the record's stored hash (so an event
    altered in the record shows as the last one's computed hash differing from it: ``verify``)."""

    def __init__(
        self, prev_of: Callable[[int], str], events: list[StoredEvent], last_hash: str, prev: str | None
    ) -> None:
        self.prev_of = prev_of
        self.events = events
        self.last_hash = last_hash
        self.prev = prev
        """The previous record's hash when the reader knows it (reading the whole log in order)."""
        self._hashes: list[tuple[str, str]] | None = None

    def hashes(self, event: StoredEvent) -> tuple[str, str]:
        if self._hashes is None:
            if self.prev is None:
                self.prev = self.prev_of(self.events[0].seq)
            self._hashes = chain_of(self.events, self.prev, self.last_hash)
        return self._hashes[event.seq - self.events[0].seq]


def chain_of(events: Sequence[StoredEvent], prev: str, last_hash: str | None = None) -> list[tuple[str, str]]:
    """``(prev_hash, hash)`` of a record's events after ``prev``; the last one's hash is ``last_hash`` when given."""
    first = events[0]
    hashed = event_hasher(first.stream_id, first.recorded_at)
    out = []
    for ev in events:
        digest = hashed(prev, ev.seq, ev.event_id, ev.stream_version, ev.type, ev.schema_version, ev.payload_json)
        out.append((prev, digest))
        prev = digest
    if last_hash is not None:
        out[-1] = (out[-1][0], last_hash)
    return out


def compress(plain: bytes, dictionary: bytes | None) -> bytes:
    deflate = _primed(dictionary).copy()
    return deflate.compress(plain) + deflate.flush()


@functools.lru_cache(maxsize=8)
def _primed(dictionary: bytes | None) -> Any:
    """A compressor with the dictionary loaded, which each record's compressor is a copy of: loading a
    32 KiB dictionary hashes all of it, and was as long as compressing an import's record."""
    if dictionary is None:
        return zlib.compressobj(LEVEL, zlib.DEFLATED, -15, MEMORY)
    return zlib.compressobj(LEVEL, zlib.DEFLATED, -15, MEMORY, zlib.Z_DEFAULT_STRATEGY, dictionary)


def inflate(body: bytes, dictionary: bytes | None) -> bytes:
    inflater = zlib.decompressobj(-15, dictionary) if dictionary else zlib.decompressobj(-15)
    plain = inflater.decompress(body)
    if not inflater.eof or inflater.unused_data:
        raise zlib.error("the record's DEFLATE stream is cut short or followed by other bytes")
    return plain


def dictionary_of(plains: Sequence[bytes]) -> bytes:
    """A preset dictionary for records like these: the end of their plain bodies, up to DEFLATE's window
    (DEFLATE reaches back at most 32 KiB; what is nearest the end is matched most cheaply)."""
    return b"".join(plains)[-DICTIONARY_BYTES:]


def cuts(types: Sequence[str]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each record an append's events (by type, in order) are cut into."""
    start = 0
    for i, type_ in enumerate(types):
        if type_ == CUT_AFTER or i + 1 - start == MAX_EVENTS:
            yield start, i + 1
            start = i + 1
    if start < len(types):
        yield start, len(types)


@functools.lru_cache(maxsize=4096)
def stream_key(stream_id: str) -> str:
    """The first ten bytes of a stream's derived ids, as 20 hex digits (UUID version and variant bits set)."""
    digest = bytearray(hashlib.sha256(f"evalstore:{stream_id}".encode()).digest()[:10])
    digest[6] = 0x80 | (digest[6] & 0x0F)
    digest[8] = 0x80 | (digest[8] & 0x3F)
    return digest.hex()


@functools.lru_cache(maxsize=4096)
def _id_prefix(stream_id: str) -> str:
    k = stream_key(stream_id)
    return f"{k[:8]}-{k[8:12]}-{k[12:16]}-{k[16:20]}-"


def derived_id(stream_id: str, version: int) -> str:
    """The id of the event at ``version`` of a stream that brought none of its own (see the module)."""
    return f"{_id_prefix(stream_id)}{version:012x}"


def split_derived(event_id: str) -> tuple[str, int] | None:
    """``(stream key, version)`` of an id in :func:`derived_id`'s form; None for any other id."""
    if len(event_id) != 36 or event_id[14] != "8" or event_id[19] not in "89ab":
        return None
    h = event_id.replace("-", "")
    if len(h) != 32 or event_id[8] != "-" or event_id[13] != "-" or event_id[18] != "-" or event_id[23] != "-":
        return None
    try:
        version = int(h[20:], 16)
        int(h[:20], 16)
    except ValueError:
        return None
    return h[:20].lower(), version
