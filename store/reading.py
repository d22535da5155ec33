"""What a store's reads make of the rows their queries return, whichever way the queries ran: through
SQLAlchemy (:class:`~evalstore.store.recorder.EventStore`, SQLite and PostgreSQL) or through the standard
library's sqlite3 (:class:`~evalstore.store.sqlite_reads.SqliteReads`). Each rule is here once; the two
backends differ only in how they ask for the rows.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from evalstore.store import records
from evalstore.store.envelope import StoredEvent

T = TypeVar("T")

IN_CHUNK = 500
"""Values bound in one statement's ``IN (...)`` list: under SQLite's bound-parameter limit."""
HOLDERS = 200
"""Records found by subquery (the last record at or before an event) per statement."""

SCHEMA_REVISION = "0005"
"""The Alembic revision this evalstore's tables are at (the newest in migrations/versions/). Opening a
store compares its ``alembic_version`` with this, so a store that is current opens without loading
Alembic; tests/test_migrations.py checks it is the migrations' head."""

RESULT_COLUMNS = ("test_id", "target", "attempt", "score", "passed", "status", "error", "origin", "seq")
VERDICT_COLUMNS = ("grader", "grader_type", "score", "verdict", "status", "seq")


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` a ``size`` at a time: what one statement binds."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def type_needles(types: Iterable[str] | None) -> list[bytes] | None:
    """What a record's plain body holds when it holds an event of one of ``types``: the type is a field of
    its own, between separators nothing else holds, so a record without one is skipped unparsed."""
    return None if types is None else [f"{records.FIELD_END}{t}{records.FIELD_END}".encode() for t in types]


def stream_slice(
    events: Iterable[StoredEvent], wanted: frozenset[str] | None, after: int, upto: int | None, limit: int | None
) -> Iterator[StoredEvent]:
    """The events of a stream's records (in order) a read asks for: ``after < stream_version <= upto``,
    of the ``wanted`` types, at most ``limit``."""
    left = limit
    if left is not None and left <= 0:
        return
    for ev in events:
        if ev.stream_version <= after or (upto is not None and ev.stream_version > upto):
            continue
        if wanted is not None and ev.type not in wanted:
            continue
        yield ev
        if left is not None:
            left -= 1
            if left == 0:
                return


def payloads(
    rows: Iterable[Sequence[Any]],
    plain: Callable[[Sequence[Any]], bytes],
    wanted: frozenset[str],
    after: int,
    upto: int | None,
) -> Iterator[tuple[str, int, str, str]]:
    """``(type, schema_version, payload JSON, recorded_at)`` of the events of ``wanted`` types in a stream's
    record rows (:data:`records.ROW`), versions ``after < version <= upto``; ``plain`` inflates a row."""
    last = upto if upto is not None else float("inf")
    for row in rows:
        _, items = records.parse_body(plain(row))
        version, recorded_at = row[2], row[4]
        for i, (_, type_, schema_version, payload) in enumerate(items):
            if type_ in wanted and after < version + i <= last:
                yield type_, schema_version, payload, recorded_at


def result_ends(seqs: list[int], starts: list[tuple[int, int]], every: int) -> list[int]:
    """The stream versions of every ``every``-th of a run's result seqs (in order) and of its last, given
    ``(seq, version)`` of the run's records in version order."""
    picked = sorted({*seqs[every - 1 :: every], *seqs[-1:]})
    if not picked:
        return []
    firsts = [row[0] for row in starts]
    ends = []
    for seq in picked:
        first, version = starts[bisect.bisect_right(firsts, seq) - 1]
        ends.append(version + seq - first)
    return ends


def grouped_verdicts(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[tuple, list[tuple]]]:
    """Rows of results outer-joined to their verdicts (:data:`RESULT_COLUMNS` then :data:`VERDICT_COLUMNS`,
    in result order) as ``(result, verdicts)``."""
    width = len(RESULT_COLUMNS)
    current: tuple | None = None
    verdicts: list[tuple] = []
    for row in rows:
        result = tuple(row[:width])
        if current is None or result[:3] != current[:3]:
            if current is not None:
                yield current, verdicts
            current, verdicts = result, []
        if row[width] is not None:
            verdicts.append(tuple(row[width:]))
    if current is not None:
        yield current, verdicts


def counts(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``result_counts`` rows by run id, the counts as integers (a sum over no row is NULL)."""
    return {
        row["run_id"]: {**row, "tests": int(row["tests"] or 0), "not_regradable": int(row["not_regradable"] or 0)}
        for row in rows
    }


def find_events(
    event_ids: Iterable[str],
    *,
    seqs_of: Callable[[Sequence[str]], Iterable[tuple[str, int]]],
    at: Callable[[Iterable[int]], dict[int, StoredEvent]],
    stream_numbers: Callable[[], Iterable[tuple[int, str]]],
    at_versions: Callable[[Sequence[tuple[int, int]]], Iterable[StoredEvent]],
    streams_by_key: dict[str, int],
) -> dict[str, StoredEvent]:
    """Events by id: an id of its own through the ``event_ids`` projection (``seqs_of``: its rows for some
    ids, :data:`IN_CHUNK` at a time; ``at``: events by seq), a derived id (:func:`records.derived_id`) read where
    it points (``at_versions``: the events of the records holding these ``(stream number, version)``;
    ``stream_numbers``: every stream's ``(number, id)``, read once into ``streams_by_key``, the caller's)."""
    ids = list(dict.fromkeys(event_ids))
    found: dict[str, StoredEvent] = {}
    seqs: dict[int, str] = {}
    for part in chunks(ids):
        seqs.update((seq, event_id) for event_id, seq in seqs_of(part))
    for seq, ev in at(seqs).items():
        if ev.event_id == seqs[seq]:
            found[ev.event_id] = ev
    places: dict[tuple[str, int], str] = {}  # (stream key, version) -> the derived id asked for
    numbered: list[tuple[int, int]] = []
    for event_id in ids:
        split = records.split_derived(event_id) if event_id not in found else None
        if split is None:
            continue
        if split[0] not in streams_by_key:
            for stream, stream_id in stream_numbers():
                streams_by_key[records.stream_key.__wrapped__(stream_id)] = stream
        if (number := streams_by_key.get(split[0])) is not None:
            places[split] = event_id
            numbered.append((number, split[1]))
    for ev in at_versions(numbered) if numbered else ():
        wanted = places.get((records.stream_key(ev.stream_id), ev.stream_version))
        if wanted is not None and ev.event_id == wanted:
            found[wanted] = ev
    return found
