"""``evalstore import LOG.eval``: an Inspect AI log (``.eval`` or ``.json``) as an imported run.

One run per log; one result per sample and epoch (test id = sample id, attempt = epoch, target = the
model). The log is read a sample at a time, in ``read_eval_log_samples``'s order (``reading.py``: an
``.eval`` log a chunk at a time through one opened zip, in forked workers where there are cores), and each
sample's events are built and encoded into a temporary spool before anything is written, so a log that
cannot be read leaves the store as it was; the spool is then appended in batches. The run id and every
event id derive from the log's bytes: importing the same log twice gives the same run.

Per sample: the case (its input as messages, the target as the expected output, a list target one message
per target, its metadata), the
transcript (the messages in the content model, the output's text, the model's usage, the error),
for each score its edits (``ScoreEdited``, from ``Score.history``) then its verdicts (``scores.py``),
and the test's score (the mean of its verdicts, as evalstore scores a test). The sample as Inspect
wrote it is kept as a blob (``TranscriptRecorded.source_record_sha256``), its attachments as blobs of
their own, and the log's header as a blob named in the run's snapshot (role ``inspect_header``), so an
export writes the log back.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from evalstore import __version__
from evalstore.replay.agentv.import_check import Renames, Spool, Spooled, placed
from evalstore.replay.agentv.import_check import record as spool_record
from evalstore.replay.agentv.import_events import EventIds
from evalstore.replay.agentv.import_mask import masked_value
from evalstore.replay.agentv.import_write import write_spool
from evalstore.replay.agentv.sidecars import inside, real_path
from evalstore.replay.content import messages_json
from evalstore.replay.errors import ImportFormatError, ReplayError
from evalstore.replay.evalfile.parser import DEFAULT_THRESHOLD
from evalstore.replay.grading.errored import UNSCORED
from evalstore.replay.grading.scoring import score_recorded
from evalstore.replay.inspect import inspect_log_api
from evalstore.replay.inspect.messages import content_messages, resolved, text_of
from evalstore.replay.inspect.reading import (
    Chunk,
    EvalSamples,
    check_document,
    check_members,
    log_samples,
    read_or_refuse,
    sample_chunks,
)
from evalstore.replay.inspect.scores import GRADER_TYPE, edits_of, verdicts_of
from evalstore.replay.jsontext import decode_problem, without_lone_surrogates
from evalstore.replay.processes.forked import in_order, worker_count
from evalstore.replay.targetsfile.redaction import SecretMask, environment_mask, redact
from evalstore.store import EventStore, NewEvent, StoreOrOpener, completed_run, opened
from evalstore.store.blobs import PREFIX_BYTES
from evalstore.store.codec import canonical_json, sha256_hex
from evalstore.store.events import (
    FileSnapshot,
    RunStarted,
    ScoreEdited,
    SourceRef,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
    encode,
)
from evalstore.store.projections import read_fields

HEADER_ROLE = "inspect_header"
"""The run snapshot's entry holding the log's header (``EvalLog`` without samples) as Inspect wrote it."""
LOG_SUFFIXES = (".eval", ".json")
HEADER_DEPTH = 256
"""The deepest nesting of a JSON log's header read: Inspect writes a few levels. inspect_ai scans the header
with ijson, whose key paths grow with the depth, so a log nested 100,000 deep took a minute to refuse."""
Progress = Callable[[str, int, "int | None"], None]


class _ResultKey(TypedDict):
    test_id: str
    target: str | None
    attempt: int


@dataclass
class InspectImport:
    run_id: str
    path: str
    format: str
    tests: int
    already_imported: bool
    task: str | None = None
    model: str | None = None
    warnings: list[str] = field(default_factory=list)


NOT_LOGS = frozenset({"logs.json", "eval-set.json"})
"""The ``.json`` files Inspect writes beside its logs that are not logs: the log folder's manifest
(``write_log_dir_manifest``'s ``logs.json``) and an eval set's record (``eval-set.json``)."""


def _in_folder(path: Path) -> bool:
    """Whether a file of a folder is a log to import: an ``.eval`` or ``.json`` file, not one of Inspect's
    files that are not logs (:data:`NOT_LOGS`), nor a hidden one (a log being written: ``.NAME.eval``)."""
    return (
        path.suffix in LOG_SUFFIXES and path.name not in NOT_LOGS and not path.name.startswith(".") and path.is_file()
    )


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is an Inspect log by its name (``.eval``; ``.json``, which AgentV never writes) or
    a folder of them (:func:`log_files`)."""
    if path.is_dir():
        return any(True for _ in _logs_in(path))
    return path.suffix in LOG_SUFFIXES


def _logs_in(folder: Path) -> Iterator[Path]:
    """A folder's logs: its ``.eval`` and ``.json`` files (:func:`_in_folder`), and the ``.eval`` files of its
    subfolders, at any depth, as Inspect's ``list_eval_logs`` finds them (an eval set's, a task's own folder).
    Not the ``.json`` files of subfolders: an AgentV run folder is full of them (``timing.json``,
    ``grading.json``), and none is a log. Nor what is in a hidden folder."""
    for child in folder.iterdir():
        if _in_folder(child):
            yield child
    for child in folder.rglob("*.eval"):
        relative = child.relative_to(folder).parts
        if len(relative) > 1 and not any(part.startswith(".") for part in relative) and child.is_file():
            yield child


def log_files(path: Path) -> tuple[list[Path], list[str]]:
    """The logs at ``path``: the file (read wherever it leads: the user named it), or a folder's logs
    (:func:`_logs_in`), by their path in it, and a warning for each left out: one whose real path is outside
    the folder (a symlink leading elsewhere), taken as absent as an AgentV run folder's files are
    (``agentv/sidecars.inside``): what a folder holds is data, not permission to read the disk."""
    if not path.is_dir():
        return [path], []
    real_path.cache_clear()  # resolved afresh for each import: a link may have moved since the last
    found: list[Path] = []
    outside: list[Path] = []
    for log in sorted(_logs_in(path)):
        (found if inside(log, path) else outside).append(log)
    skipped = [
        f"{log}: not imported: it leads outside {path} (a symlink); import it by its own path" for log in outside
    ]
    if not found:
        also = f" ({len(outside)} leading outside it, not followed: import one by its own path)" if outside else ""
        raise ImportFormatError(
            f"{path}: no Inspect AI logs (.eval, .json) in this folder or .eval in its subfolders{also}"
        )
    return found, skipped


def import_logs(store: StoreOrOpener, path: str | Path, progress: Progress | None = None) -> list[InspectImport]:
    """Import every log at ``path`` (a log, or a folder of logs: one run per log), in two passes: every log
    is read through and built first (:func:`_checked`), so a log that cannot be read, anywhere in a folder,
    writes nothing and, given an opener (no store yet), makes no store; then each is written. The built
    samples wait in a spool on disk; only one log's spool is kept through the first pass (the one of the
    most samples: the most work saved), so the disk a folder's import takes stays what its largest log's
    takes (twice, at most), and the others are built again when their turn to be written comes. The logs
    a folder import left out are warned about with its first log."""
    path = Path(path)
    if not path.exists():
        raise ReplayError(f"{path}: no such file or directory")
    logs, skipped = log_files(path)
    checked: list[_Checked] = []
    try:
        for log_path in logs:
            checked.append(_checked(store, log_path, progress))
            _keep_largest(checked)
        store = opened(store)
        done = [_written(store, log, progress) for log in checked]
    finally:
        for log in checked:
            log.close()
    done[0].warnings[:0] = skipped
    return done


def import_log(store: StoreOrOpener, path: Path, progress: Progress | None = None) -> InspectImport:
    """Import one log: read through and built, then written."""
    log = _checked(store, path, progress)
    try:
        return _written(opened(store), log, progress)
    finally:
        log.close()


@dataclass
class _Checked:
    """A log read through and built (an import's first pass): what writing it takes."""

    outcome: InspectImport
    digest: str
    """The log's SHA-256 as read when checked (its run's id derives from it)."""
    started: NewEvent | None = None
    header: tuple[str, bytes] = ("", b"")
    """The header blob's digest and bytes."""
    spool: Spool | None = None
    """The samples built; None for a log already imported, and for one to build again when written."""

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None


def _keep_largest(checked: list[_Checked]) -> None:
    """Of the spools the first pass has built, only the one of the most samples kept (the last built and the
    one kept before it compared: there is never a third)."""
    spooled = [log for log in checked if log.spool is not None]
    if len(spooled) > 1:
        min(spooled, key=lambda log: log.outcome.tests).close()


def _checked(store: StoreOrOpener, path: Path, progress: Progress | None) -> _Checked:
    """The first pass over one log: its members (``.eval``) or size and header (``.json``) checked before
    inspect_ai reads it, then every sample read, built and encoded into a spool. Writes nothing, and opens
    no store: ``completed_run`` looks only in one that exists."""
    api = inspect_log_api()
    fmt = "inspect-json" if path.suffix == ".json" else "inspect-eval"
    digest = _file_digest(path)
    run_id = f"imp-{digest[:16]}"
    if fmt == "inspect-json":
        check_document(path)
        _check_header(path)
    else:
        check_members(path)
    header = read_or_refuse(path, lambda: api.read_eval_log(str(path), header_only=True))
    spec = header.eval
    if completed_run(store, run_id) is not None:
        tests = len(opened(store).query("results", run_id=run_id))
        return _Checked(InspectImport(run_id, str(path), fmt, tests, True, spec.task, spec.model), digest)

    # What the log echoes of evalstore's secret-looking variables is stored as their references, as an
    # AgentV import stores it (``agentv/import_mask``): the header (a model's arguments) and every sample.
    mask = environment_mask()
    header_bytes = mask.data(header.model_dump_json(exclude={"samples"}).encode("utf-8"))
    header_sha = sha256_hex(header_bytes)
    started = RunStarted(
        run_id=run_id,
        kind="imported",
        suite=spec.task,
        eval_snapshot=[FileSnapshot(role=HEADER_ROLE, path=path.name, sha256=header_sha, size=len(header_bytes))],
        target_name=spec.model,
        target=_jsonable(redact(_eval_spec(json.loads(spec.model_dump_json())))),
        threshold=DEFAULT_THRESHOLD,
        source=SourceRef(file=str(path.resolve())),
        source_format=fmt,
        source_started_at=_utc(spec.created),
        source_status=None if header.status == "success" else header.status,
        tool_version=__version__,
    )
    ids = EventIds(run_id)
    run_started_id = ids.next("started")
    spool = Spool()
    try:
        tests, warnings = _check(api, path, header, header_sha, ids, spool, progress, mask)
        if tests == 0:
            raise ReplayError(f"{path}: the log has no samples to import")
    except BaseException:
        spool.close()
        raise
    outcome = InspectImport(run_id, str(path), fmt, tests, False, spec.task, spec.model, warnings)
    return _Checked(outcome, digest, NewEvent(started, run_started_id), (header_sha, header_bytes), spool)


def _written(store: EventStore, log: _Checked, progress: Progress | None) -> InspectImport:
    """The second pass over one log: its run written from its spool (built again where the first pass did
    not keep it, and refused if the log's bytes changed since they were checked)."""
    done = log.outcome
    if done.already_imported:
        return done
    if completed_run(store, done.run_id) is not None:  # a log of the same bytes, written just before
        tests = len(store.query("results", run_id=done.run_id))
        return InspectImport(done.run_id, done.path, done.format, tests, True, done.task, done.model)
    if log.spool is None:
        again = _checked(store, Path(done.path), progress)
        if again.digest != log.digest:
            again.close()
            raise ImportFormatError(
                f"{done.path}: changed since it was checked (is it still being written?); the logs before it "
                "were imported: import it again once it is complete"
            )
        log.spool, again.spool = again.spool, None
    assert log.started is not None and log.spool is not None  # a log not already imported has both
    header_sha, header_bytes = log.header
    store.append(done.run_id, [log.started], blobs={header_sha: header_bytes})
    write_spool(store, done.run_id, log.spool, EventIds(done.run_id, n=1), tests=done.tests, progress=progress)
    log.close()
    return done


def _check_header(path: Path) -> None:
    """Refuse a JSON log whose header (what comes before its ``samples``) inspect_ai's reader cannot take:
    nested deeper than :data:`HEADER_DEPTH` (its ijson key paths grow with the depth: a log nested
    100,000 deep took a minute to refuse), or holding an integer of more digits than Python converts
    (ijson's C parser then fails inside its callback and the process crashes: a segmentation fault), or
    that is not JSON. Read once with ijson's pure-Python parser, which raises instead."""
    import ijson  # type: ignore[import-untyped]  # inspect_ai's own dependency: there when the log API is

    from evalstore.replay.agentv.export import JSON_FORMAT

    depth = 0
    refused = None
    with path.open("rb") as fh:
        if fh.read(64).startswith(b'{"format":"%s"' % JSON_FORMAT.encode()):
            raise ImportFormatError(
                f"{path}: an evalstore JSON export (`export --format json`), written for other tools to read: "
                "to move runs between stores, export them with `--format bundle` and import that"
            )
        fh.seek(0)
        try:
            for event, value in ijson.get_backend("python").basic_parse(fh):
                if event in ("start_map", "start_array"):
                    depth += 1
                    if depth > HEADER_DEPTH:
                        refused = f"JSON nested more than {HEADER_DEPTH} levels deep"
                        break
                elif event in ("end_map", "end_array"):
                    depth -= 1
                elif event == "map_key" and depth == 1 and value == "samples":
                    break
        except (ijson.JSONError, ValueError) as exc:
            # Refused here: what this parser cannot read, inspect_ai's may crash on (an integer too long
            # to convert shows as the symbol it could not parse, with that error as its context).
            cause = exc.__context__ if isinstance(exc.__context__, ValueError) else exc
            refused = "invalid JSON: " + decode_problem(cause)[:200]
    if refused:
        rows = "; result rows, one JSON object a line? name the file .jsonl" if _rows_named_json(path) else ""
        raise ImportFormatError(f"{path}: not an Inspect AI log inspect_ai can read ({refused}{rows})")


def _rows_named_json(path: Path) -> bool:
    """Whether a ``.json`` file inspect_ai cannot read holds rows of one JSON object a line (an AgentV
    results file saved under a log's name): its first line is a whole object, and a second follows."""
    with path.open("rb") as fh:
        first, second = fh.readline(1 << 20), fh.readline(1 << 20)
    try:
        return isinstance(json.loads(first), dict) and second.lstrip().startswith(b"{")
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past what Python reads
        return False


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _check(
    api: Any,
    path: Path,
    header: Any,
    header_sha: str,
    ids: EventIds,
    spool: Spool,
    progress: Progress | None,
    mask: SecretMask,
) -> tuple[int, list[str]]:
    """Every sample built and encoded into ``spool``, in the log's order; (samples, warnings)."""
    tests = 0
    seen: set[tuple[str, int]] = set()
    warnings: list[str] = []
    chunks = sample_chunks(api, path, header)
    unreadable: Counter[str] = Counter()
    for key, data, renames, first_n, values in _pieces(api, path, header, header_sha, ids, chunks, mask):
        unreadable.update(values)
        if key in seen:
            raise ImportFormatError(f"{path}: sample {key[0]} epoch {key[1]} appears twice")
        seen.add(key)
        spool.add_record(*placed(data, renames, first_n, ids))
        tests += 1
        if progress and tests % 200 == 0:
            progress("checking", tests, None)
    named = sum(len(chunk) for chunk in chunks)
    if tests and named > tests:  # a cancelled eval's, or members removed: said, not taken silently
        warnings.append(
            f"{path}: {named - tests} of the {named} samples the log names are not in it (the eval's status: "
            f"{header.status}); the {tests} it holds were imported"
        )
    elif header.status != "success":  # an eval that ended in an error holds every sample, and said nothing
        error = getattr(getattr(header, "error", None), "message", None)
        warnings.append(
            f"{path}: the eval did not succeed (the eval's status: {header.status}"
            + (f": {' '.join(str(error).split())[:200]}" if error else "")
            + f"); the {tests} samples it holds were imported as they are"
        )
    if unreadable:
        shown = ", ".join(f"{value!r} ({n})" for value, n in unreadable.most_common(5))
        more = f" and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
        n = unreadable.total()
        warnings.append(
            f"{path}: {n} score value{'s' if n != 1 else ''} Inspect cannot read as a number, counted 0 as in "
            f"Inspect's metrics (kept as written in the verdicts' details): {shown}{more}"
        )
    return tests, warnings


_Piece = tuple[tuple[str, int], bytes, Renames, int, tuple[str, ...]]
"""A sample built: its (id, epoch), its spool record, its events' ids (``import_check.placed``), the
position its ids were made for, and the score values in it that Inspect reads as 0 (not numbers)."""


def _piece(sample: Any, model: str, ids: EventIds, log_sha: str, mask: SecretMask) -> _Piece:
    # What json.loads(sample.model_dump_json()) gives (non-finite floats as floats, keys as strings), made
    # without writing the sample as JSON and parsing it again (two of a sample's dozen milliseconds).
    start = ids.n
    try:
        return _built(masked_value(sample.model_dump(mode="json"), mask), model, ids, log_sha)
    except UnicodeEncodeError:
        # A lone surrogate (JSON's "\ud800", which Inspect's reader keeps): UTF-8 cannot hold it, so it
        # becomes U+FFFD, as in an AgentV import (``agentv/wire.loads``). Looked for only when a sample fails.
        ids.n = start
        record = without_lone_surrogates(sample.model_dump(mode="json"))
        return _built(masked_value(record, mask), model, ids, log_sha)


def _built(record: dict[str, Any], model: str, ids: EventIds, log_sha: str) -> _Piece:
    key = (str(record["id"]), int(record["epoch"]))
    first_n = ids.n + 1
    _UNREADABLE.clear()
    events, blobs, score = sample_events(record, model, ids, log_sha)
    encoded = []
    fields = []
    for event in events:
        payload = encode(event.payload)
        encoded.append(
            (event.event_id or "", event.payload.type, event.payload.schema_version, canonical_json(payload))
        )
        fields.append(read_fields(event.payload.type, payload))
    item = Spooled(key, (None, None), first_n, encoded, fields, blobs, score)
    return key, spool_record(item), item.renames(), first_n, tuple(_UNREADABLE)


def _pieces(
    api: Any, path: Path, header: Any, header_sha: str, ids: EventIds, chunks: list[Chunk], mask: SecretMask
) -> Iterator[_Piece]:
    """Each sample built, in the log's order: here (with the run's ids, where ``ids`` stands when the
    sample's turn comes), or, for an ``.eval`` log on a machine with more than one core, a chunk of
    samples at a time by forked workers (``processes.forked``), with ids of their own that the caller
    replaces (``import_check.placed``): reading and building a sample is most of an import's work."""
    model = header.eval.model
    count = worker_count(len(chunks)) if chunks else 0
    if not count:
        builder = EventIds(ids.run_id)
        for sample in log_samples(api, path, chunks):
            builder.n = ids.n
            yield _piece(sample, model, builder, header_sha, mask)
        return
    job = _Job(path, model, ids.run_id, header_sha, mask)
    with closing(in_order(_build_chunk, list(enumerate(chunks)), count, job, start=_open_log)) as parts:
        for pieces in parts:  # a worker's error (a log inspect_ai cannot read) is raised here, in order
            yield from pieces


@dataclass(frozen=True)
class _Job:
    """What a worker needs (``processes.forked``: inherited, not sent)."""

    path: Path
    model: str
    run_id: str
    log_sha: str
    mask: SecretMask


_WORKER_LOG: list[EvalSamples] = []
"""The log as a worker opened it (:func:`_open_log`), for every chunk it builds."""


def _open_log(job: _Job) -> None:
    """In a worker, once: the log's zip opened for its chunks (its own file offset; it ends with the
    worker), and the cyclic garbage collector left to :func:`_build_chunk`: everything the worker
    inherited (inspect_ai's classes and schemas among them, 160,000 objects) frozen out of its passes,
    which ran every 10,000 of a sample's allocations, freed nothing, and wrote to the inherited pages
    (copying them): some 7% of a sample's time (bench/inspect_log.py's samples)."""
    gc.disable()
    gc.freeze()
    _WORKER_LOG.append(EvalSamples(inspect_log_api(), job.path))


def _build_chunk(job: _Job, part: tuple[int, Chunk]) -> list[_Piece]:
    """In a worker: the samples of one chunk, built with the chunk's own ids; then one pass of the
    collector over what the chunk left (a sample and its pieces are freed by reference counting: the
    pass finds next to nothing, but memory stays flat whatever a log's samples hold)."""
    number, chunk = part
    ids = EventIds(f"{job.run_id}:part@{number}")
    try:
        return [_piece(sample, job.model, ids, job.log_sha, job.mask) for sample in _WORKER_LOG[0].chunk(chunk)]
    finally:
        gc.collect()


SAMPLE_FORMAT = "evalstore: an Inspect AI sample (EvalSample as JSON, attachments apart) of the log whose header is"
"""The opening of a stored sample: ``{"format": SAMPLE_FORMAT, "log": HEADER_SHA256, "sample": {...}}``."""


def sample_blob(record: dict[str, Any], log_sha: str) -> bytes:
    """A sample record as stored: inside a wrapper that opens with the same bytes for every sample of a
    log (the format and the log header's digest, longer than the store's dictionary prefix), so the store
    compresses each sample against an earlier one of the same log (``store/blobs.py``'s dictionaries):
    samples of a task share most of their structure (events, spans, system prompt, scorers)."""
    opening = json.dumps({"format": SAMPLE_FORMAT, "log": log_sha}, separators=(",", ":"))[:-1]
    assert len(opening) >= PREFIX_BYTES  # what the store compares blobs' openings by
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return f'{opening},"sample":{body}}}'.encode()


def sample_record(data: bytes) -> dict[str, Any]:
    """The sample record in a stored sample blob (:func:`sample_blob`; a record stored bare, as earlier
    imports stored it, as it is)."""
    stored = json.loads(data)
    return stored["sample"] if stored.get("format") == SAMPLE_FORMAT else stored


def sample_events(
    record: dict[str, Any], model: str, ids: EventIds, log_sha: str = ""
) -> tuple[list[NewEvent], dict[str, bytes], tuple[float, bool, str]]:
    """One sample (as ``EvalSample.model_dump_json`` writes it) as its events, blobs and (score, passed,
    status); ``log_sha``: the digest of the log's header blob, which the stored sample names."""
    key: _ResultKey = {"test_id": str(record["id"]), "target": model, "attempt": int(record["epoch"])}
    events: list[NewEvent] = []
    blobs: dict[str, bytes] = {}
    attachments: dict[str, str] = record.pop("attachments", None) or {}
    refs = []
    for name, content in attachments.items():
        data = content.encode("utf-8")
        digest = sha256_hex(data)
        blobs[digest] = data
        refs.append({"id": name, "sha256": digest, "size": len(data)})
    sample_bytes = sample_blob(record, log_sha)
    sample_sha = sha256_hex(sample_bytes)
    blobs[sample_sha] = sample_bytes

    events.append(
        NewEvent(
            TestCaseRecorded(
                **key,
                input=_case_input(content_messages(_input_messages(record.get("input")), attachments)),
                expected_output=expected_output(record.get("target")),
                metadata=_jsonable(record.get("metadata") or {}),
                graders=[{"name": name, "type": GRADER_TYPE} for name in (record.get("scores") or {})],
            ),
            ids.next("case"),
        )
    )
    messages = content_messages(record.get("messages") or [], attachments)
    messages_bytes = _messages_json(messages)
    messages_sha = sha256_hex(messages_bytes)
    blobs[messages_sha] = messages_bytes
    error = record.get("error")
    output = record.get("output") or {}
    transcript_id = ids.next("transcript")
    events.append(
        NewEvent(
            TranscriptRecorded(
                **key,
                messages_sha256=messages_sha,
                output_text=_completion(output, attachments),
                token_usage=_usage(record.get("model_usage") or {}, model),
                cost_usd=_cost(record.get("model_usage") or {}, model),
                duration_ms=record["total_time"] * 1000 if record.get("total_time") is not None else None,
                start_time=_utc(record.get("started_at")),
                end_time=_utc(record.get("completed_at")),
                status="error" if error else "ok",
                error=error.get("message") if error else None,
                source_record_sha256=sample_sha,
                attachments=refs,
            ),
            transcript_id,
        )
    )
    entries = []
    for name, score in (record.get("scores") or {}).items():
        for edit in edits_of(score):
            events.append(
                NewEvent(
                    ScoreEdited(
                        **key,
                        grader=name,
                        edit=edit.edit,
                        value=_jsonable(edit.value),
                        previous_value=_jsonable(edit.previous_value),
                        changes=_jsonable(edit.changes),
                        author=edit.author,
                        reason=edit.reason,
                        edited_at=_utc(edit.edited_at),
                        provenance_metadata=_jsonable(edit.metadata),
                    ),
                    ids.next("edit"),
                )
            )
        edits = len(edits_of(score))
        for v in verdicts_of(name, score.get("value"), _to_float()):
            explanation = score.get("explanation")
            # The explanation is the verdict's evidence, not kept twice; the scorer is named apart only
            # where the grader is not its name (a dict or list value: SCORER/KEY), the edits where any.
            details: dict[str, Any] = {
                "value": _jsonable(v.value),
                "answer": score.get("answer"),
                "reason": score.get("reason"),
                "metadata": _jsonable(score.get("metadata")),
                "edits": edits or None,
            }
            if v.key is not None:
                details["scorer"] = name
                details["key"] = v.key
            events.append(
                NewEvent(
                    VerdictRecorded(
                        **key,
                        grader=v.grader,
                        grader_type=GRADER_TYPE,
                        score=v.score,
                        verdict=v.verdict,  # type: ignore[arg-type]
                        status=UNSCORED if v.verdict == "skip" else "ok",
                        details={k: d for k, d in details.items() if d is not None},
                        evidence=[explanation] if explanation else [],
                        origin="imported",
                        transcript_event_id=transcript_id,
                    ),
                    ids.next("verdict"),
                )
            )
            entries.append(
                {
                    "name": v.grader,
                    "score": min(1.0, max(0.0, v.score)),
                    "verdict": v.verdict,
                    "status": UNSCORED if v.verdict == "skip" else "ok",
                }
            )
    # The test's score is the mean of its verdicts', each clamped to [0, 1]: a value Inspect reads outside it
    # (a mark out of ten, a dict's `len` key) is no fraction of a pass, and a test score past 1 breaks
    # thresholds and the viewer's histogram; the verdict keeps the value as read, and its pass/fail
    # (score_to_verdict) is the clamped score's. Unscored verdicts are left out; a sample with no other
    # score is one with no scores.
    outcome = score_recorded(entries, DEFAULT_THRESHOLD)
    if error:
        score, passed, status, why = (outcome.score if outcome else 0.0), False, "execution_error", error.get("message")
    elif outcome is None:  # no scores (scoring off): nothing to pass on
        score, passed, status, why = 0.0, False, "quality_failure", None
    else:
        score, passed, status, why = outcome.score, outcome.passed, outcome.status, outcome.error
    events.append(
        NewEvent(
            TestScored(
                **key,
                score=score,
                passed=passed,
                status=status,  # type: ignore[arg-type]
                threshold=DEFAULT_THRESHOLD,
                error=why,
                origin="imported",
                produced_at=_utc(record.get("completed_at")),
                row_fields=_row_fields(record),
                graders=[str(e["name"]) for e in entries],  # what an attestation proves complete
            ),
            ids.next("scored"),
        )
    )
    return events, blobs, (score, passed, status)


def expected_output(target: Any) -> Any:
    """A sample's target as a test's expected output: a string as it is, a list (Inspect's several
    accepted answers) one assistant message per target. Stored as a bare list of strings it would be
    read as AgentV reads an eval file's list, one message of text segments (``content.expected_messages``),
    and a grader would see one answer where Inspect has several."""
    if isinstance(target, list) and target:
        return [{"role": "assistant", "content": _jsonable(t)} for t in target]
    return _jsonable(target)


def _row_fields(record: dict[str, Any]) -> dict[str, str]:
    """What marks the sample, kept as labels: its uuid, an invalidation (who, why, when), retries, a limit hit."""
    out = {}
    if record.get("uuid"):
        out["inspect_uuid"] = str(record["uuid"])
    invalidation = record.get("invalidation")
    if invalidation:
        out["invalidated_by"] = str(invalidation.get("author"))
        out["invalidated_at"] = str(_utc(invalidation.get("timestamp")))
        if invalidation.get("reason"):
            out["invalidated_reason"] = str(invalidation["reason"])
    if record.get("error_retries"):
        out["error_retries"] = str(len(record["error_retries"]))
    limit = record.get("limit")
    if limit:
        out["limit"] = f"{limit.get('type')}: {limit.get('limit')}"
    return out


_FLOAT: list[Callable[[Any], float]] = []
_UNREADABLE: list[str] = []
"""The score values Inspect read as 0 while the sample being built was read (:class:`_Unreadable`)."""
UNREADABLE = "Unable to convert value to float: "


class _Unreadable(logging.Filter):
    """Inspect's ``value_to_float`` logs a line for each value it cannot read as a number (it counts 0): on a
    log of 10,000 samples scored "maybe", 10,000 lines naming no log, written by the workers as they build.
    Kept instead, and said once per log with the values (:func:`_check`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(UNREADABLE):
            _UNREADABLE.append(message[len(UNREADABLE) :])
            return False
        return True


def _to_float() -> Callable[[Any], float]:
    """Inspect's own ``value_to_float()`` (made once), its line per unreadable value kept (:class:`_Unreadable`)."""
    if not _FLOAT:
        from inspect_ai.scorer import _metric, value_to_float

        _metric.logger.addFilter(_Unreadable())
        _FLOAT.append(value_to_float())
    return _FLOAT[0]


def _input_messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value or [])


def _case_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input as a test's input: the messages without their ``metadata`` (an Inspect message's id,
    source and own metadata, which the stored sample keeps), a key no eval file's message has: a replay
    of suite-level assertions takes the run's cases as its tests and warned of it once per message (a
    chat input's system and user messages: two lines a sample)."""
    return [{k: v for k, v in m.items() if k != "metadata"} for m in messages]


def _completion(output: dict[str, Any], attachments: dict[str, str]) -> str | None:
    """``ModelOutput.completion``, what Inspect's scorers scored: the log's own field, which a solver may
    have set apart from the model's message (``basic_agent`` and ``react`` set it to the submitted answer,
    the message keeping the text that came with the submit call); the first choice's text where it is
    empty (as Inspect fills it) or absent."""
    if output.get("completion"):
        return str(resolved(output["completion"], attachments))
    choices = output.get("choices") or []
    if not choices:
        return None
    content = (choices[0].get("message") or {}).get("content")
    return text_of(resolved(content, attachments))


def _usage(usage: dict[str, Any], model: str) -> dict[str, Any] | None:
    """The model under test's usage in AgentV's ``token_usage`` shape."""
    own = usage.get(model)
    if not own:
        return None
    out = {"input": own.get("input_tokens"), "output": own.get("output_tokens")}
    if own.get("input_tokens_cache_read"):
        out["cached"] = own["input_tokens_cache_read"]
    if own.get("reasoning_tokens"):
        out["reasoning"] = own["reasoning_tokens"]
    return out


def _cost(usage: dict[str, Any], model: str) -> float | None:
    own = usage.get(model) or {}
    return own.get("total_cost")


def _eval_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """What the run keeps of the eval spec (the whole header is in the snapshot): the task, its args and
    file, the model and its config, model roles, solver, scorers, revision, packages, the eval's config."""
    keep = (
        "task",
        "task_version",
        "task_file",
        "task_registry_name",
        "task_args",
        "solver",
        "solver_args",
        "model",
        "model_base_url",
        "model_args",
        "model_generate_config",
        "model_roles",
        "config",
        "revision",
        "packages",
        "scorers",
        "eval_id",
        "run_id",
        "tags",
        "metadata",
    )
    return {k: _pruned(spec[k]) for k in keep if spec.get(k) not in (None, {}, [])}


def _pruned(value: Any) -> Any:
    """``value`` without its None entries (a generate config is mostly unset fields)."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """``value`` as canonical JSON can hold it: a non-finite float (Inspect's unscored NaN) as its name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _messages_json(messages: list[dict[str, Any]]) -> bytes:
    """The transcript blob (``content.messages_json``, keys in their own order: a tool call's arguments as
    the model gave them) of messages made from the sample record, whose keys are all strings
    (``model_dump(mode="json")`` makes them so, as ``_jsonable`` would): as they are, unless they hold a
    non-finite float (the encoder refuses one), walked only then (the walk over a sample's messages was a
    tenth of building its events)."""
    try:
        return messages_json(messages)
    except ValueError:
        return messages_json(_jsonable(messages))


def _utc(value: Any) -> str | None:
    """An Inspect timestamp as UTC ISO 8601 (as the store writes times)."""
    if not value:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")
