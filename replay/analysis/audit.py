"""Provenance of a test's verdicts: verdict → grader calls → preprocessing → artifacts → transcript → run.

Every digest on the way is checked against the blob store (re-hashed), so an audit also says when the
bytes behind a score are missing or do not match.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.analysis.views import run_started
from evalstore.replay.errors import NotFoundError
from evalstore.replay.material import RunMaterial, TestMaterial, load_run
from evalstore.replay.regrade import transcript_run
from evalstore.store import EventStore
from evalstore.store.errors import BlobCorrupt, BlobNotFound
from evalstore.store.events import ArtifactStored, GraderCalled, PreprocessingRecorded, SourceRef, VerdictRecorded


@dataclass
class BlobCheck:
    """Digests met during an audit and whether the store's bytes still hash to them."""

    store: EventStore
    results: dict[str, str] = field(default_factory=dict)

    def check(self, digest: str | None) -> str | None:
        if digest is None:
            return None
        if digest not in self.results:
            try:
                hasher = hashlib.sha256()
                for piece in self.store.blob_pieces(digest):  # a large blob a chunk at a time
                    hasher.update(piece)
                self.results[digest] = "ok" if hasher.hexdigest() == digest else "MISMATCH"
            except BlobNotFound:
                self.results[digest] = "MISSING"
            except BlobCorrupt:
                self.results[digest] = "UNREADABLE"
        return self.results[digest]

    @property
    def problems(self) -> dict[str, str]:
        return {d: s for d, s in self.results.items() if s != "ok"}


def _text(store: EventStore, digest: str | None, limit: int | None = None) -> str | None:
    if digest is None:
        return None
    try:
        text = store.get_blob(digest).decode("utf-8", errors="replace")
    except BlobNotFound:
        return None
    return text if limit is None or len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def known_tests_hint(wanted: str, keys: Any) -> str:
    """The run's test ids, or the closest ones when there are many."""
    import difflib

    ids = sorted({key[0] for key in keys})
    if not ids:
        return "it has no tests"
    if len(ids) <= 10:
        return f"its tests: {', '.join(ids)}"
    close = difflib.get_close_matches(wanted, ids, n=5, cutoff=0.4) or [i for i in ids if wanted in i][:5]
    if close:
        return f"closest: {', '.join(close)} ({len(ids)} tests; evalstore show RUN lists them)"
    return f"{len(ids)} tests, e.g. {', '.join(ids[:5])}; evalstore show RUN lists them"


def audit_test(
    store: EventStore,
    run_id: str,
    test_id: str,
    *,
    grader: str | None = None,
    show_prompt: bool = False,
    show_source: bool = False,
    loaded: tuple[RunMaterial, RunMaterial] | None = None,
) -> dict[str, Any]:
    """``loaded``: the run and the run holding its transcripts, when the caller has already read them;
    ``show_source``: each transcript's stored source record as text (an imported Inspect sample)."""
    run, origin = loaded if loaded else (load_run(store, run_id), None)
    matches = run.results_of(test_id)
    if not matches:
        raise NotFoundError(f"run {run_id} has no test {test_id!r}; {known_tests_hint(test_id, run.tests)}")
    checks = BlobCheck(store)
    run_info = _run_info(store, run, checks)
    origin = origin or transcript_run(store, run)
    tests = [_audit_material(store, run, origin, m, checks, grader, show_prompt, show_source) for m in matches]
    return {
        "run": run_info,
        "tests": tests,
        "blobs_checked": len(checks.results),
        "blob_problems": checks.problems,
    }


def _run_info(store: EventStore, run: RunMaterial, checks: BlobCheck) -> dict[str, Any]:
    s = run.started
    chain = []
    parent = s.parent_run_id
    while parent:
        chain.append(parent)
        try:
            parent = run_started(store, parent).parent_run_id
        except NotFoundError:
            break
    return {
        "run_id": run.run_id,
        "kind": s.kind,
        "parent_run_id": s.parent_run_id,
        "ancestors": chain,
        "suite": s.suite,
        "eval_path": s.eval_path,
        "eval_snapshot": [
            {"role": f.role, "path": f.path, "sha256": f.sha256, "size": f.size, "blob": checks.check(f.sha256)}
            for f in s.eval_snapshot
        ],
        "target_name": s.target_name,
        "target": s.target,
        "targets": s.targets,
        "overrides": s.overrides,
        "source": s.source.model_dump() if s.source else None,
        "source_format": s.source_format,
        "evalstore_version": s.tool_version,
    }


def _source(ref: SourceRef | None, run: RunMaterial) -> dict[str, Any] | None:
    """An imported event's source with its file made absolute again (events store it relative to the run's)."""
    if ref is None:
        return None
    return ref.resolved(run.started.source.file if run.started.source else None).model_dump()


def _audit_material(
    store: EventStore,
    run: RunMaterial,
    origin: RunMaterial,
    test: TestMaterial,
    checks: BlobCheck,
    grader: str | None,
    show_prompt: bool,
    show_source: bool = False,
) -> dict[str, Any]:
    """One test of ``run``; its transcript and artifacts are those of ``origin``, the run that recorded them."""
    source = origin.tests.get(test.key, test)
    artifacts_by_digest = {a.sha256: (eid, a) for eid, a in source.artifacts if a.sha256}
    verdicts = []
    for name, (vid, verdict) in test.verdicts.items():
        if grader and name != grader:
            continue
        entry = _audit_verdict(store, run, vid, verdict, artifacts_by_digest, checks, show_prompt)
        entry["edits"] = _edits(test if verdict.origin == "imported" else source, verdict)
        verdicts.append(entry)
    if grader and not verdicts:
        raise NotFoundError(
            f"test {test.key[0]} has no verdict from grader {grader!r} (graders: {', '.join(test.verdicts)})"
        )
    transcript = None
    if source.transcript:
        tid, t = source.transcript
        transcript = {
            "event_id": tid,
            "run_id": origin.run_id,
            "messages_sha256": t.messages_sha256,
            "blob": checks.check(t.messages_sha256),
            "status": t.status,
            "exit_code": t.exit_code,
            "error": t.error,
            "token_usage": t.token_usage,
            "duration_ms": t.duration_ms,
            "source": _source(t.source, origin),
            "provider_attempt": t.provider_attempt,
            # The source's own record of the result, as stored (an Inspect sample, its attachments apart):
            # the bytes an import kept below the messages, which an export writes back.
            "source_record_sha256": t.source_record_sha256,
            "source_record_blob": checks.check(t.source_record_sha256),
            "source_record": _text(store, t.source_record_sha256) if show_source else None,
            "attachments": [{**a, "blob": checks.check(a.get("sha256"))} for a in t.attachments],
            "failed_calls": [
                {"event_id": eid, **c.model_dump(exclude={"test_id", "target", "attempt"})}
                for eid, c in source.failed_calls
            ],
        }
    workspace = None
    if source.snapshot:
        sid, snap = source.snapshot
        workspace = {
            "event_id": sid,
            "run_id": origin.run_id,
            "root": snap.root,
            "file_count": snap.file_count,
            "total_bytes": snap.total_bytes,
            "partial": snap.partial,
            "omitted": snap.omitted,
            "omitted_count": snap.omitted_count,
            "entries": [
                {**e.model_dump(exclude_none=True), "blob": checks.check(e.sha256) if e.sha256 else None}
                for e in snap.entries
            ],
        }
    scored = test.scored[1] if test.scored else None
    return {
        "test_id": test.key[0],
        "target": test.key[1] or None,
        "attempt": test.key[2],
        "score": scored.score if scored else None,
        "passed": scored.passed if scored else None,
        "status": scored.status if scored else None,
        "origin": scored.origin if scored else None,
        "verdicts": verdicts,
        "artifacts": [
            {
                "event_id": eid,
                "path": a.path,
                "media_type": a.media_type,
                "status": a.status,
                "sha256": a.sha256,
                "size": a.size,
                "reason": a.reason,
                "blob": checks.check(a.sha256),
            }
            for eid, a in source.artifacts
        ],
        "transcript": transcript,
        "workspace": workspace,
    }


def _edits(test: TestMaterial, verdict: VerdictRecorded) -> list[dict[str, Any]]:
    """The edits of the imported score a verdict stands for (its own, or the original's for a carried
    verdict): who changed it, why, when, and the value before and after."""
    if verdict.origin not in ("imported", "carried"):
        return []
    return [
        {
            "event_id": eid,
            "edit": e.edit,
            "score": e.grader,
            "author": e.author,
            "reason": e.reason,
            "edited_at": e.edited_at,
            "previous_value": e.previous_value,
            "value": e.value,
            "changes": e.changes,
        }
        for eid, e in test.edits
        if verdict.grader == e.grader or verdict.grader.startswith(f"{e.grader}/")
    ]


def _audit_verdict(
    store: EventStore,
    run: RunMaterial,
    vid: str,
    verdict: VerdictRecorded,
    artifacts: dict[str, tuple[str, ArtifactStored]],
    checks: BlobCheck,
    show_prompt: bool,
) -> dict[str, Any]:
    origin_note = None
    linked = verdict
    if verdict.origin == "carried" and verdict.carried_from:
        # A carried verdict's provenance is the verdict it was carried from.
        try:
            original = store.get_event(verdict.carried_from).event
            if isinstance(original, VerdictRecorded):
                linked = original
                origin_note = f"carried from verdict {verdict.carried_from}"
        except Exception:
            origin_note = f"carried from {verdict.carried_from} (not found)"
    linked_ids = [*linked.grader_call_event_ids, *linked.preprocessing_event_ids]
    events = store.get_events(linked_ids)
    calls = []
    for eid in linked.grader_call_event_ids:
        ev = events.get(eid)
        if ev is None or not isinstance(ev.event, GraderCalled):
            calls.append({"event_id": eid, "missing": True})
            continue
        c: GraderCalled = ev.event
        entry: dict[str, Any] = {
            "event_id": eid,
            "call": c.call,
            "attempt": c.attempt_number,
            "outcome": c.outcome,
            "cache_hit": c.cache_hit,
            "reused_from": c.reused_from,
            "model": c.model,
            "parameters": c.parameters,
            "usage": c.usage,
            "latency_ms": c.latency_ms,
            "cache_key": c.cache_key,
            "argv": c.argv,
            "script_sha256": c.script_sha256,
            "exit_code": c.exit_code,
            "request_sha256": c.request_sha256,
            "request_blob": checks.check(c.request_sha256),
            "reply_sha256": c.reply_sha256,
            "reply_blob": checks.check(c.reply_sha256),
            "stderr_sha256": c.stderr_sha256,
            "error": c.error,
        }
        if c.call == "process":
            entry["stdout"] = _text(store, c.reply_sha256, 4000)
            entry["stderr"] = _text(store, c.stderr_sha256, 4000)
            # Scripts are checked when the run snapshotted them (audit checks the snapshot first).
            entry["script_blob"] = checks.results.get(c.script_sha256 or "")
            if show_prompt:  # the process's prompt: the JSON it read on stdin
                entry["stdin"] = _text(store, c.request_sha256)
        if show_prompt and c.call == "judge":
            request = _text(store, c.request_sha256)
            try:
                entry["prompt"] = json.loads(request) if request else None
            except json.JSONDecodeError:
                entry["prompt"] = request
            entry["reply"] = _text(store, c.reply_sha256)
        calls.append(entry)
    preprocessing = []
    for eid in linked.preprocessing_event_ids:
        ev = events.get(eid)
        if ev is None or not isinstance(ev.event, PreprocessingRecorded):
            preprocessing.append({"event_id": eid, "missing": True})
            continue
        p: PreprocessingRecorded = ev.event
        artifact = artifacts.get(p.artifact_sha256 or "")
        preprocessing.append(
            {
                "event_id": eid,
                "path": p.path,
                "media_type": p.media_type,
                "status": p.status,
                "reason": p.reason,
                "argv": p.argv,
                "script_sha256": p.script_sha256,
                "fingerprint": p.fingerprint,
                "reused_from": p.reused_from,
                "duration_ms": p.duration_ms,
                "output_sha256": p.output_sha256,
                "output_blob": checks.check(p.output_sha256),
                "artifact_sha256": p.artifact_sha256,
                "artifact_blob": checks.check(p.artifact_sha256),
                "artifact_event_id": artifact[0] if artifact else None,
            }
        )
    return {
        "event_id": vid,
        "grader": verdict.grader,
        "grader_type": verdict.grader_type,
        "score": verdict.score,
        "verdict": verdict.verdict,
        "status": verdict.status,
        "weight": verdict.weight,
        "required": verdict.required,
        "origin": verdict.origin,
        "origin_note": origin_note,
        "cache_hit": verdict.cache_hit,
        "assertions": [a.model_dump() for a in verdict.assertions],
        "evidence": verdict.evidence,
        "grader_target": verdict.grader_target,
        "source": _source(verdict.source, run),
        "rendered_prompt_sha256": verdict.rendered_prompt_sha256,
        "rendered_prompt_blob": checks.check(verdict.rendered_prompt_sha256),
        "rendered_prompt": json.loads(_text(store, verdict.rendered_prompt_sha256) or "null") if show_prompt else None,
        "grader_calls": calls,
        "preprocessing": preprocessing,
    }
