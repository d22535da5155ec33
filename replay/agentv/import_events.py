"""One imported result as the events (and blobs) an import appends for it.

Both passes of an import build them the same way (``built``): the validation pass to know that every
result can be stored, the writing pass to store it. Event ids are deterministic (``EventIds``), and
sources are recorded relative to the imported path (``RelativeSources``, see ``SourceRef``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from pydantic import ValidationError

from evalstore.replay.agentv import ImportedTest, SkippedLine, bad_line
from evalstore.replay.agentv.file_access import max_file_bytes
from evalstore.replay.content import messages_json
from evalstore.replay.evalfile.graders import unique_names
from evalstore.replay.grading.turn_verdicts import stopped_turn
from evalstore.replay.regular_files import read_regular
from evalstore.store import NewEvent
from evalstore.store.blobs import CHUNK_BYTES, FileBlob, blob_size, file_digest, is_large_size, read_pieces
from evalstore.store.codec import canonical_json, canonical_json_bytes, sha256_hex
from evalstore.store.events import (
    ArtifactStored,
    Assertion,
    DomainEvent,
    ExecutionStatus,
    SourceRef,
    TestCaseRecorded,
    TestScored,
    TranscriptRecorded,
    VerdictRecorded,
    encode,
)
from evalstore.store.plain_payloads import NotPlain, plain_payload
from evalstore.store.projections import read_fields
from evalstore.store.records import derived_id

if TYPE_CHECKING:
    from evalstore.replay.targetsfile.redaction import SecretMask

Score = tuple[float, bool, str]
"""(score, passed, status) of a result."""
Built = tuple[list[NewEvent], dict[str, bytes | FileBlob], Score]
_EXECUTION_STATUSES: tuple[ExecutionStatus, ...] = ("ok", "quality_failure", "execution_error")


class _ResultKey(TypedDict):
    """The fields every event of one imported result starts with."""

    test_id: str
    target: str | None
    attempt: int


def built(
    item: ImportedTest,
    within: RelativeSources,
    ids: EventIds,
    threshold: float,
    skip_bad: bool,
    *,
    check: bool,
    encoded: list[tuple[str, str, int, str]] | None = None,
    fields: list[dict | None] | None = None,
    mask: SecretMask | None = None,
) -> Built | SkippedLine:
    """The events of one result; a result that cannot be built is a bad line. With ``check`` (the validation
    pass) the events are also encoded as the store will, into ``encoded`` when given
    (``EventStore.append_encoded``'s tuples), and what the projections read of each into ``fields``; the
    writing pass need not again, since every result that failed is left out by then (``Checked.left_out``).
    ``mask``: what the files the result names are masked with as they are read (``import_mask``; the
    result itself comes masked)."""
    start = ids.n
    out: list[tuple[str, str, int, str]] = []
    out_fields: list[dict | None] = []
    blobs: dict[str, bytes | FileBlob] = {}
    fast = _plain_events(item, within(item.source), ids, blobs, threshold, mask) if check else None
    if fast is not None:
        payloads, score = fast
        try:
            for event_id, cls, plain in payloads:
                payload_json = canonical_json(plain)
                payload_json.encode("utf-8")
                out.append((event_id, cls.type, cls.schema_version, payload_json))
                out_fields.append(read_fields(cls.type, plain))
        except (ValueError, TypeError, UnicodeError):  # validation may convert it, or say why not: as below
            out.clear()
            out_fields.clear()
        else:
            if encoded is not None:
                encoded.extend(out)
            if fields is not None:
                fields.extend(out_fields)
            return [], blobs, score
    ids.n = start
    blobs.clear()
    events: list[NewEvent] = []
    try:
        scored = test_events(item, within(item.source), ids, events, blobs, threshold, mask)
        for event in events if check else ():
            encoded_payload = encode(event.payload)
            payload = canonical_json(encoded_payload)
            payload.encode("utf-8")
            out.append((event.event_id or "", event.payload.type, event.payload.schema_version, payload))
            out_fields.append(read_fields(event.payload.type, encoded_payload))
    except (ValueError, UnicodeError) as exc:  # pydantic's ValidationError is a ValueError
        ids.n = start  # the next result gets the ids it would have had
        if isinstance(exc, ValidationError):
            error = exc.errors()[0]
            reason = f"{exc.title} field {'.'.join(map(str, error['loc']))}: {error['msg']}"
        else:
            reason = str(exc) or type(exc).__name__
        return bad_line(item.source, f"cannot be imported: {reason}", skip_bad)
    if encoded is not None:
        encoded.extend(out)
    if fields is not None:
        fields.extend(out_fields)
    return events, blobs, (scored.score, scored.passed, scored.status)


class RelativeSources:
    """Sources as the run's events record them: relative to the imported path (see SourceRef)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._relative: dict[str, str | None] = {}
        """Each file as recorded, resolved once: a results file names the same file on every line."""

    def __call__(self, source: SourceRef) -> SourceRef:
        if source.file is None:
            return source
        if source.file not in self._relative:
            absolute = SourceRef(file=str(Path(source.file).resolve()))
            self._relative[source.file] = absolute.relative_to(self.root).file
        return SourceRef(file=self._relative[source.file], line=source.line)


class EventIds:
    """Deterministic event ids: the n-th event of an import is always the same id, the one the store
    derives from the run's stream and version n (``store/records.py``): the store keeps no id for it, and
    finds the event from the id alone."""

    def __init__(self, run_id: str, n: int = 0) -> None:
        self.run_id = run_id
        self.n = n

    def next(self, kind: str) -> str:
        self.n += 1
        return self.id(self.n, kind)

    def id(self, n: int, kind: str) -> str:
        """The id of the n-th event (``kind`` is what a placeholder id of :class:`PartIds` tells apart)."""
        return derived_id(self.run_id, n)


_Planned = tuple[str, type[DomainEvent], dict[str, Any]]
"""An event of a result: its id, its class and the values it is made of (a ``source`` field as the result's
``SourceRef`` and an assertion as AgentV's ``{text, passed, evidence}``, the evidence as the row has it)."""


def _planned(
    item: ImportedTest,
    source: SourceRef,
    ids: EventIds,
    blobs: dict[str, bytes | FileBlob],
    threshold: float,
    mask: SecretMask | None = None,
) -> list[_Planned]:
    """The events of one result (what :func:`test_events` and :func:`_plain_events` make), the scored one
    last, with their ids taken from ``ids`` and the bytes they name put into ``blobs`` (masked by ``mask``)."""
    key: _ResultKey = {"test_id": item.test_id, "target": item.target, "attempt": item.attempt}
    events: list[_Planned] = []
    if item.input or item.expected_output is not None or item.criteria or item.metadata:
        # A case event only when the source says something about the case (results JSONL often does not).
        case = {
            **key,
            "input": item.input,
            "expected_output": item.expected_output,
            "criteria": item.criteria,
            "metadata": item.metadata,
        }
        events.append((ids.next("case"), TestCaseRecorded, case))
    by_path: dict[str, _Artifact] = {}
    for f in item.files:
        found = _read_file(f.resolved, mask) if f.resolved is not None else None
        values: dict[str, Any] = {**key, "path": f.path, "media_type": f.media_type}
        if isinstance(found, str):  # a large file holding a secret
            values.update(status="refused", reason=found)
            artifact = _Artifact(None, "refused", found)
        elif found is not None:
            digest, data = found
            blobs[digest] = data
            values.update(sha256=digest, size=blob_size(data))
            artifact = _Artifact(digest, "stored", None)
        else:
            reason = f.refused or "file not found when imported"
            kept = "refused" if f.refused else "missing"
            values.update(status=kept, reason=reason)
            artifact = _Artifact(None, kept, reason)
        by_path.setdefault(f.path, artifact)
        events.append((ids.next("artifact"), ArtifactStored, values))
    messages_sha = None
    if item.messages is not None:
        messages_sha = _blob(messages_json([_annotate(m, by_path) for m in item.messages]), blobs)
    transcript_id = ids.next("transcript")
    transcript = {
        **key,
        "messages_sha256": messages_sha,
        "output_text": item.output_text,
        "token_usage": item.token_usage,
        "cost_usd": item.cost_usd,
        "duration_ms": item.duration_ms,
        "start_time": item.start_time,
        "end_time": item.end_time,
        "file_changes": item.file_changes,
        "file_changes_lost_lines": item.file_changes_lost_lines,
        "workspace_path": item.workspace_path,
        "source": source,
    }
    events.append((transcript_id, TranscriptRecorded, transcript))
    # Two graders of one name (AgentV allows it) become name, name-2, as the eval file parser names them.
    names = unique_names([v.name for v in item.verdicts])
    for v, name in zip(item.verdicts, names):
        prompt_sha = _json_blob(v.rendered_prompt, blobs) if v.rendered_prompt is not None else None
        verdict = {
            **key,
            "grader": name,
            "source_name": v.name if name != v.name else None,
            "grader_type": v.type,
            "score": v.score,
            "verdict": v.verdict,
            "status": "execution_error" if v.verdict == "skip" and not _stopped_turn(v) else "ok",
            "assertions": [
                {"text": str(a.get("text", "")), "passed": bool(a.get("passed")), "evidence": a.get("evidence")}
                for a in v.assertions
            ],
            "weight": v.weight,
            "details": v.details,
            "evidence": [v.reason] if v.reason else [],
            "origin": "imported",
            "transcript_event_id": transcript_id,
            "source": source,
            "rendered_prompt_sha256": prompt_sha,
            "grader_target": v.grader_target,
            "token_usage": v.token_usage,
            "timing": v.timing,
        }
        events.append((ids.next("verdict"), VerdictRecorded, verdict))
    passed = item.passed if item.passed is not None else item.score >= threshold
    declared = item.execution_status or ("ok" if passed else "quality_failure")
    status: ExecutionStatus = next((s for s in _EXECUTION_STATUSES if s == declared), "execution_error")
    timestamp = item.raw_row.get("timestamp")
    scored = {
        **key,
        "score": item.score,
        "passed": passed,
        "status": status,
        "threshold": threshold,
        "error": item.error,
        "origin": "imported",
        "source": source,
        "produced_at": timestamp if isinstance(timestamp, str) else None,
        "row_fields": item.row_fields,
        "graders": list(names),
    }
    events.append((ids.next("scored"), TestScored, scored))
    return events


def test_events(
    item: ImportedTest,
    source: SourceRef,
    ids: EventIds,
    batch: list[NewEvent],
    blobs: dict[str, bytes | FileBlob],
    threshold: float,
    mask: SecretMask | None = None,
) -> TestScored:
    """The events of one result as models (each value validated: converted, or refused naming the field)."""
    payload: DomainEvent | None = None
    for event_id, cls, values in _planned(item, source, ids, blobs, threshold, mask):
        if "assertions" in values:
            values = {**values, "assertions": [Assertion(**a) for a in values["assertions"]]}
        payload = cls(**values)
        batch.append(NewEvent(payload, event_id))
    assert isinstance(payload, TestScored)
    return payload


def _plain_events(
    item: ImportedTest,
    source: SourceRef,
    ids: EventIds,
    blobs: dict[str, bytes | FileBlob],
    threshold: float,
    mask: SecretMask | None = None,
) -> tuple[list[_Planned], Score] | None:
    """The events :func:`test_events` makes, as ``encode`` writes their payloads, built without the
    models (``store.plain_payloads``), with their ids and the result's score; None when a value is
    not one of the plain ones (then ``ids`` and ``blobs`` are to be reset, and the models built)."""
    where = {k: v for k, v in (("file", source.file), ("line", source.line)) if v is not None}
    events: list[_Planned] = []
    try:
        for event_id, cls, values in _planned(item, source, ids, blobs, threshold, mask):
            if "source" in values:
                values["source"] = where
            if "assertions" in values:
                values["assertions"] = [_plain_assertion(a) for a in values["assertions"]]
            events.append((event_id, cls, plain_payload(cls, values)))
    except NotPlain:
        return None
    # The score as stored (an int made a float); pass/fail and status as given (a default is left out).
    return events, (events[-1][2]["score"], values["passed"], values["status"])


def _plain_assertion(assertion: dict[str, Any]) -> dict[str, Any]:
    """An assertion as ``encode`` writes it (no evidence: no key), where its evidence is text or none."""
    evidence = assertion["evidence"]
    if evidence is None:
        return {"text": assertion["text"], "passed": assertion["passed"]}
    if type(evidence) is not str:
        raise NotPlain(evidence)
    return assertion


class _Artifact(NamedTuple):
    """What a transcript's file block says of the artifact captured for its path."""

    sha256: str | None
    status: str
    reason: str | None


def _annotate(message: dict, by_path: Mapping[str, _Artifact]) -> dict:
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


def _read_file(path: Path, mask: SecretMask | None = None) -> tuple[str, bytes | FileBlob] | str | None:
    """A file's digest and its bytes, masked (``mask``), or, past a chunk, the file itself: hashed here a
    chunk at a time and read again, a chunk at a time, when it is stored (a gigabyte artifact is never held
    whole). A regular file only (a FIFO would block), not grown past the cap since it was checked; None when
    unreadable. A file past a chunk that holds a secret is not stored (why, as a string): masking it would
    mean holding it whole, or a masked copy of it on disk until the writing pass."""
    try:
        if not is_large_size(path.stat().st_size):
            data = read_regular(path, max_bytes=max_file_bytes())
            if not is_large_size(len(data)):
                if mask:
                    data = mask.data(data)
                return sha256_hex(data), data
        digest, size = file_digest(str(path), max_bytes=max_file_bytes())
        if mask and mask.holds_in(read_pieces(str(path), CHUNK_BYTES, max_file_bytes())):
            return f"{path} holds a secret evalstore masks, and a file of more than {CHUNK_BYTES} bytes is not masked"
    except OSError:
        return None
    return digest, FileBlob(str(path), size)


def _json_blob(value: object, blobs: dict[str, bytes | FileBlob]) -> str:
    """Store a value as a canonical-JSON blob; its digest."""
    return _blob(canonical_json_bytes(value), blobs)


def _blob(data: bytes, blobs: dict[str, bytes | FileBlob]) -> str:
    """Store bytes as a blob; their digest."""
    digest = sha256_hex(data)
    blobs[digest] = data
    return digest


def _stopped_turn(v: Any) -> bool:
    """A conversation's turn AgentV skipped after a failed one: scored 0 and counted, not an execution error."""
    return stopped_turn(v.verdict, v.type, [str(a.get("text", "")) for a in v.assertions if isinstance(a, dict)])
