"""A run's stored results, streamed one (test, target, attempt) at a time, as the exports write them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from evalstore.replay.analysis.views import run_started, transcript_run_id
from evalstore.replay.material import ResultKey, result_key
from evalstore.store import EventStore
from evalstore.store.events import GraderCalled, TestCaseRecorded, TestScored, TranscriptRecorded, VerdictRecorded


@dataclass
class ResultBundle:
    """Everything stored about one (test, target, attempt) result."""

    scored: TestScored
    verdicts: list[VerdictRecorded] = field(default_factory=list)
    transcript: TranscriptRecorded | None = None
    case: TestCaseRecorded | None = None
    timestamp: str | None = None
    """When the result was produced (AgentV's row ``timestamp``), else when it was stored."""
    rendered_prompts: dict[str, Any] = field(default_factory=dict)
    """Grader name -> the grader's request as AgentV records it (``scores[].input``): an import's
    recorded request, or for a graded verdict, rebuilt from its last grader call."""
    grader_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Grader name -> the judge's token usage on its last call (graded verdicts)."""


_RESULT_EVENTS = ["test_case_recorded", "transcript_recorded", "verdict_recorded", "test_scored"]
_CHUNK = 200
"""Results completed before their replay-origin transcripts are fetched in one query."""
_PLACEHOLDER = TestScored(test_id="", score=0.0, passed=False, status="execution_error", threshold=0.0)


def stored_results(store: EventStore, run_id: str, *, inputs: bool = True) -> Iterator[ResultBundle]:
    """Each scored result of a run in the order it was scored. A result's events are held only until
    its ``test_scored`` (always its last event), so memory does not grow with the run. A replay's
    transcripts (and the cases of tests it carried over) come from the run that recorded them.
    ``inputs=False`` reads scores and verdicts only: no case, transcript or grader request."""
    if inputs:
        origin = transcript_run_id(store, run_started(store, run_id))
        from_origin = _origin_event_ids(store, origin) if origin != run_id else {}
    else:
        from_origin = {}
    pending: dict[ResultKey, ResultBundle] = {}
    done: list[ResultBundle] = []
    for stored in store.read_stream(run_id, types=_RESULT_EVENTS if inputs else _RESULT_EVENTS[2:]):
        ev = stored.event
        key = result_key(ev.test_id, ev.target, ev.attempt)  # type: ignore[attr-defined]
        if isinstance(ev, TestScored):
            bundle = pending.pop(key, None) or ResultBundle(scored=ev)
            bundle.scored, bundle.timestamp = ev, ev.produced_at or stored.recorded_at
            done.append(bundle)
            if len(done) >= _CHUNK:
                yield from _completed(store, done, from_origin) if inputs else done
                done = []
            continue
        # The placeholder score is replaced when the real one arrives; a result never scored (an
        # interrupted run) is never emitted.
        bundle = pending.setdefault(key, ResultBundle(scored=_PLACEHOLDER))
        if isinstance(ev, TestCaseRecorded):
            bundle.case = ev
        elif isinstance(ev, TranscriptRecorded):
            bundle.transcript = ev
        elif isinstance(ev, VerdictRecorded):
            _put_verdict(bundle, ev)
    yield from _completed(store, done, from_origin) if inputs else done


def _put_verdict(bundle: ResultBundle, verdict: VerdictRecorded) -> None:
    """A grader graded again (a resumed run) replaces its earlier verdict, keeping its position."""
    for i, v in enumerate(bundle.verdicts):
        if v.grader == verdict.grader:
            bundle.verdicts[i] = verdict
            return
    bundle.verdicts.append(verdict)


def _origin_event_ids(store: EventStore, run_id: str) -> dict[ResultKey, dict[str, str]]:
    """Per result of the origin run, the event ids of its case and transcript (ids only: small)."""
    ids: dict[ResultKey, dict[str, str]] = {}
    for stored in store.read_stream(run_id, types=["test_case_recorded", "transcript_recorded"]):
        p = stored.payload
        ids.setdefault(result_key(p["test_id"], p.get("target"), p.get("attempt", 1)), {})[stored.type] = (
            stored.event_id
        )
    return ids


def _completed(
    store: EventStore, bundles: list[ResultBundle], from_origin: dict[ResultKey, dict[str, str]]
) -> Iterator[ResultBundle]:
    wanted: dict[int, dict[str, str]] = {}
    for i, b in enumerate(bundles):
        ids = from_origin.get(result_key(b.scored.test_id, b.scored.target, b.scored.attempt), {})
        # A replay's own transcript never exists; its own case (a regraded test) wins over the origin's.
        need = {
            t: e
            for t, e in ids.items()
            if (t == "transcript_recorded" and b.transcript is None) or (t == "test_case_recorded" and b.case is None)
        }
        if need:
            wanted[i] = need
    # A graded verdict's request and usage are on its last grader call (earlier ones were retries).
    last_calls = [
        v.grader_call_event_ids[-1]
        for b in bundles
        for v in b.verdicts
        if not v.rendered_prompt_sha256 and v.grader_call_event_ids
    ]
    events = store.get_events([e for need in wanted.values() for e in need.values()] + last_calls)
    # Every recorded request of the chunk in one query (a script grader's is often the same for every test).
    prompts: dict[str, Any] = {
        digest: json.loads(body)
        for digest, body in store.get_blobs(
            v.rendered_prompt_sha256 for b in bundles for v in b.verdicts if v.rendered_prompt_sha256
        ).items()
    }
    for i, b in enumerate(bundles):
        for type_, event_id in wanted.get(i, {}).items():
            ev = events[event_id].event
            if type_ == "transcript_recorded":
                b.transcript = ev  # type: ignore[assignment]
            else:
                b.case = ev  # type: ignore[assignment]
        for v in b.verdicts:
            if v.rendered_prompt_sha256:
                b.rendered_prompts[v.grader] = prompts[v.rendered_prompt_sha256]
            elif v.grader_call_event_ids and v.grader_call_event_ids[-1] in events:
                call = events[v.grader_call_event_ids[-1]].event
                if isinstance(call, GraderCalled):
                    request = _agentv_request(store, call)
                    if request is not None:
                        b.rendered_prompts[v.grader] = request
                    if call.usage:
                        b.grader_usage[v.grader] = call.usage
        yield b


def _agentv_request(store: EventStore, call: GraderCalled) -> dict[str, Any] | None:
    """A grader call's request in AgentV's ``scores[].input`` shape: ``{systemPrompt, userPrompt}`` for a
    judge (the rendered messages joined by role), ``{command}`` for a code grader."""
    if call.call == "process":
        return {"command": call.argv} if call.argv else None
    if not call.request_sha256:
        return None
    messages = json.loads(store.get_blob(call.request_sha256))
    by_role: dict[str, list[str]] = {}
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            by_role.setdefault(m.get("role", "user"), []).append(content)
    request = {"userPrompt": "\n\n".join(by_role.get("user", []))}
    if by_role.get("system"):
        request["systemPrompt"] = "\n\n".join(by_role["system"])
    return request
