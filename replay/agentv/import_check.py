"""The import's validation pass: every result built and encoded as it will be written, and repeats resolved.

A bad line aborts the import here, before anything is written (or, with ``--skip-bad``, is left out).
What the pass builds is kept (:class:`Spool`, in a private temporary file, so memory stays flat)
and the writing pass appends it as it is: each source file is read, and each result built, once.
"""

from __future__ import annotations

import hashlib
import marshal
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from evalstore.replay.agentv import ImportedTest, ImportSource, SkippedLine, bad_line
from evalstore.replay.agentv.import_events import EventIds, RelativeSources, built
from evalstore.store.codec import canonical_json
from evalstore.store.events import LineSkipped, SourceRef, encode

_SUPERSEDED = "AgentV keeps the last result of a test and target (deduplicateByTestIdTarget)"


@dataclass
class Checked:
    tests: int
    skipped: int
    left_out: dict[tuple, str]
    """Results the writing pass leaves out (repeats, results that cannot be built), with the reason; by item_key."""
    started_at: str | None = None
    """The earliest ``start_time`` or row ``timestamp`` of the results, as UTC ISO 8601: when the AgentV run began."""
    spool: Spool | None = field(default=None, repr=False)
    """Every result and skipped line as built, in source order (closed by the caller)."""
    warnings: list[str] = field(default_factory=list)
    """The results' warnings, the first :data:`WARNINGS_KEPT` of them; ``warning_count`` counts them all."""
    warning_count: int = 0


WARNINGS_KEPT = 20


Encoded = tuple[str, str, int, str]
"""An event as ``EventStore.append_encoded`` takes it: (event id, type, schema version, payload JSON)."""


@dataclass
class Spooled:
    """One source item as the validation pass built it."""

    key: tuple | None
    """``item_key`` of a result; None for a skipped line."""
    source: SourceRef
    """As the run records it (relative to the imported path)."""
    first_n: int
    """The position (``EventIds.n``) of its first event."""
    events: list[Encoded]
    fields: list[dict | None]
    """Per event, what the projections read of it (``projections.read_fields``)."""
    blobs: dict[str, bytes]
    score: tuple[float, bool, str] | None
    """(score, passed, status) of a result."""


KIND_OF_TYPE = {
    "test_case_recorded": "case",
    "artifact_stored": "artifact",
    "transcript_recorded": "transcript",
    "verdict_recorded": "verdict",
    "test_scored": "scored",
    "line_skipped": "skip",
}
"""The ``EventIds`` kind each imported event's id was made with."""


def renumbered(item: Spooled, ids: EventIds) -> list[Encoded]:
    """The item's events with the ids they get when they start at ``ids.n + 1`` instead of
    ``item.first_n`` (an earlier result was superseded: it took one id, a skipped line's, not its
    events'). Ids appear only in the item's own events (its verdicts name its transcript)."""
    out = []
    old_to_new = {}
    for i, (event_id, type_, _, _) in enumerate(item.events):
        old_to_new[event_id] = ids.id(ids.n + 1 + i, KIND_OF_TYPE[type_])
    for event_id, type_, version, payload in item.events:
        for old, new in old_to_new.items():
            payload = payload.replace(old, new)
        out.append((old_to_new[event_id], type_, version, payload))
    ids.n += len(item.events)
    return out


class Spool:
    """The built items, in order, in a private temporary file.

    Written once and read once, front to back: each item is a length and its fields marshalled (only
    strings, numbers, bytes, tuples, lists and dicts; the file never outlives the process that wrote it).
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(buffering=1 << 20)  # noqa: SIM115 (closed by close(); removed then)

    def add(self, item: Spooled) -> None:
        data = marshal.dumps(
            (
                item.key,
                item.source.file,
                item.source.line,
                item.first_n,
                item.events,
                item.fields,
                item.blobs,
                item.score,
            )
        )
        self._file.write(len(data).to_bytes(8, "little"))
        self._file.write(data)

    def __iter__(self) -> Iterator[Spooled]:
        self._file.seek(0)
        while header := self._file.read(8):
            key, file, line, first_n, events, fields, blobs, score = marshal.loads(
                self._file.read(int.from_bytes(header, "little"))
            )
            # model_construct: the fields were a SourceRef's, validated when it was built
            yield Spooled(key, SourceRef.model_construct(file=file, line=line), first_n, events, fields, blobs, score)

    def close(self) -> None:
        self._file.close()


def item_key(item: ImportedTest) -> tuple:
    return (item.source.file, item.source.line, item.test_id, item.target, item.attempt)


PROGRESS_EVERY = 200


def check(
    source: ImportSource,
    within: RelativeSources,
    skip_bad: bool,
    progress: Callable[[str, int, int | None], None] | None = None,
    *,
    ids: EventIds | None = None,
    threshold: float | None = None,
) -> Checked:
    """The validation pass: every result is turned into its events exactly as the import will write them
    (so nothing can fail half-way through the writes), and repeated results are resolved.

    A repeat of (test, target, attempt) is what a resumed or re-run AgentV run leaves; like AgentV, the last
    one wins. Two results that only share the key (another suite, another variant) cannot both be held, and
    are a bad line.

    With ``ids`` (the run's, positioned after its first event) and ``threshold``, what is built is kept in
    ``Checked.spool`` for the writing pass; the caller closes it.
    """
    from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD

    repeats = _Repeats()
    spool = Spool() if ids is not None else None
    try:
        checked = _check_with(
            repeats,
            source,
            within,
            skip_bad,
            progress,
            ids or EventIds("check"),
            DEFAULT_THRESHOLD if threshold is None else threshold,
            spool,
        )
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    finally:
        repeats.close()
    checked.spool = spool
    return checked


def _check_with(
    repeats: _Repeats,
    source: ImportSource,
    within: RelativeSources,
    skip_bad: bool,
    progress: Callable[[str, int, int | None], None] | None,
    ids: EventIds,
    threshold: float,
    spool: Spool | None,
) -> Checked:
    tests = skipped = warning_count = 0
    left_out: dict[tuple, str] = {}
    warnings: list[str] = []

    def skip_line(line: SkippedLine) -> None:
        if spool is not None:
            ref = within(line.source)
            first = ids.n + 1
            event = LineSkipped(source=ref, reason=line.reason)
            data = canonical_json(encode(event))
            encoded = [(ids.next("skip"), event.type, event.schema_version, data)]
            spool.add(Spooled(None, ref, first, encoded, [None], {}, None))

    earliest: datetime | None = None
    for item in source.iter_tests(skip_bad):
        if isinstance(item, ImportedTest):
            if item.warnings:
                warning_count += len(item.warnings)
                warnings.extend(item.warnings[: WARNINGS_KEPT - len(warnings)])
            for moment in (_instant(item.start_time), _instant(item.raw_row.get("timestamp"))):
                if moment is not None and (earliest is None or moment < earliest):
                    earliest = moment
            start = ids.n
            encoded: list[Encoded] = []
            fields: list[dict | None] = []
            outcome = built(item, within, ids, threshold, skip_bad, check=True, encoded=encoded, fields=fields)
            if isinstance(outcome, SkippedLine):
                left_out[item_key(item)] = outcome.reason
                item = outcome
            else:
                earlier = repeats.earlier(item)
                if earlier is not None and not earlier[1]:
                    reason = left_out[item_key(item)] = (
                        f"test {item.test_id!r} (target {item.target!r}, attempt {item.attempt}) is also the result "
                        f"at {earlier[0].location} of another suite or variant; evalstore keeps one result per "
                        "test, target and attempt: import them separately"
                    )
                    ids.n = start  # left out: a skipped line, which takes one id
                    item = bad_line(item.source, reason, skip_bad)
                else:
                    if earlier is not None:
                        superseded = (earlier[0].file, earlier[0].line, item.test_id, item.target, item.attempt)
                        left_out[superseded] = f"superseded by {item.source.location}: {_SUPERSEDED}"
                        tests -= 1
                        skipped += 1
                    repeats.remember(item)
                    if spool is not None:
                        _, blobs, scored = outcome
                        spool.add(
                            Spooled(
                                item_key(item),
                                within(item.source),
                                start + 1,
                                encoded,
                                fields,
                                blobs,
                                (scored.score, scored.passed, scored.status),
                            )
                        )
        if isinstance(item, SkippedLine):
            skip_line(item)
            skipped += 1
        else:
            tests += 1
        if progress and (tests + skipped) % PROGRESS_EVERY == 0:
            progress("checking", tests + skipped, None)
    started_at = earliest.isoformat(timespec="microseconds") if earliest else None
    return Checked(tests, skipped, left_out, started_at, warnings=warnings, warning_count=warning_count)


def _instant(value: object) -> datetime | None:
    """An ISO 8601 time in UTC (a time without a zone is taken as UTC); anything else is no time."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _digest64(value: object) -> int:
    """A signed 64-bit digest (SQLite's INTEGER) of a small value's repr."""
    digest = hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _Repeats:
    """The results seen so far by (test, target, attempt): where each was and what it belonged to.

    Kept in a private temporary SQLite file, not a dict: an import streams files of any size, and even
    a hundred bytes per result would make memory grow with the file. Keys and identities are digests.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect("")  # "": a private on-disk temporary database, removed on close
        self._db.execute("CREATE TABLE seen (key INTEGER PRIMARY KEY, identity INTEGER, file TEXT, line INTEGER)")

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def _key(item: ImportedTest) -> int:
        return _digest64((item.test_id, item.target, item.attempt))

    @staticmethod
    def _identity(item: ImportedTest) -> int:
        return _digest64((item.suite, item.raw_row.get("variant"), item.raw_row.get("prompt_id")))

    def earlier(self, item: ImportedTest) -> tuple[SourceRef, bool] | None:
        """Where an earlier result with the same key was, and whether it had the same identity."""
        row = self._db.execute("SELECT identity, file, line FROM seen WHERE key = ?", (self._key(item),)).fetchone()
        if row is None:
            return None
        return SourceRef(file=row[1], line=row[2]), row[0] == self._identity(item)

    def remember(self, item: ImportedTest) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?)",
            (self._key(item), self._identity(item), item.source.file, item.source.line),
        )
