"""A run's stored results, streamed one (test, target, attempt) at a time, as the exports write them.

Results are read as payload dicts (``store.events.payload_fields``), not as event models: an export
reads back every event of a run, and validating what the store itself wrote was most of its time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from evalstore.replay.agentv.wire import agentv_token_usage
from evalstore.replay.analysis.views import ResultKey, result_key, run_started, transcript_run_id
from evalstore.replay.jsontext import RawJSON, loads_many
from evalstore.store.events import current_defaults, payload_fields

if TYPE_CHECKING:
    from evalstore.store import EventStore
    from evalstore.store.events import RunStarted, TestCaseRecorded, TestScored, TranscriptRecorded, VerdictRecorded

Payload = dict[str, Any]
"""An event's fields as ``model_dump(mode="json")`` gives them (``store.events.payload_fields``)."""


@dataclass(slots=True)
class ResultBundle:
    """Everything stored about one (test, target, attempt) result. :func:`stored_results` gives each
    event as its payload fields; the event models themselves are taken too (tests, callers that hold them)."""

    scored: TestScored | Payload
    verdicts: list[VerdictRecorded] | list[Payload] = field(default_factory=list)
    transcript: TranscriptRecorded | Payload | None = None
    case: TestCaseRecorded | Payload | None = None
    timestamp: str | None = None
    """When the result was produced (AgentV's row ``timestamp``), else when it was stored."""
    rendered_prompts: dict[str, Any] = field(default_factory=dict)
    """Grader name -> the grader's request as AgentV records it (``scores[].input``): an import's
    recorded request as its stored JSON text (:class:`RawJSON`), or for a graded verdict, rebuilt from
    its last grader call."""
    grader_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Grader name -> the judge's token usage on its last call (graded verdicts), in AgentV's shape."""


_RESULT_EVENTS = ["test_case_recorded", "transcript_recorded", "verdict_recorded", "test_scored"]
_CHUNK = 1000
"""Results completed before their replay-origin transcripts and their recorded requests are fetched
in one query each: an export worker's whole window (``chunked.CHUNK_RESULTS``) at once, where 200 at a
time took five rounds of queries and blob decoding per window."""


class Interleaved(Exception):
    """A window of a run's stream holds an event of a result that is scored outside it
    (:func:`stored_results` with ``contiguous=True``)."""


Window = tuple[int, "int | None"]
"""``(after, upto)``: the stream versions ``after < v <= upto`` of a run's stream (``upto`` None: to its end)."""


def stored_results(
    store: EventStore,
    run_id: str,
    *,
    inputs: bool = True,
    window: Window = (0, None),
    contiguous: bool = False,
    origin_ids: dict[ResultKey, dict[str, Any]] | None = None,
) -> Iterator[ResultBundle]:
    """Each scored result of a run in the order it was scored. A result's events are held only until
    its ``test_scored`` (always its last event), so memory does not grow with the run. A replay's
    transcripts (and the cases of tests it carried over) come from the run that recorded them.
    ``inputs=False`` reads scores and verdicts only: no case, transcript or grader request.

    ``window`` reads a part of the run's stream (``replay/agentv/chunked.py``): the results scored in it.
    With ``contiguous``, every event in it must belong to the next result scored (as an import or a
    replay appends each result whole), else :class:`Interleaved` is raised: then no result scored in the
    window has an event before it, and no event in it belongs to a result scored after it.
    ``origin_ids`` is :func:`origin_event_ids` of the run, when the caller has read it."""
    scored = _scored(store, run_id, _RESULT_EVENTS[0 if inputs else 2 :], window, contiguous)
    if not inputs:
        yield from scored
        return
    if origin_ids is None:
        origin_ids = origin_event_ids(store, run_id)
    scripts = written_scripts(run_started(store, run_id))
    for chunk in _chunks(scored):
        # Each result handed over alone: the caller's is its last reference, so it is freed as soon as the
        # caller is done with it, its objects still in the cache (all of a window's freed at its end, long
        # after they were built, was a tenth of an export worker's time).
        done = _completed(store, chunk, origin_ids, scripts)
        del chunk
        done.reverse()
        while done:
            yield done.pop()


def origin_event_ids(store: EventStore, run_id: str) -> dict[ResultKey, dict[str, Any]]:
    """For a replay, per result of the run holding its transcripts, the event ids of its case and
    transcript and its row labels (:func:`_origin_event_ids`); empty for any other run."""
    origin = transcript_run_id(store, run_started(store, run_id))
    return _origin_event_ids(store, origin) if origin != run_id else {}


def _chunks(bundles: Iterator[ResultBundle]) -> Iterator[list[ResultBundle]]:
    done: list[ResultBundle] = []
    for bundle in bundles:
        done.append(bundle)
        if len(done) >= _CHUNK:
            yield done
            done = []
    if done:
        yield done


def _scored(
    store: EventStore, run_id: str, types: list[str], window: Window, contiguous: bool
) -> Iterator[ResultBundle]:
    """Each result of the run as its events of ``types`` complete it (its ``test_scored``)."""
    pending: dict[ResultKey, ResultBundle] = {}
    fields, key_of = payload_fields, result_key  # locals: this loop runs per event
    known: dict[str, tuple[int, Payload | None]] = {}  # type -> (schema version, current_defaults)
    after, upto = window
    rows = store.stream_payloads(run_id, types=types, after=after, upto=upto)
    # The payloads parsed a batch at a time (jsontext.loads_many: one parse per batch was a sixth of
    # reading a run), each batch's events taken in this loop (a generator between them cost a tenth more).
    while batch := list(islice(rows, _BATCH)):
        for (type_, version, _, recorded_at), p in zip(batch, loads_many([row[2] for row in batch])):
            defaults = known.get(type_)
            if defaults is None or defaults[0] != version:
                defaults = known[type_] = (version, current_defaults(type_, version))
            p = fields(type_, version, p) if defaults[1] is None else {**defaults[1], **p}  # payload_fields
            key = key_of(p["test_id"], p["target"], p["attempt"])
            if contiguous and pending and key not in pending:
                raise Interleaved(f"run {run_id}: results interleave after stream version {after}")
            if type_ == "test_scored":
                bundle = pending.pop(key, None) or ResultBundle(scored=p)
                bundle.scored, bundle.timestamp = p, p["produced_at"] or recorded_at
                yield bundle
                continue
            bundle = pending.get(key)  # type: ignore[assignment]
            if bundle is None:
                # The placeholder score (the payload at hand) is replaced when the real one arrives; a
                # result never scored (an interrupted run) is never emitted.
                bundle = pending[key] = ResultBundle(scored=p)
            if type_ == "verdict_recorded":
                _put_verdict(bundle.verdicts, p)  # type: ignore[arg-type]
            elif type_ == "transcript_recorded":
                bundle.transcript = p
            else:
                bundle.case = p
    if contiguous and pending and upto is not None:
        raise Interleaved(f"run {run_id}: a result continues after stream version {upto}")


_BATCH = 500


def _put_verdict(verdicts: list[Payload], verdict: Payload) -> None:
    """A grader graded again (a resumed run) replaces its earlier verdict, keeping its position."""
    for i, v in enumerate(verdicts):
        if v["grader"] == verdict["grader"]:
            verdicts[i] = verdict
            return
    verdicts.append(verdict)


CARRIED_ROW_FIELDS = ("category", "conversation_id", "experiment")
"""An imported row's labels that describe the test, not how it was graded: a replay's rows keep its
origin's (``failure_stage`` and ``failure_reason_code`` describe the origin's own outcome, so they do not)."""


def _origin_event_ids(store: EventStore, run_id: str) -> dict[ResultKey, dict[str, Any]]:
    """Per result of the origin run, the event ids of its case and transcript (ids only: small), and
    under ``"row_fields"`` the labels of its row (``CARRIED_ROW_FIELDS``)."""
    ids: dict[ResultKey, dict[str, Any]] = {}
    for stored in store.read_stream(run_id, types=["test_case_recorded", "transcript_recorded", "test_scored"]):
        p = stored.payload
        entry = ids.setdefault(result_key(p["test_id"], p.get("target"), p.get("attempt", 1)), {})
        if stored.type != "test_scored":
            entry[stored.type] = stored.event_id
        elif labels := {k: v for k, v in (p.get("row_fields") or {}).items() if k in CARRIED_ROW_FIELDS}:
            entry["row_fields"] = labels
    return ids


def _fields(stored: Any) -> Payload:
    return payload_fields(stored.type, stored.schema_version, stored.payload)


def written_scripts(run: RunStarted) -> dict[str, str]:
    """The run's grader scripts, from the absolute path its grader calls ran them by to the reference its
    eval file wrote (``../graders/x.py``): AgentV's ``scores[].input.command`` is the command as written."""
    return {f.path: f.ref for f in run.eval_snapshot if f.role == "grader_script" and f.ref}


def _completed(
    store: EventStore,
    bundles: list[ResultBundle],
    from_origin: dict[ResultKey, dict[str, Any]],
    scripts: dict[str, str],
) -> list[ResultBundle]:
    """The chunk's bundles with their origin's case and transcript, and their graders' requests."""
    # Only stored_results' own bundles come here: every event is its payload fields.
    wanted: dict[int, dict[str, str]] = {}
    for i, b in enumerate(bundles if from_origin else ()):  # a replay's: its origin holds what it lacks
        s: Payload = b.scored  # type: ignore[assignment]
        ids = from_origin.get(result_key(s["test_id"], s["target"], s["attempt"]), {})
        if "row_fields" in ids:  # under the replay's own (an agent failure it reproduces keeps AgentV's labels)
            s["row_fields"] = {**ids["row_fields"], **s["row_fields"]}
        # A replay's own transcript never exists; its own case (a regraded test) wins over the origin's.
        need = {
            t: e
            for t, e in ids.items()
            if (t == "transcript_recorded" and b.transcript is None) or (t == "test_case_recorded" and b.case is None)
        }
        if need:
            wanted[i] = need
    verdicts: list[list[Payload]] = [b.verdicts for b in bundles]  # type: ignore[misc]
    # A graded verdict's request and usage are on its grader calls (``_agentv_call``).
    call_ids = [c for vs in verdicts for v in vs for c in v["grader_call_event_ids"]]
    fetch = [e for need in wanted.values() for e in need.values()] + call_ids
    stored = store.get_events(fetch) if fetch else {}
    events = {event_id: _fields(e) for event_id, e in stored.items()}
    # Every recorded request of the chunk in one query (a script grader's is often the same for every test).
    prompts: dict[str, RawJSON] = {
        digest: RawJSON(body)
        for digest, body in store.get_blobs(
            v["rendered_prompt_sha256"] for vs in verdicts for v in vs if v["rendered_prompt_sha256"]
        ).items()
    }
    # The judges' recorded requests too (a query per request was most of exporting a graded run).
    calls = {c: events[c] for c in call_ids if c in stored and stored[c].type == "grader_called"}
    _reused_usage(store, calls)
    digests = [c["request_sha256"] for c in calls.values() if c["call"] != "process" and c["request_sha256"]]
    requests = store.get_blobs(digests) if digests else {}
    for i, b in enumerate(bundles):
        for type_, event_id in wanted[i].items() if i in wanted else ():
            if type_ == "transcript_recorded":
                b.transcript = events[event_id]
            else:
                b.case = events[event_id]
        for v in verdicts[i]:
            request: Any = None
            if calls and (graded := [calls[c] for c in v["grader_call_event_ids"] if c in calls]):
                asked, usage = _agentv_call(graded)
                request = _agentv_request(asked, requests, scripts)
                if usage:
                    b.grader_usage[v["grader"]] = usage
            if digest := v["rendered_prompt_sha256"]:
                recorded = prompts[digest]
                # An import's as it is; a judge's prompt as rendered over the one sent (in the sent one's order).
                request = recorded if request is None else {**request, **recorded.value()}
            if request is not None:
                b.rendered_prompts[v["grader"]] = request
    return bundles


def _reused_usage(store: EventStore, calls: dict[str, Payload]) -> None:
    """A judge reply taken from the cache is recorded without usage (nothing was spent on it); AgentV's
    grader ``token_usage`` is that of the reply the verdict came from, so each such call is given the
    usage of the call that got the reply (``reused_from``, never itself a cache hit), in one query."""
    hits = [
        c for c in calls.values() if c["call"] == "judge" and c["cache_hit"] and not c["usage"] and c["reused_from"]
    ]
    if not hits:
        return
    originals = store.get_events(list({c["reused_from"] for c in hits}))
    for c in hits:
        if (original := originals.get(c["reused_from"])) is not None:
            c["usage"] = _fields(original)["usage"]


def _agentv_call(calls: list[Payload]) -> tuple[Payload, dict[str, Any] | None]:
    """The call whose request AgentV records as a grader's ``scores[].input``, and the grader's
    ``token_usage``. A code grader's: its (last) process. An LLM grader's request is the rendered prompt,
    its first judge request (later ones are retries, or the repair request after three replies that did not
    parse; a prompt script's process comes before it); its usage is the answering call's, with the last
    unparsed reply's added when the answer came to the repair request (AgentV's ``sumTokenUsage``), and
    none when no reply parsed (AgentV's skipped grader records none)."""
    judged = [c for c in calls if c["call"] == "judge"]
    last = calls[-1]
    usage = agentv_token_usage(last["usage"])  # stored as the judge replied (OpenAI's)
    if not judged or last["call"] != "judge":
        return last, usage
    if last["outcome"] != "ok":
        return judged[0], None
    if last["request_sha256"] != judged[0]["request_sha256"] and usage:  # the repair request answered
        replied = [c for c in judged[:-1] if c["usage"]]
        if replied and (before := agentv_token_usage(replied[-1]["usage"])):
            usage = {k: usage.get(k, 0) + before.get(k, 0) for k in ("input", "output")}
    return judged[0], usage


def _agentv_request(call: Payload, requests: dict[str, bytes], scripts: dict[str, str]) -> dict[str, Any] | None:
    """A grader call's request in AgentV's ``scores[].input`` shape: ``{systemPrompt, userPrompt}`` for a
    judge (the rendered messages joined by role), ``{command, cwd}`` for a code grader (``cwd`` since
    grader calls record it), its script named as the eval file wrote it (``scripts``, :func:`written_scripts`)."""
    if call["call"] == "process":
        if not call["argv"]:
            return None
        command = [scripts.get(arg, arg) for arg in call["argv"]]
        return {"command": command, "cwd": call["cwd"]} if call["cwd"] else {"command": command}
    if not call["request_sha256"]:
        return None
    messages = json.loads(requests[call["request_sha256"]])  # the call's request blob, read with the chunk's
    by_role: dict[str, list[str]] = {}
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            by_role.setdefault(m.get("role", "user"), []).append(content)
    request = {"userPrompt": "\n\n".join(by_role.get("user", []))}
    if by_role.get("system"):
        request["systemPrompt"] = "\n\n".join(by_role["system"])
    return request
