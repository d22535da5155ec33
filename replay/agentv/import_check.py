"""The import's validation pass: every result built and encoded as it will be written, and repeats resolved.

A bad line aborts the import here, before anything is written (or, with ``--skip-bad``, is left out).
What the pass builds is kept (:class:`Spool`, in a private temporary file, so memory stays flat)
and the writing pass appends it as it is: each source file is read, and each result built, once.

Building is most of an import's work, and each result is built on its own: a source read a line at a
time (a results file, a run's index) is cut into parts of :data:`PART_LINES` lines, built by worker
processes forked from this one where the platform can fork (Linux) and the machine has more than one
core (``processes.forked``). Each part is built with ids of its own (:func:`part_ids`), which are replaced by the
run's as the parts come back (:func:`placed`); everything that depends on the order of results (repeats, the run's ids,
the counts) is decided here, in the source's order, as the parts come back.
"""

from __future__ import annotations

import hashlib
import itertools
import marshal
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from evalstore.replay.agentv import ImportedTest, ImportSource, SkippedLine, bad_line
from evalstore.replay.agentv.import_events import EventIds, RelativeSources, built
from evalstore.replay.agentv.import_mask import masked
from evalstore.replay.agentv.records import Span
from evalstore.replay.agentv.wire import line_spans
from evalstore.replay.processes.forked import in_order, worker_count
from evalstore.store.blobs import FileBlob
from evalstore.store.codec import canonical_json
from evalstore.store.events import LineSkipped, SourceRef, encode

if TYPE_CHECKING:
    from evalstore.replay.targetsfile.redaction import SecretMask

_SUPERSEDED = "AgentV keeps the last result of a test and target (deduplicateByTestIdTarget)"
SUPERSEDED_BY = "superseded by "
"""How the reason a result left out for a later one begins (what ``import`` counts apart from bad lines)."""

PART_LINES = 1000
"""Source lines a worker builds at a time."""


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
    superseded: int = 0
    """Of ``skipped``, the results a later row of the same test, target and attempt replaced."""
    refused: dict[str, int] = field(default_factory=dict)
    """Files the results name that exist but were not read, counted by what would let an import read them
    (``ImportedFile.allow_with``)."""
    watched: set[str] = field(default_factory=set)
    """The test ids of ``check``'s ``watch`` that the results hold."""


WARNINGS_KEPT = 20


Encoded = tuple[str, str, int, str]
"""An event as ``EventStore.append_batches`` takes it: (event id, type, schema version, payload JSON)."""

Place = tuple[str | None, int | None]
"""A :class:`SourceRef`'s file and line: most items are passed on without one being built for them."""


def _source_ref(place: Place) -> SourceRef:
    # model_construct: the fields were a SourceRef's, validated when it was built
    return SourceRef.model_construct(file=place[0], line=place[1])


@dataclass
class Spooled:
    """One source item as the validation pass built it."""

    key: tuple | None
    """``item_key`` of a result; None for a skipped line."""
    place: Place
    """Its source's file and line as the run records them (relative to the imported path)."""
    first_n: int
    """The position (``EventIds.n``) its events' ids were made for; 0: ids of a part (:func:`part_ids`)."""
    events: list[Encoded]
    fields: list[dict | None]
    """Per event, what the projections read of it (``projections.read_fields``)."""
    blobs: Mapping[str, bytes | FileBlob]
    """A large file as a :class:`~evalstore.store.blobs.FileBlob` (read a chunk at a time when stored)."""
    score: tuple[float, bool, str] | None
    """(score, passed, status) of a result."""

    @property
    def source(self) -> SourceRef:
        return _source_ref(self.place)

    def renames(self) -> Renames:
        """What :func:`placed` needs to give its events other ids."""
        return [(event_id, KIND_OF_TYPE[type_]) for event_id, type_, _, _ in self.events]


KIND_OF_TYPE = {
    "test_case_recorded": "case",
    "artifact_stored": "artifact",
    "transcript_recorded": "transcript",
    "verdict_recorded": "verdict",
    "test_scored": "scored",
    "line_skipped": "skip",
    "score_edited": "edit",
}
"""The ``EventIds`` kind each imported event's id was made with."""

Renames = list[tuple[str, str]]
"""An item's events as :func:`placed` renumbers them: (the id it was built with, its ``EventIds`` kind)."""


def part_ids(run_id: str, span: Span) -> EventIds:
    """The ids a part's events are built with (:class:`PartIds`)."""
    return PartIds(f"{run_id}:part@{span[0]}")


class PartIds(EventIds):
    """Placeholder ids, which the run's replace (:func:`placed`) before anything is stored: unique
    in the run (a digest of the part's name, then the event's place in the part) and never one of a
    run's ids (uuid5's variant bits are 10, theirs 00), so a replacement can never meet one. Made
    without hashing each: every one is replaced, and hashing them was a few percent of building a result.

    An item built with them records ``first_n`` 0, so it is always renumbered (:func:`placed`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        h = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()
        self._stem = f"{h[:8]}-{h[8:12]}-{h[12:16]}-0{h[17:20]}-"

    def id(self, n: int, kind: str) -> str:
        return f"{self._stem}{n:012x}"


def _first_n(ids: EventIds) -> int:
    """The ``first_n`` an item whose ids start after ``ids.n`` records."""
    return 0 if isinstance(ids, PartIds) else ids.n + 1


class Spool:
    """The built items, in order, in a private temporary file.

    Written once and read once, front to back: each item is a length, its ``first_n`` and its
    :func:`record` (the item's fields marshalled: only strings, numbers, bytes, tuples, lists and dicts;
    the file never outlives the process that wrote it).
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(buffering=1 << 20)  # noqa: SIM115 (closed by close(); removed then)

    def add(self, item: Spooled) -> None:
        self.add_record(record(item), item.first_n)

    def add_record(self, data: bytes, first_n: int) -> None:
        """An item as :func:`record` made it (in this process or a worker), its ids made for ``first_n``."""
        self._file.write(len(data).to_bytes(8, "little") + first_n.to_bytes(8, "little"))
        self._file.write(data)

    def records(self) -> Iterator[tuple[bytes, int]]:
        """Each item's :func:`record` and ``first_n``, in order."""
        self._file.seek(0)
        while header := self._file.read(16):
            yield self._file.read(int.from_bytes(header[:8], "little")), int.from_bytes(header[8:], "little")

    def __iter__(self) -> Iterator[Spooled]:
        for data, first_n in self.records():
            yield spooled(data, first_n)

    def close(self) -> None:
        self._file.close()


def record(item: Spooled) -> bytes:
    """An item as the spool holds it (its ``first_n`` apart: :func:`placed` changes that, not the record)."""
    return marshal.dumps(
        (
            item.key,
            *item.place,
            item.events,
            item.fields,
            # marshal holds plain values: a file blob as (path, size), never its bytes
            {d: (b.path, b.size) if isinstance(b, FileBlob) else b for d, b in item.blobs.items()},
            item.score,
        )
    )


def placed(data: bytes, renames: Renames, first_n: int, ids: EventIds) -> tuple[bytes, int]:
    """An item's :func:`record`, with ids made for ``first_n``, given the run's ids for its place (the
    next ``ids`` gives, one per event of ``renames``), and that place's ``first_n``; ``ids`` past them.

    An item built in a part is placed as the parts come back, while the workers build the next ones,
    not in the writing pass, which only one process can do; the writing pass places again only what
    follows a result superseded later. An event's id appears in the record as its own and where the
    item's other events name it (a verdict its transcript), in their payloads and projection fields:
    the record's bytes are rewritten, not its values, since an id is 36 ASCII characters either way
    (marshal writes a string's bytes as they are, after its length) and no other part of a record
    can hold one (each names its run's source digest, which no source can hold). Replaced one after the
    other, in order, they never meet an id made here: a run's ids only ever move to earlier places (a
    result left out takes one id instead of its events'), and a part's are never a run's."""
    first = ids.n + 1
    if first_n != first:
        for n, (old, kind) in enumerate(renames, first):
            data = data.replace(old.encode("ascii"), ids.id(n, kind).encode("ascii"))
    ids.n += len(renames)
    return data, first


def spooled(data: bytes, first_n: int) -> Spooled:
    """An item from its :func:`record` and ``first_n``."""
    key, file, line, events, fields, blobs, score = marshal.loads(data)
    blobs = {d: FileBlob(*b) if isinstance(b, tuple) else b for d, b in blobs.items()}
    return Spooled(key, (file, line), first_n, events, fields, blobs, score)


def item_key(item: ImportedTest) -> tuple:
    # No target and an empty one are one result's, as the store keys results (_Repeats.key).
    return (item.source.file, item.source.line, item.test_id, item.target or "", item.attempt)


PROGRESS_EVERY = 200


@dataclass
class _Piece:
    """What building one source item gave, as the order-dependent part of the pass needs it.

    A result (``key`` set, ``failed`` None) with its spool record; a result that cannot be built
    (``failed``: why) or a line the reader left out (``key`` None), with a skipped line's record."""

    record: bytes
    renames: Renames
    """Its events' ids, as :func:`placed` replaces them (one each)."""
    first_n: int
    """The position its events' ids were made for (``Spooled.first_n``)."""
    place: Place
    """Its source's file and line as the source gave them (absolute), for messages."""
    key: tuple | None = None
    repeat: tuple[int, int] | None = None
    """(:meth:`_Repeats` key, identity) digests of a result."""
    failed: str | None = None
    warnings: list[str] = field(default_factory=list)
    earliest: datetime | None = None
    refused: list[str] = field(default_factory=list)
    """What would let an import read each file of the result it refused (``ImportedFile.allow_with``)."""

    @property
    def source(self) -> SourceRef:
        return _source_ref(self.place)


def _piece(
    item: ImportedTest | SkippedLine,
    within: RelativeSources,
    ids: EventIds,
    threshold: float,
    skip_bad: bool,
    mask: SecretMask | None = None,
) -> _Piece:
    """Build one source item (in this process or a worker): its events, encoded, into a spool record.

    Every item of a source passes here, so here it is masked (``import_mask``): whatever it stores, its
    events, their blobs and the digests naming them, is then of the masked text (``verify`` stays exact)."""
    if mask:
        item = masked(item, mask)
    if isinstance(item, SkippedLine):
        return _skip_piece(item, within, ids)
    first = _first_n(ids)
    encoded: list[Encoded] = []
    fields: list[dict | None] = []
    outcome = built(item, within, ids, threshold, skip_bad, check=True, encoded=encoded, fields=fields, mask=mask)
    moments = [m for m in (_instant(item.start_time), _instant(item.raw_row.get("timestamp"))) if m is not None]
    earliest = min(moments) if moments else None
    if isinstance(outcome, SkippedLine):
        piece = _skip_piece(outcome, within, ids)
        piece.key, piece.failed, piece.warnings, piece.earliest = (
            item_key(item),
            outcome.reason,
            item.warnings,
            earliest,
        )
        return piece
    _, blobs, score = outcome
    ref = within(item.source)
    spooled = Spooled(
        item_key(item),
        (ref.file, ref.line),
        first,
        encoded,
        fields,
        blobs,
        score,
    )
    return _Piece(
        record(spooled),
        spooled.renames(),
        first,
        (item.source.file, item.source.line),
        key=spooled.key,
        repeat=(_Repeats.key(item), _Repeats.identity(item)),
        warnings=item.warnings,
        earliest=earliest,
        refused=[f.allow_with for f in item.files if f.allow_with is not None],
    )


def _skip_piece(line: SkippedLine, within: RelativeSources, ids: EventIds) -> _Piece:
    ref = within(line.source)
    first = _first_n(ids)
    event = LineSkipped(source=ref, reason=line.reason)
    encoded = [(ids.next("skip"), event.type, event.schema_version, canonical_json(encode(event)))]
    item = Spooled(None, (ref.file, ref.line), first, encoded, [None], {}, None)
    return _Piece(record(item), item.renames(), first, (line.source.file, line.source.line))


def check(
    source: ImportSource,
    within: RelativeSources,
    skip_bad: bool,
    progress: Callable[[str, int, int | None], None] | None = None,
    *,
    ids: EventIds | None = None,
    threshold: float | None = None,
    workers: int | None = None,
    mask: SecretMask | None = None,
    watch: frozenset[str] = frozenset(),
) -> Checked:
    """The validation pass: every result is turned into its events exactly as the import will write them
    (so nothing can fail half-way through the writes), and repeated results are resolved.

    A repeat of (test, target, attempt) is what a resumed or re-run AgentV run leaves; like AgentV, the last
    one wins. Two results that only share the key (another suite, another variant) cannot both be held, and
    are a bad line.

    With ``ids`` (the run's, positioned after its first event) and ``threshold``, what is built is kept in
    ``Checked.spool`` for the writing pass; the caller closes it. ``workers``: processes building parts of
    the source at once (default one per core; 1 builds everything in this process). ``mask``: what every
    item is masked with before it is built (``import_mask``). ``watch``: test ids to tell apart (a few of the
    suite's), those the results hold given in ``Checked.watched``.
    """
    from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD

    ids = ids or EventIds("check")
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    spool = Spool()
    pass_ = _Pass(ids, within, skip_bad, progress, spool, watch)
    try:
        for part in _parts(source, within, ids, threshold, skip_bad, workers, mask):
            pass_.take_part(part)
    except BaseException:
        spool.close()
        raise
    finally:
        pass_.repeats.close()
    checked = pass_.checked()
    checked.spool = spool
    return checked


def _parts(
    source: ImportSource,
    within: RelativeSources,
    ids: EventIds,
    threshold: float,
    skip_bad: bool,
    workers: int | None,
    mask: SecretMask | None,
) -> Iterator[Iterable[_Piece]]:
    """Each source item built, in the source's order, a part at a time: here (with the run's ids, where
    ``ids`` stands when the item's turn comes), or by forked workers (``processes.forked``)."""
    spans = line_spans(source.lines, PART_LINES) if source.lines is not None else []
    count = worker_count(len(spans), workers)
    if not count:
        builder = EventIds(ids.run_id)

        def built() -> Iterator[_Piece]:
            for item in source.iter_tests(skip_bad):
                builder.n = ids.n
                yield _piece(item, within, builder, threshold, skip_bad, mask)

        # Each built as it is taken (its ids are where the ones before it leave ``ids``), a part at a time.
        pieces = built()
        for first in pieces:
            yield itertools.chain([first], itertools.islice(pieces, PART_LINES - 1))
        return
    job = _Job(source, within, ids.run_id, threshold, skip_bad, mask)
    with closing(in_order(_build_part, spans, count, job)) as parts:
        for packed in parts:  # a worker's error (a bad line) is raised here, in the source's order
            yield list(_unpacked(packed))


@dataclass(frozen=True)
class _Job:
    """What a worker needs (``processes.forked``: inherited, not sent)."""

    source: ImportSource
    within: RelativeSources
    run_id: str
    threshold: float
    skip_bad: bool
    mask: SecretMask | None


def _build_part(job: _Job, span: Span) -> bytes:
    """In a worker: the pieces of one part of the source, :func:`_packed`."""
    ids = part_ids(job.run_id, span)
    return _packed(
        _piece(item, job.within, ids, job.threshold, job.skip_bad, job.mask)
        for item in job.source.iter_tests(job.skip_bad, span)
    )


def _packed(pieces: Iterable[_Piece]) -> bytes:
    """Pieces as a worker sends them back: their fields as plain values, marshalled, one object a part. Pickled
    as they are (a pydantic model, a datetime, a dataclass each), a part of 1,000 rubric results cost its
    worker 14 ms to pickle and this process 14 ms to unpickle, holding its GIL (bench/import.py)."""
    return marshal.dumps(
        [
            (
                p.record,
                p.renames,
                p.first_n,
                *p.place,
                p.key,
                p.repeat,
                p.failed,
                p.warnings,
                p.earliest.isoformat() if p.earliest is not None else None,
                p.refused,
            )
            for p in pieces
        ]
    )


def _unpacked(data: bytes) -> Iterator[_Piece]:
    """The pieces :func:`_packed` sent."""
    for record, renames, first_n, file, line, key, repeat, failed, warnings, earliest, refused in marshal.loads(data):
        moment = datetime.fromisoformat(earliest) if earliest is not None else None
        yield _Piece(record, renames, first_n, (file, line), key, repeat, failed, warnings, moment, refused)


class _Pass:
    """The order-dependent part of the validation pass: repeats, the run's ids, the counts, the spool."""

    def __init__(
        self,
        ids: EventIds,
        within: RelativeSources,
        skip_bad: bool,
        progress: Callable[[str, int, int | None], None] | None,
        spool: Spool,
        watch: frozenset[str] = frozenset(),
    ) -> None:
        self.ids, self.within, self.skip_bad, self.progress, self.spool = ids, within, skip_bad, progress, spool
        self.watch = watch
        self.watched: set[str] = set()
        self.repeats = _Repeats()
        self.tests = self.skipped = self.warning_count = self.superseded = 0
        self.left_out: dict[tuple, str] = {}
        self.warnings: list[str] = []
        self.earliest: datetime | None = None
        self.refused: dict[str, int] = {}

    def take_part(self, part: Iterable[_Piece]) -> None:
        """A part's pieces, in order; those of a list (built by the workers) looked up at once."""
        if isinstance(part, list):
            self.repeats.prefetch([piece.repeat[0] for piece in part if piece.repeat is not None])
        for piece in part:
            self.take(piece)
        self.repeats.flush()

    def take(self, piece: _Piece) -> None:
        if piece.warnings:
            self.warning_count += len(piece.warnings)
            self.warnings.extend(piece.warnings[: WARNINGS_KEPT - len(self.warnings)])
        if piece.earliest is not None and (self.earliest is None or piece.earliest < self.earliest):
            self.earliest = piece.earliest
        if piece.key is not None and piece.failed is not None:
            self.left_out[piece.key] = piece.failed
        if piece.key is None or piece.failed is not None:  # a skipped line
            self._keep(piece.record, piece.renames, piece.first_n)
            self.skipped += 1
        else:
            assert piece.repeat is not None
            earlier = self.repeats.earlier(piece.repeat)
            if earlier is not None and not earlier[1]:
                test_id, target, attempt = piece.key[2:]
                named = f"target {target!r}" if target else "no target"
                reason = self.left_out[piece.key] = (
                    f"test {test_id!r} ({named}, attempt {attempt}) is also the result "
                    f"at {_absolute(earlier[0])} of another suite or variant; evalstore keeps one result per "
                    "test, target and attempt: import them separately"
                )
                line = bad_line(piece.source, reason, self.skip_bad)
                skipped = self._skipped(line)
                self._keep(record(skipped), skipped.renames(), skipped.first_n)
                self.skipped += 1
            else:
                if earlier is not None:
                    superseded = (earlier[0].file, earlier[0].line, *piece.key[2:])
                    self.left_out[superseded] = f"{SUPERSEDED_BY}{_absolute(piece.source)}: {_SUPERSEDED}"
                    self.tests -= 1
                    self.skipped += 1
                    self.superseded += 1
                self.repeats.remember(piece.repeat, piece.place)
                self._keep(piece.record, piece.renames, piece.first_n)
                self.tests += 1
                for allow_with in piece.refused:
                    self.refused[allow_with] = self.refused.get(allow_with, 0) + 1
                if piece.key[2] in self.watch:
                    self.watched.add(piece.key[2])
        if self.progress and (self.tests + self.skipped) % PROGRESS_EVERY == 0:
            self.progress("checking", self.tests + self.skipped, None)

    def _keep(self, data: bytes, renames: Renames, first_n: int) -> None:
        self.spool.add_record(*placed(data, renames, first_n, self.ids))

    def _skipped(self, line: SkippedLine) -> Spooled:
        """A result left out here: a skipped line, which takes one id."""
        ref = self.within(line.source)
        event = LineSkipped(source=ref, reason=line.reason)
        first = self.ids.n + 1
        encoded = [(self.ids.id(first, "skip"), event.type, event.schema_version, canonical_json(encode(event)))]
        return Spooled(None, (ref.file, ref.line), first, encoded, [None], {}, None)

    def checked(self) -> Checked:
        started_at = self.earliest.isoformat(timespec="microseconds") if self.earliest else None
        return Checked(
            self.tests,
            self.skipped,
            self.left_out,
            started_at,
            warnings=self.warnings,
            warning_count=self.warning_count,
            superseded=self.superseded,
            refused=self.refused,
            watched=self.watched,
        )


def _absolute(source: SourceRef) -> str:
    """Where a result was, in a message kept with the run: its file whatever folder it was imported from."""
    return source.model_copy(update={"file": os.path.abspath(source.file)}).location if source.file else source.location


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
    A part of the source is looked up in one query (:meth:`prefetch`) and written in one
    (:meth:`flush`): a query per result was a tenth of the validation pass's main thread.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect("")  # "": a private on-disk temporary database, removed on close
        self._db.execute("CREATE TABLE seen (key INTEGER PRIMARY KEY, identity INTEGER, file TEXT, line INTEGER)")
        self._part: dict[int, tuple[int, str | None, int | None] | None] = {}
        """The keys of the part being taken, with what the table and the part so far hold of each."""
        self._remembered: dict[int, tuple[int, str | None, int | None]] = {}

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def key(item: ImportedTest) -> int:
        return _digest64(item_key(item)[2:])  # (test id, target, attempt)

    @staticmethod
    def identity(item: ImportedTest) -> int:
        prompt = item.raw_row.get("prompt")
        # AgentV HEAD's rows name their prompt as prompt.id (the formats reference, section 1), others prompt_id.
        prompt_id = prompt.get("id") if isinstance(prompt, dict) else item.raw_row.get("prompt_id")
        return _digest64((item.suite, item.raw_row.get("variant"), prompt_id))

    def prefetch(self, keys: list[int]) -> None:
        """Look up a part's keys at once, before its results are taken."""
        self._part = dict.fromkeys(keys)
        unique = list(self._part)
        for at in range(0, len(unique), _LOOKUP_KEYS):
            chunk = unique[at : at + _LOOKUP_KEYS]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, identity, file, line FROM seen WHERE key IN ({marks})"
            for key, identity, file, line in self._db.execute(query, chunk):
                self._part[key] = (identity, file, line)

    def earlier(self, repeat: tuple[int, int]) -> tuple[SourceRef, bool] | None:
        """Where an earlier result with the same key was, and whether it had the same identity."""
        if repeat[0] in self._part:
            row = self._part[repeat[0]]
        else:
            row = self._db.execute("SELECT identity, file, line FROM seen WHERE key = ?", (repeat[0],)).fetchone()
        if row is None:
            return None
        return SourceRef(file=row[1], line=row[2]), row[0] == repeat[1]

    def remember(self, repeat: tuple[int, int], place: Place) -> None:
        self._part[repeat[0]] = self._remembered[repeat[0]] = (repeat[1], place[0], place[1])

    def flush(self) -> None:
        """Write what was remembered since the last flush."""
        self._db.executemany(
            "INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?)", [(k, *v) for k, v in self._remembered.items()]
        )
        self._remembered.clear()
        self._part = {}


_LOOKUP_KEYS = 500
"""Keys a lookup names at most (SQLite's oldest limit is 999 parameters)."""
