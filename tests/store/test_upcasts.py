"""Old payloads are upcast on read and never rewritten; payloads newer than the code are refused."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from log_rows import events_rows, record_at

from evalstore.store import EventStore, NewEvent
from evalstore.store.errors import UnknownEventType
from evalstore.store.events import (
    EVENT_TYPES,
    DomainEvent,
    GraderCalled,
    JudgeBatchSubmitted,
    RunFailed,
    RunStarted,
    decode,
    payload_fields,
)


class RunFailedV3(DomainEvent):
    """What a later evalstore might make of ``run_failed``: v2 split the reason, v3 added a code."""

    type: ClassVar[str] = "run_failed"
    schema_version: ClassVar[int] = 3

    summary: str
    detail: str | None = None
    code: str

    @staticmethod
    def upcast_v1_v2(payload: dict[str, Any]) -> dict[str, Any]:
        summary, _, detail = payload.pop("reason").partition(": ")
        return {**payload, "summary": summary, "detail": detail or None}

    @staticmethod
    def upcast_v2_v3(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "code": "unknown"}


def _raw_row(store: EventStore, event_id: str) -> tuple:
    """An event's schema version and payload as stored, and its record's bytes (body and hash) as stored."""
    [ev] = [e for e in events_rows(store.engine) if e.event_id == event_id]
    record = record_at(store.engine, ev.seq)
    return ev.schema_version, ev.payload_json, record.body, record.hash


def test_a_new_schema_version_upcasts_stored_v1_payloads(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("r", [NewEvent(RunFailed(reason="target crashed"), "ev-1")])
    before = _raw_row(store, "ev-1")

    def upcast_v1_v2(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "reason": f"[legacy] {payload['reason']}"}

    monkeypatch.setattr(RunFailed, "schema_version", 2)
    monkeypatch.setattr(RunFailed, "upcast_v1_v2", staticmethod(upcast_v1_v2), raising=False)

    [ev] = store.read_stream("r")
    assert ev.schema_version == 1
    assert ev.event == RunFailed(reason="[legacy] target crashed")
    # New appends are written at the new version; the old row is untouched and the chain still holds.
    [new] = store.append("r", [RunFailed(reason="again")])
    assert new.schema_version == 2
    assert new.event == RunFailed(reason="again")
    assert _raw_row(store, "ev-1") == before
    assert store.verify().ok


def test_a_chain_of_upcasts_reaches_a_reshaped_class(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append(
        "r", [NewEvent(RunFailed(reason="timeout: after 600 s"), "ev-1"), NewEvent(RunFailed(reason="oom"), "ev-2")]
    )
    before = _raw_row(store, "ev-1")
    monkeypatch.setitem(EVENT_TYPES, "run_failed", RunFailedV3)

    events = [e.event for e in store.read_stream("r")]
    assert events == [
        RunFailedV3(summary="timeout", detail="after 600 s", code="unknown"),
        RunFailedV3(summary="oom", code="unknown"),
    ]
    assert _raw_row(store, "ev-1") == before
    assert max(e.schema_version for e in events_rows(store.engine)) == 1


def test_payload_fields_upcast_as_decoding_does(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """What exports read instead of the models: the upcast payload with its defaults written back."""
    store.append("r", [RunFailed(reason="timeout: after 600 s"), RunFailed(reason="oom")])
    stored = list(store.read_stream("r"))
    assert [payload_fields(e.type, e.schema_version, e.payload) for e in stored] == [
        {"reason": "timeout: after 600 s"},
        {"reason": "oom"},
    ]
    monkeypatch.setitem(EVENT_TYPES, "run_failed", RunFailedV3)
    fields = [payload_fields(e.type, e.schema_version, e.payload) for e in stored]
    assert fields == [e.event.model_dump(mode="json") for e in stored]
    assert fields[1] == {"summary": "oom", "detail": None, "code": "unknown"}


def test_a_payload_newer_than_the_code_is_refused_clearly(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setitem(EVENT_TYPES, "run_failed", RunFailedV3)
        store.append("r", [NewEvent(RunFailedV3(summary="oom", code="E137"), "ev-3")])
    # Back on the current code, which only knows run_failed v1.
    [ev] = store.read_stream("r")
    assert ev.schema_version == 3
    assert ev.payload == {"summary": "oom", "code": "E137"}  # defaults are not stored
    with pytest.raises(
        UnknownEventType,
        match=r"event type 'run_failed' has schema version 3, newer than this evalstore understands \(1\); upgrade evalstore",
    ):
        _ = ev.event
    assert store.verify().ok  # the chain does not depend on understanding payloads


def test_an_unknown_event_type_is_refused_clearly() -> None:
    with pytest.raises(UnknownEventType, match="unknown event type 'run_paused'"):
        decode("run_paused", 1, {})


def test_current_payloads_round_trip_unchanged() -> None:
    started = RunStarted(run_id="r", kind="replay", parent_run_id="p", tool_version="0.1.0", overrides={"x": [1]})
    from evalstore.store.events import encode

    assert decode("run_started", 1, encode(started)) == started


def test_a_version_1_grader_call_reads_as_version_2_without_a_folder(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``grader_called`` v2 added ``cwd``: a call stored before it reads back with no folder."""
    call: dict[str, Any] = {
        "test_id": "t",
        "grader": "syntax",
        "grader_type": "code-grader",
        "call": "process",
        "argv": ["python3", "c.py"],
    }
    with monkeypatch.context() as patched:
        patched.setattr(GraderCalled, "schema_version", 1)
        store.append("r", [NewEvent(GraderCalled(**call), "v1")])
    store.append("r", [NewEvent(GraderCalled(**call, cwd="/evals"), "v2")])
    old, new = store.read_stream("r")
    assert (old.schema_version, new.schema_version) == (1, 3)  # 3 added batch_id (replay --batch)
    assert "cwd" not in old.payload and old.event == GraderCalled(**call)
    assert old.event.batch_id is None
    assert new.event.cwd == "/evals"
    assert payload_fields(old.type, old.schema_version, old.payload)["cwd"] is None


def test_a_version_1_judge_batch_reads_as_version_2_with_no_intent(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``judge_batch_submitted`` v2 added ``intent_id``: a batch recorded before intents has none."""
    batch: dict[str, Any] = {"batch_id": "b1", "provider": "openai", "judge_target": "j", "model": "m", "requests": 3}
    with monkeypatch.context() as patched:
        patched.setattr(JudgeBatchSubmitted, "schema_version", 1)
        store.append("r", [NewEvent(JudgeBatchSubmitted(**batch), "v1")])
    store.append("r", [NewEvent(JudgeBatchSubmitted(**batch, intent_id="i1"), "v2")])
    old, new = store.read_stream("r")
    assert (old.schema_version, new.schema_version) == (1, 2)
    assert old.event == JudgeBatchSubmitted(**batch) and old.event.intent_id is None  # type: ignore[attr-defined]
    assert new.event.intent_id == "i1"  # type: ignore[attr-defined]
