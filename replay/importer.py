"""``evalstore import``: AgentV results into the store as an imported run.

Two passes over the source: the first only validates (a bad line aborts before anything is written,
unless ``skip_bad``), the second streams tests into the store in batches. Memory stays flat: the
readers stream, and a batch is flushed by test count or by bytes. The run id and every event id are
derived from the source's digest, so importing the same bundle twice gives the same run, and an
import killed half-way finishes when run again.
"""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from store import EventStore, NewEvent
from store.codec import canonical_json, sha256_hex
from store.events import (
    ArtifactStored,
    Assertion,
    FileSnapshot,
    LineSkipped,
    RunStarted,
    SourceRef,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
    encode,
)

from . import __version__
from ._evalgraders import unique_names
from .agentv import ImportedTest, ImportSource, SkippedLine, bad_line, detect_format, read_results
from .errors import ReplayError
from .evalfile import load_eval
from .material import Tally
from .snapshot import snapshot_suite

BATCH_TESTS = 200
BATCH_BYTES = 32 * 1024 * 1024
DEFAULT_THRESHOLD = 0.8


@dataclass
class ImportOutcome:
    run_id: str
    format: str
    tests: int
    skipped: int
    already_imported: bool
    eval_path: str | None


def import_results(
    store: EventStore,
    path: str | Path,
    *,
    eval_path: str | Path | None = None,
    skip_bad: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportOutcome:
    path = Path(path)
    if not path.exists():
        raise ReplayError(f"{path}: no such file or directory")
    fmt = detect_format(path)
    source = read_results(path, fmt)
    run_id = f"imp-{source.source_digest[:16]}"
    existing = store.query("runs", run_id=run_id)
    if existing and existing[0]["status"] == "completed":
        return ImportOutcome(run_id, fmt, len(store.query("results", run_id=run_id)), 0, True, existing[0]["eval_path"])

    root = str(path.resolve())
    within = _RelativeSources(root)
    checked = _check(source, within, skip_bad)  # validation pass: raises on the first bad line
    tests, skipped = checked.tests, checked.skipped
    if tests == 0:
        raise ReplayError(f"{path}: no results to import")

    snapshot, blobs, eval_file, threshold = _eval_snapshot(eval_path, source.eval_path_hints, path)
    started = RunStarted(
        run_id=run_id,
        kind="imported",
        suite=source.suite,
        eval_path=eval_file,
        eval_snapshot=snapshot,
        threshold=threshold,
        source=SourceRef(file=root),
        source_format=fmt,
        tool_version=__version__,
    )
    ids = _EventIds(run_id)
    store.append(run_id, [NewEvent(started, ids.next("started"))], blobs=blobs)

    batch: list[NewEvent] = []
    batch_blobs: dict[str, bytes] = {}
    done = 0
    tally = Tally()
    for item in source.iter_tests(skip_bad):
        if isinstance(item, ImportedTest):
            reason = checked.left_out.get(_item_key(item))
            item = SkippedLine(item.source, reason) if reason else _built(item, within, ids, threshold, skip_bad, check=False)
        if isinstance(item, SkippedLine):
            batch.append(NewEvent(LineSkipped(source=within(item.source), reason=item.reason), ids.next("skip")))
            continue
        events, item_blobs, scored = item
        batch.extend(events)
        batch_blobs.update(item_blobs)
        tally.add(scored)
        done += 1
        if done % BATCH_TESTS == 0 or sum(len(b) for b in batch_blobs.values()) > BATCH_BYTES:
            store.append(run_id, batch, blobs=batch_blobs)
            batch, batch_blobs = [], {}
            if progress:
                progress(done)
    if batch:
        store.append(run_id, batch, blobs=batch_blobs)
    if progress:
        progress(done)
    store.append(run_id, [NewEvent(tally.completed(), ids.next("completed"))])
    return ImportOutcome(run_id, fmt, tests, skipped, False, eval_file)


_SUPERSEDED = "AgentV keeps the last result of a test and target (deduplicateByTestIdTarget)"
_Built = tuple[list[NewEvent], dict[str, bytes], TestScored]


@dataclass
class _Checked:
    tests: int
    skipped: int
    left_out: dict[tuple, str]
    """Results the writing pass leaves out (repeats, results that cannot be built), with the reason; by _item_key."""


def _item_key(item: ImportedTest) -> tuple:
    return (item.source.file, item.source.line, item.test_id, item.target, item.attempt)


def _where(source: SourceRef) -> str:
    return f"{source.file}:{source.line}" if source.line is not None else str(source.file)


def _check(source: ImportSource, within: _RelativeSources, skip_bad: bool) -> _Checked:
    """The validation pass: every result is turned into its events exactly as the import will write them
    (so nothing can fail half-way through the writes), and repeated results are resolved.

    A repeat of (test, target, attempt) is what a resumed or re-run AgentV run leaves; like AgentV, the last
    one wins. Two results that only share the key (another suite, another variant) cannot both be held, and
    are a bad line.
    """
    with closing(_Repeats()) as repeats:
        return _check_with(repeats, source, within, skip_bad)


def _check_with(repeats: _Repeats, source: ImportSource, within: _RelativeSources, skip_bad: bool) -> _Checked:
    ids = _EventIds("check")
    tests = skipped = 0
    left_out: dict[tuple, str] = {}
    for item in source.iter_tests(skip_bad):
        if isinstance(item, ImportedTest):
            built = _built(item, within, ids, DEFAULT_THRESHOLD, skip_bad, check=True)
            if isinstance(built, SkippedLine):
                left_out[_item_key(item)] = built.reason
                item = built
            else:
                earlier = repeats.earlier(item)
                if earlier is not None and not earlier[1]:
                    reason = left_out[_item_key(item)] = (
                        f"test {item.test_id!r} (target {item.target!r}, attempt {item.attempt}) is also the result "
                        f"at {_where(earlier[0])} of another suite or variant; evalstore keeps one result per "
                        "test, target and attempt: import them separately"
                    )
                    item = bad_line(item.source, reason, skip_bad)
                else:
                    if earlier is not None:
                        superseded = (earlier[0].file, earlier[0].line, item.test_id, item.target, item.attempt)
                        left_out[superseded] = f"superseded by {_where(item.source)}: {_SUPERSEDED}"
                        tests -= 1
                        skipped += 1
                    repeats.remember(item)
        if isinstance(item, SkippedLine):
            skipped += 1
        else:
            tests += 1
    return _Checked(tests, skipped, left_out)


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


def _built(
    item: ImportedTest, within: _RelativeSources, ids: _EventIds, threshold: float, skip_bad: bool, *, check: bool
) -> _Built | SkippedLine:
    """The events of one result; a result that cannot be built is a bad line. With ``check`` (the validation
    pass) the events are also encoded as the store will; the writing pass need not again, since every
    result that failed is left out by then (``_Checked.left_out``)."""
    start = ids.n
    events: list[NewEvent] = []
    blobs: dict[str, bytes] = {}
    try:
        scored = _test_events(item, within(item.source), ids, events, blobs, threshold)
        for event in events if check else ():
            canonical_json(encode(event.payload)).encode("utf-8")
    except (ValueError, UnicodeError) as exc:  # pydantic's ValidationError is a ValueError
        ids.n = start  # the next result gets the ids it would have had
        if isinstance(exc, ValidationError):
            error = exc.errors()[0]
            reason = f"{exc.title} field {'.'.join(map(str, error['loc']))}: {error['msg']}"
        else:
            reason = str(exc) or type(exc).__name__
        return bad_line(item.source, f"cannot be imported: {reason}", skip_bad)
    return events, blobs, scored


class _RelativeSources:
    """Sources as the run's events record them: relative to the imported path (see SourceRef)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._absolute: dict[str, str] = {}

    def __call__(self, source: SourceRef) -> SourceRef:
        if source.file is None:
            return source
        absolute = self._absolute.get(source.file)
        if absolute is None:
            absolute = self._absolute[source.file] = str(Path(source.file).resolve())
        return SourceRef(file=absolute, line=source.line).relative_to(self.root)


class _EventIds:
    """Deterministic event ids: the n-th event of an import is always the same id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.n = 0

    def next(self, kind: str) -> str:
        self.n += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstore:{self.run_id}:{self.n}:{kind}"))


def _eval_snapshot(
    eval_path: str | Path | None, hints: list[Path], source: Path
) -> tuple[list[FileSnapshot], dict[str, bytes], str | None, float]:
    candidates = [Path(eval_path)] if eval_path else []
    if eval_path and not candidates[0].is_file():
        raise ReplayError(f"{eval_path}: eval file not found (--eval)")
    base = source if source.is_dir() else source.parent
    for hint in hints:
        for c in ([hint] if hint.is_absolute() else [base / hint, Path.cwd() / hint]):
            candidates.append(c)
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            suite = load_eval(candidate)
        except ReplayError:
            if eval_path:
                raise
            continue
        snaps, blobs = snapshot_suite(suite)
        return snaps, blobs, suite.path, suite.threshold
    return [], {}, None, DEFAULT_THRESHOLD


def _test_events(
    item: ImportedTest,
    source: SourceRef,
    ids: _EventIds,
    batch: list[NewEvent],
    blobs: dict[str, bytes],
    threshold: float,
) -> TestScored:
    key = {"test_id": item.test_id, "target": item.target, "attempt": item.attempt}
    if item.input or item.expected_output is not None or item.criteria or item.metadata:
        # A case event only when the source says something about the case (results JSONL often does not).
        case = TestCaseRecorded(
            **key, input=item.input, expected_output=item.expected_output, criteria=item.criteria, metadata=item.metadata
        )
        batch.append(NewEvent(case, ids.next("case")))
    by_path: dict[str, ArtifactStored] = {}
    for f in item.files:
        data = None
        if f.resolved is not None:
            try:
                data = f.resolved.read_bytes()
            except OSError:
                data = None
        if data is not None:
            digest = sha256_hex(data)
            blobs[digest] = data
            artifact = ArtifactStored(**key, path=f.path, media_type=f.media_type, sha256=digest, size=len(data))
        else:
            artifact = ArtifactStored(
                **key, path=f.path, media_type=f.media_type, status="missing", reason="file not found when imported"
            )
        by_path.setdefault(f.path, artifact)
        batch.append(NewEvent(artifact, ids.next("artifact")))
    messages_sha = None
    if item.messages is not None:
        messages = [_annotate(m, by_path) for m in item.messages]
        data = canonical_json(messages).encode("utf-8")
        messages_sha = sha256_hex(data)
        blobs[messages_sha] = data
    transcript_id = ids.next("transcript")
    batch.append(
        NewEvent(
            TranscriptRecorded(
                **key,
                messages_sha256=messages_sha,
                output_text=item.output_text,
                token_usage=item.token_usage,
                cost_usd=item.cost_usd,
                duration_ms=item.duration_ms,
                start_time=item.start_time,
                end_time=item.end_time,
                file_changes=item.file_changes,
                workspace_path=item.workspace_path,
                source=source,
            ),
            transcript_id,
        )
    )
    # Two graders of one name (AgentV allows it) become name, name-2, as the eval file parser names them.
    for v, name in zip(item.verdicts, unique_names([v.name for v in item.verdicts])):
        prompt_sha = None
        if v.rendered_prompt is not None:
            prompt = canonical_json(v.rendered_prompt).encode("utf-8")
            prompt_sha = sha256_hex(prompt)
            blobs[prompt_sha] = prompt
        batch.append(
            NewEvent(
                VerdictRecorded(
                    **key,
                    grader=name,
                    grader_type=v.type,
                    score=v.score,
                    verdict=v.verdict,
                    status="execution_error" if v.verdict == "skip" else "ok",
                    assertions=[
                        Assertion(text=str(a.get("text", "")), passed=bool(a.get("passed")), evidence=a.get("evidence"))
                        for a in v.assertions
                    ],
                    weight=v.weight,
                    details=v.details,
                    evidence=[v.reason] if v.reason else [],
                    origin="imported",
                    transcript_event_id=transcript_id,
                    source=source,
                    rendered_prompt_sha256=prompt_sha,
                    grader_target=v.grader_target,
                    token_usage=v.token_usage,
                ),
                ids.next("verdict"),
            )
        )
    passed = item.passed if item.passed is not None else item.score >= threshold
    status = item.execution_status or ("ok" if passed else "quality_failure")
    scored = TestScored(
        **key,
        score=item.score,
        passed=passed,
        status=status if status in ("ok", "quality_failure", "execution_error") else "execution_error",
        threshold=threshold,
        error=item.error,
        origin="imported",
        source=source,
        produced_at=item.raw_row.get("timestamp") if isinstance(item.raw_row.get("timestamp"), str) else None,
        row_fields=item.row_fields,
    )
    batch.append(NewEvent(scored, ids.next("scored")))
    return scored


def _annotate(message: dict, by_path: dict[str, ArtifactStored]) -> dict:
    """File blocks of an imported transcript point at the captured bytes (or say they are missing)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "file" and block.get("path") in by_path:
            art = by_path[block["path"]]
            block = {**block, "sha256": art.sha256, "status": art.status}
            if art.reason:
                block["reason"] = art.reason
        blocks.append(block)
    return {**message, "content": blocks}
