"""Attesting one run's results: an in-toto Statement, the events behind it, and their inclusion proofs.

The file (``"format": "evalstore-attestation"``, ``"version": 1``) holds

- ``statement``: an in-toto v1 Statement. Its subject is the run (named ``evalstore-run/RUN``, digest the
  hash of its ``run_started`` event); its predicate names the run, the digest of its eval snapshot, the
  checkpoint it is proven against, and per test the score, pass and status with the ``test_scored``
  event's seq and hash, and per grader the score and verdict with the ``verdict_recorded`` event's.
- ``checkpoint``: the signed note of a checkpoint that covers every one of those events.
- ``events``: each event the predicate cites, whole (the envelope fields its hash is computed from), with
  its RFC 6962 inclusion proof against the checkpoint's root.

:func:`verify_attestation` checks it with no store: the checkpoint's signature, each event's hash from its
own fields, each inclusion proof, and that every claim in the predicate is what its event says. The proof
of one event is ``ceil(log2 size)`` hashes at most, so files and checks grow with the log's logarithm.

Each result's verdicts are exactly the graders its ``test_scored`` event names (``graders``): one left out,
listed twice or foreign is refused, so "N verdicts proven" is the whole set. The file is read strictly: a
duplicate JSON key, a field the format does not have, another ``predicateType``, or a claim of another JSON
type than its event's (``"passed": 0`` for false) is refused.

An attestation proves that these events were in the log when the checkpoint was signed. It does not prove
that the run has no later results (a resumed test scored again after the checkpoint), nor that what the
agent or the judge said was honest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evalstore.replay.attest import note
from evalstore.replay.attest.keys import VerifierKey
from evalstore.replay.errors import AttestationError, AttestationFormatError, NotFoundError
from evalstore.replay.jsontext import decode_problem
from evalstore.store import EventStore, StoredEvent
from evalstore.store.codec import digest_json
from evalstore.store.events import (
    LOG_STREAM,
    CheckpointRecorded,
    DomainEvent,
    RunCompleted,
    RunStarted,
    TestScored,
    VerdictRecorded,
    decode,
)
from evalstore.store.merkle import MerkleTree, event_leaf, verify_inclusion

FORMAT = "evalstore-attestation"
VERSION = 1
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://evalstore.dev/attestation/run-results/v1"
ENVELOPE_FIELDS = (
    "seq",
    "event_id",
    "stream_id",
    "stream_version",
    "type",
    "schema_version",
    "payload",
    "recorded_at",
    "prev_hash",
    "hash",
)


def _result_key(p: TestScored | VerdictRecorded) -> tuple[str, str, int]:
    return (p.test_id, p.target or "", p.attempt)


def _ref(ev: StoredEvent) -> dict[str, Any]:
    return {"seq": ev.seq, "event_hash": ev.hash}


def _snapshot_digest(started: RunStarted) -> str:
    return digest_json([f.model_dump(mode="json") for f in started.eval_snapshot])


def _aggregated(by_grader: dict[str, StoredEvent], scored: TestScored, seq: int) -> list[StoredEvent]:
    """The verdicts a score aggregates: those of the graders it names, recorded before it."""
    names = scored.graders if scored.graders is not None else list(by_grader)
    return [by_grader[n] for n in names if n in by_grader and by_grader[n].seq < seq]


def build_attestation(store: EventStore, run_id: str) -> dict[str, Any]:
    """The attestation of ``run_id``'s current results, proven against the latest checkpoint covering them."""
    started: StoredEvent | None = None
    completed: StoredEvent | None = None
    scored: dict[tuple, StoredEvent] = {}
    verdicts: dict[tuple, dict[str, StoredEvent]] = {}
    kinds = [RunStarted.type, TestScored.type, VerdictRecorded.type, RunCompleted.type]
    for ev in store.read_stream(run_id, types=kinds):
        payload = ev.event
        if isinstance(payload, RunStarted):
            started = started or ev
        elif isinstance(payload, RunCompleted):
            completed = ev
        elif isinstance(payload, TestScored):
            scored[_result_key(payload)] = ev  # later events win, as in the results projection
        elif isinstance(payload, VerdictRecorded):
            verdicts.setdefault(_result_key(payload), {})[payload.grader] = ev
    if started is None:
        raise NotFoundError(f"no run {run_id!r} in this store")
    if completed is None:
        # Its run_completed event (how many results the run has) is what lets a reader see that none was left out.
        raise AttestationError(f"run {run_id} is not complete: finish it (`--resume`) before attesting its results")
    cited = [started, completed, *scored.values(), *(v for by_grader in verdicts.values() for v in by_grader.values())]
    for ev in cited:
        if ev.computed_hash(ev.prev_hash) != ev.hash:
            raise AttestationError(
                f"event seq {ev.seq} of run {run_id} does not match its hash (altered after it was written); "
                "`evalstore verify` says more"
            )
    last = max(ev.seq for ev in cited)

    covering = [
        ev for ev in store.read_stream(LOG_STREAM, types=[CheckpointRecorded.type]) if ev.payload["size"] >= last
    ]
    if not covering:
        raise AttestationError(
            f"no checkpoint covers run {run_id} (its events reach seq {last}); write one with `evalstore checkpoint`"
        )
    recorded = covering[-1].event
    assert isinstance(recorded, CheckpointRecorded)
    hashes = [digest for _, digest in store.chain_hashes(upto=recorded.size)]
    tree = MerkleTree([event_leaf(h) for h in hashes])
    if len(hashes) != recorded.size or tree.root.hex() != recorded.root_hash:
        raise AttestationError(
            f"the log no longer matches its checkpoint of {recorded.size} events; "
            "`evalstore verify --checkpoint FILE` says how"
        )

    run = started.event
    assert isinstance(run, RunStarted)
    results = []
    for key, ev in scored.items():
        p = ev.event
        assert isinstance(p, TestScored)
        results.append(
            {
                "test_id": p.test_id,
                "target": p.target,
                "attempt": p.attempt,
                "score": p.score,
                "passed": p.passed,
                "status": p.status,
                **_ref(ev),
                "verdicts": [
                    {"grader": v.event.grader, "score": v.event.score, "verdict": v.event.verdict, **_ref(v)}  # type: ignore[attr-defined]
                    for v in sorted(_aggregated(verdicts.get(key, {}), p, ev.seq), key=lambda e: e.seq)
                ],
            }
        )
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": f"evalstore-run/{run_id}", "digest": {"sha256": started.hash}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "run_id": run_id,
            "kind": run.kind,
            "parent_run_id": run.parent_run_id,
            "suite": run.suite,
            "eval_snapshot_digest": _snapshot_digest(run),
            "run_started": _ref(started),
            "run_completed": _ref(completed),
            "log": {"origin": recorded.origin, "size": recorded.size, "root_hash": recorded.root_hash},
            "results": results,
        },
    }
    events = [
        {
            **{f: getattr(ev, "payload_json" if f == "payload" else f) for f in ENVELOPE_FIELDS},
            "inclusion_proof": [h.hex() for h in tree.inclusion_proof(ev.seq - 1)],
        }
        for ev in sorted(cited, key=lambda e: e.seq)
    ]
    return {"format": FORMAT, "version": VERSION, "statement": statement, "checkpoint": recorded.note, "events": events}


@dataclass(frozen=True)
class AttestationCheck:
    run_id: str
    tests: int
    verdicts: int
    origin: str
    size: int
    signer: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


class _Failed(Exception):
    pass


# The fields each object of the file has, no more and no fewer (``parent_run_id`` and ``target`` may be null).
_DOC_FIELDS = {"format", "version", "statement", "checkpoint", "events"}
_STATEMENT_FIELDS = {"_type", "subject", "predicateType", "predicate"}
_PREDICATE_FIELDS = {
    "run_id", "kind", "parent_run_id", "suite", "eval_snapshot_digest", "run_started", "run_completed", "log", "results"
}  # fmt: skip
_RESULT_FIELDS = {"test_id", "target", "attempt", "score", "passed", "status", "seq", "event_hash", "verdicts"}
_VERDICT_FIELDS = {"grader", "score", "verdict", "seq", "event_hash"}
_EVENT_FIELDS = {*ENVELOPE_FIELDS, "inclusion_proof"}


def load_attestation(text: str, where: str) -> Any:
    """The JSON of an attestation file, read strictly: a key given twice in one object (which a reader
    that keeps the first and one that keeps the last would see differently) or nesting too deep to read
    is :class:`AttestationFormatError`, in one line naming ``where``."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise AttestationFormatError(f"{where}: not an evalstore attestation: the key {key!r} is given twice")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise AttestationFormatError(f"{where}: not JSON: {exc}") from None
    except ValueError as exc:  # an integer too long to convert
        raise AttestationFormatError(f"{where}: not JSON: {decode_problem(exc)}") from None
    except RecursionError:
        raise AttestationFormatError(f"{where}: not an evalstore attestation: nested too deep to read") from None


def _exact(obj: Any, fields: set[str], where: str) -> None:
    if not isinstance(obj, dict):
        raise AttestationFormatError(f"not an evalstore attestation: {where} is not an object")
    extra, missing = sorted(set(obj) - fields), sorted(fields - set(obj))
    if extra:
        raise AttestationFormatError(f"not an evalstore attestation: {where} has a field it cannot have: {extra[0]}")
    if missing:
        raise AttestationFormatError(f"not an evalstore attestation: {where}.{missing[0]} is missing")


def _check_shape(doc: Any) -> None:
    """Every object has exactly its fields: a field a reader does not check is a claim nobody proved."""
    _exact(doc, _DOC_FIELDS, "attestation")
    _exact(doc["statement"], _STATEMENT_FIELDS, "statement")
    statement = doc["statement"]
    if statement["_type"] != STATEMENT_TYPE or statement["predicateType"] != PREDICATE_TYPE:
        raise AttestationFormatError(
            f"not an evalstore attestation: the statement must be {STATEMENT_TYPE} with predicateType {PREDICATE_TYPE}"
        )
    _exact(statement["predicate"], _PREDICATE_FIELDS, "predicate")
    predicate = statement["predicate"]
    for name in ("run_started", "run_completed"):
        _exact(predicate[name], {"seq", "event_hash"}, f"predicate.{name}")
    _exact(predicate["log"], {"origin", "size", "root_hash"}, "predicate.log")
    for i, result in enumerate(predicate["results"] if isinstance(predicate["results"], list) else []):
        _exact(result, _RESULT_FIELDS, f"predicate.results[{i}]")
        for j, verdict in enumerate(result["verdicts"] if isinstance(result["verdicts"], list) else []):
            _exact(verdict, _VERDICT_FIELDS, f"predicate.results[{i}].verdicts[{j}]")
    for i, raw in enumerate(doc["events"] if isinstance(doc["events"], list) else []):
        _exact(raw, _EVENT_FIELDS, f"events[{i}]")


def _same(claimed: Any, actual: Any) -> bool:
    """Equal and of the same JSON type: ``0`` is not ``false``, ``1`` is not ``1.0``... except that a
    whole-number float reads back from JSON as a float, so a float claim is compared as a float."""
    if isinstance(actual, bool) or isinstance(claimed, bool):
        return type(claimed) is type(actual) and claimed == actual
    if isinstance(actual, float) and isinstance(claimed, int | float):
        return isinstance(claimed, float) and claimed == actual
    return type(claimed) is type(actual) and claimed == actual


def _field(obj: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or name not in obj or not isinstance(obj[name], kind):
        raise AttestationFormatError(f"not an evalstore attestation: {where}.{name} is missing or of the wrong type")
    return obj[name]


def verify_attestation(doc: Any, key: VerifierKey) -> AttestationCheck:
    """Check an attestation offline. A file of the wrong shape raises :class:`AttestationFormatError`;
    a check that fails returns the first problem in one line."""
    if _field(doc, "format", str, "attestation") != FORMAT or _field(doc, "version", int, "attestation") != VERSION:
        raise AttestationFormatError(f"not an {FORMAT} version {VERSION} file")
    _check_shape(doc)
    statement = _field(doc, "statement", dict, "attestation")
    predicate = _field(statement, "predicate", dict, "statement")
    run_id = _field(predicate, "run_id", str, "predicate")
    results = _field(predicate, "results", list, "predicate")
    checkpoint, bad_signature = note.open_checkpoint(_field(doc, "checkpoint", str, "attestation"), key)
    events = {}
    for i, raw in enumerate(_field(doc, "events", list, "attestation")):
        for name in ENVELOPE_FIELDS:
            _field(raw, name, int if name in ("seq", "stream_version", "schema_version") else str, f"events[{i}]")
        proof = _field(raw, "inclusion_proof", list, f"events[{i}]")
        try:
            raw = {**raw, "_proof": [bytes.fromhex(h) for h in proof]}
        except (TypeError, ValueError):
            raise AttestationFormatError(
                f"not an evalstore attestation: events[{i}].inclusion_proof is not hex"
            ) from None
        if raw["seq"] in events:
            raise AttestationFormatError(f"not an evalstore attestation: event seq {raw['seq']} is given twice")
        events[raw["seq"]] = raw
    n_verdicts = sum(len(r.get("verdicts") or []) for r in results if isinstance(r, dict))
    check = AttestationCheck(run_id, len(results), n_verdicts, checkpoint.origin, checkpoint.size, key.name)
    try:
        if bad_signature:
            raise _Failed(f"checkpoint signature: {bad_signature}")
        log = {"origin": checkpoint.origin, "size": checkpoint.size, "root_hash": checkpoint.root_hash.hex()}
        if predicate.get("log") != log:
            raise _Failed("the statement names a different checkpoint than the signed one it carries")
        for raw in events.values():
            _check_event(raw, run_id, checkpoint)
        started = _claimed_event(events, predicate.get("run_started"), RunStarted, "run_started")
        assert isinstance(started, RunStarted)
        subject = statement.get("subject")
        want_subject = [
            {"name": f"evalstore-run/{run_id}", "digest": {"sha256": predicate["run_started"]["event_hash"]}}
        ]
        if subject != want_subject:
            raise _Failed("the statement's subject is not the run's run_started event")
        if started.run_id != run_id:
            raise _Failed(f"the run_started event is run {started.run_id}, not {run_id}")
        for name, value in (
            ("kind", started.kind),
            ("parent_run_id", started.parent_run_id),
            ("suite", started.suite),
            ("eval_snapshot_digest", _snapshot_digest(started)),
        ):
            if predicate.get(name) != value:
                raise _Failed(f"predicate {name} {predicate.get(name)!r} differs from the run's event ({value!r})")
        for result in results:
            _check_result(events, result)
        _check_complete(events, predicate.get("run_completed"), results)
    except _Failed as exc:
        return AttestationCheck(**{**check.__dict__, "problem": str(exc)})
    return check


def _check_event(raw: dict[str, Any], run_id: str, checkpoint: note.Checkpoint) -> None:
    seq = raw["seq"]
    envelope = StoredEvent.chained([raw[f] for f in ENVELOPE_FIELDS[:8]], raw["prev_hash"], raw["hash"])
    if envelope.computed_hash(raw["prev_hash"]) != raw["hash"]:
        raise _Failed(f"event seq {seq}: its content does not match its hash (altered)")
    if raw["stream_id"] != run_id:
        raise _Failed(f"event seq {seq} belongs to {raw['stream_id']}, not run {run_id}")
    if not 1 <= seq <= checkpoint.size:
        raise _Failed(f"event seq {seq} is outside the checkpoint (events 1..{checkpoint.size})")
    if not verify_inclusion(event_leaf(raw["hash"]), seq - 1, checkpoint.size, raw["_proof"], checkpoint.root_hash):
        raise _Failed(f"event seq {seq}: its inclusion proof does not lead to the checkpoint's root")


def _claimed_event(events: dict[int, dict], ref: Any, cls: type[DomainEvent], what: str) -> Any:
    if not isinstance(ref, dict) or not isinstance(ref.get("seq"), int):
        raise _Failed(f"{what}: no event reference (seq, event_hash)")
    raw = events.get(ref["seq"])
    if raw is None or raw["hash"] != ref.get("event_hash"):
        raise _Failed(f"{what}: event seq {ref['seq']} with that hash is not among the proven events")
    if raw["type"] != cls.type:
        raise _Failed(f"{what}: event seq {ref['seq']} is a {raw['type']}, not a {cls.type}")
    try:
        return decode(raw["type"], raw["schema_version"], json.loads(raw["payload"]))
    except Exception as exc:  # a payload that does not parse as its type is a failed check, not a crash
        raise _Failed(
            f"{what}: event seq {ref['seq']} does not decode as {cls.type}: {str(exc).splitlines()[0]}"
        ) from None


def _check_result(events: dict[int, dict], result: Any) -> None:
    if not isinstance(result, dict):
        raise _Failed("a result in the predicate is not an object")
    name = f"test {result.get('test_id')!r}"
    scored = _claimed_event(events, result, TestScored, name)
    for field in ("test_id", "target", "attempt", "score", "passed", "status"):
        if not _same(result.get(field), getattr(scored, field)):
            raise _Failed(f"{name}: claimed {field} {result.get(field)!r}, its event says {getattr(scored, field)!r}")
    listed = result.get("verdicts")
    if not isinstance(listed, list):
        raise _Failed(f"{name}: its verdicts are not a list")
    seqs: set[int] = set()
    for verdict in listed:
        if not isinstance(verdict, dict):
            raise _Failed(f"{name}: a verdict is not an object")
        vname = f"{name} grader {verdict.get('grader')!r}"
        event = _claimed_event(events, verdict, VerdictRecorded, vname)
        if verdict["seq"] in seqs:
            raise _Failed(f"{vname}: its verdict (event seq {verdict['seq']}) is listed twice")
        seqs.add(verdict["seq"])
        if _result_key(event) != _result_key(scored):
            raise _Failed(f"{vname}: its event is a verdict on another test")
        if verdict["seq"] > result["seq"]:
            raise _Failed(f"{vname}: its verdict was recorded after the test's score, not one the score aggregates")
        for field in ("grader", "score", "verdict"):
            if not _same(verdict.get(field), getattr(event, field)):
                raise _Failed(
                    f"{vname}: claimed {field} {verdict.get(field)!r}, its event says {getattr(event, field)!r}"
                )
    # Complete: exactly the graders the score names, each once.
    if scored.graders is None:
        raise _Failed(
            f"{name}: its test_scored event (seq {result['seq']}) does not name its graders (recorded by an older "
            "evalstore), so its verdicts cannot be proven complete"
        )
    claimed = sorted(str(v.get("grader")) for v in listed)
    if claimed != sorted(scored.graders):
        left_out = [g for g in scored.graders if g not in claimed]
        what = f"leaves out grader {left_out[0]!r}" if left_out else "lists graders its score does not aggregate"
        if not left_out and len(claimed) != len(set(claimed)):
            what = "lists a grader twice"
        raise _Failed(
            f"{name}: the attestation {what}: its score aggregates {len(scored.graders)} verdicts "
            f"({', '.join(scored.graders) or 'none'}), it lists {len(claimed)}"
        )


def _check_complete(events: dict[int, dict], ref: Any, results: list[Any]) -> None:
    """Every result of the run is there, once: the run's own run_completed event counts them."""
    completed = _claimed_event(events, ref, RunCompleted, "run_completed")
    keys = [(r.get("test_id"), r.get("target"), r.get("attempt")) for r in results]
    if len(set(keys)) != len(keys):
        raise _Failed("a result is listed twice")
    graded = [r for r in results if r.get("status") != "not_regradable"]
    counted = (len(graded), len(results) - len(graded), sum(1 for r in graded if r.get("passed") is True))
    if counted != (completed.tests, completed.not_regradable, completed.passed):
        raise _Failed(
            f"the run completed with {completed.tests} results ({completed.passed} passed, "
            f"{completed.not_regradable} not regradable); the attestation lists {counted[0]} "
            f"({counted[2]} passed, {counted[1]} not regradable)"
        )
