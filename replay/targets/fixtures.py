"""The ``replay`` provider, as AgentV 4.42.4's ``ReplayProvider`` with ``fixtures:``: each test answered by
the one ``agentv.replay_fixture.v1`` record (JSONL, what ``agentv eval --record-replay`` writes) whose
identity matches, its messages, tool calls, timings, usage and cost as recorded. The target it stands for
is never called.

Target fields (``resolveReplayConfig``): ``fixtures`` (relative to the eval file's folder),
``source_target`` (required), and ``suite``, ``eval_path``, ``variant`` to pin the lookup (else the eval's
suite name and path). A record matches on suite (when looked up by one), eval path (the record's,
relative, matching the end of the eval's absolute path), test id, source target, attempt (the call of
the target, from 0: a test without its record is looked up again as attempt 1, 2 when the failed call is
tried again, as AgentV does) and variant.

The file is read and checked whole before any test runs (a bad line is the user's to fix: FILE:LINE and
field, as AgentV words it); a test without its record is that test's execution error, as in AgentV.
``execution_traces:`` in place of ``fixtures:`` names ``agentv.trace.v1`` envelopes, looked up the same way
and read as ``trace_envelopes.py`` says.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalstore.replay.content import Message, candidate_text
from evalstore.replay.targets import trace_envelopes as traces
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec
from evalstore.replay.targetsfile.loader import ENV_REFERENCE

SCHEMA_VERSION = "agentv.replay_fixture.v1"

NonNegative = Field(ge=0)


class _Strict(BaseModel):
    # zod's .strict(): a key the schema does not name is an error.
    model_config = ConfigDict(extra="forbid")


class _TokenUsage(_Strict):
    input: float = NonNegative
    output: float = NonNegative
    cached: float | None = Field(default=None, ge=0)
    reasoning: float | None = Field(default=None, ge=0)


class _ToolCall(_Strict):
    tool: str = Field(min_length=1)
    input: Any = None
    output: Any = None
    id: str | None = None
    status: Literal["ok", "error", "timeout", "cancelled", "unknown"] | None = None
    start_time: str | None = None
    end_time: str | None = None
    duration_ms: float | None = Field(default=None, ge=0)


class _Message(_Strict):
    role: str = Field(min_length=1)
    name: str | None = None
    content: Any = None
    tool_calls: list[_ToolCall] | None = None
    start_time: str | None = None
    end_time: str | None = None
    duration_ms: float | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = None
    token_usage: _TokenUsage | None = None


class FixtureRecord(_Strict):
    """One line of a fixtures file (``ReplayFixtureWireSchema``)."""

    schema_version: Literal["agentv.replay_fixture.v1"]
    suite: str = Field(min_length=1)
    eval_path: str | None = Field(default=None, min_length=1)
    test_id: str = Field(min_length=1)
    source_target: str = Field(min_length=1)
    attempt: int | None = Field(default=None, ge=0)
    variant: str | None = Field(default=None, min_length=1)
    fixture_id: str | None = Field(default=None, min_length=1)
    recorded_at: str | None = None
    source: dict[str, Any] | None = None
    redaction: dict[str, Any] | None = None
    output: list[_Message]
    transcript: Any = None
    token_usage: _TokenUsage | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    duration_ms: float | None = Field(default=None, ge=0)
    start_time: str | None = None
    end_time: str | None = None

    line: int = Field(default=0, exclude=True)
    raw_output: list[dict[str, Any]] = Field(default_factory=list, exclude=True)
    """The output messages as written (numbers as they were), what the transcript keeps."""


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    path, kind = _source(spec, config, eval_dir)
    _read(spec, path, kind)
    _text(spec, config, "source_target", required=True)


def _read(spec: TargetSpec, path: Path, kind: str) -> list[Any]:
    if kind == "fixtures":
        return read_records(spec, path)
    try:
        return traces.read_records(path)
    except traces.TraceError as exc:
        raise spec.fail(str(exc)) from None


def run(request: RunRequest) -> TargetOutcome:
    spec, config = request.spec, request.config
    path, kind = _source(spec, config, request.eval_dir)
    records = _read(spec, path, kind)
    suite = _text(spec, config, "suite") or request.suite
    eval_path = _text(spec, config, "eval_path") or request.eval_path
    lookup = {
        "suite": suite,
        "eval_path": eval_path,
        "test_id": request.test.id,
        "source_target": _text(spec, config, "source_target", required=True),
        "attempt": request.attempt,
        "variant": _text(spec, config, "variant"),
    }
    if not lookup["suite"] and not lookup["eval_path"]:
        return _error(spec, "Replay fixture lookup requires suite or eval_path identity")
    matches = [r for r in records if _matches(r, lookup)]
    if len(matches) != 1:
        key = lookup_key(lookup)
        if kind == "execution_traces":  # AgentV's words for each source
            found = "no record" if not matches else f"{len(matches)} duplicate records"
            return _error(spec, f"Execution trace replay lookup found {found} for {key}")
        if not matches:
            return _error(spec, f"Replay fixture lookup found no record for {key} in {path}")
        return _error(spec, f"Replay fixture lookup found {len(matches)} duplicate records for {key} in {path}")
    if kind == "execution_traces":
        return _trace_outcome(spec, matches[0])
    return outcome(matches[0])


def _trace_outcome(spec: TargetSpec, record: traces.Record) -> TargetOutcome:
    """``traceEnvelopeReplayRecordToProviderResponse``: the trace's projected messages, usage, cost, times."""
    try:
        projected, summary = traces.project(record)
        messages = traces.as_messages(projected, record.location)
    except traces.TraceError as exc:
        return _error(spec, str(exc))
    usage = summary.get("token_usage")
    return TargetOutcome(
        messages=messages,
        output_text=candidate_text(messages),
        token_usage=_ints(usage) if usage else None,
        cost_usd=summary.get("cost_usd"),
        duration_ms=summary.get("duration_ms"),
        start_time=summary.get("start_time"),
        end_time=summary.get("end_time"),
    )


def outcome(record: FixtureRecord) -> TargetOutcome:
    """``replayFixtureRecordToProviderResponse``: the recorded output, usage, cost and timings."""
    messages = [Message.model_validate(_content_model(m)) for m in record.raw_output]
    usage = record.token_usage.model_dump(exclude_none=True) if record.token_usage else None
    return TargetOutcome(
        messages=messages,
        output_text=candidate_text(messages),
        token_usage=_ints(usage) if usage else None,
        cost_usd=record.cost_usd,
        duration_ms=record.duration_ms,
        start_time=record.start_time,
        end_time=record.end_time,
    )


def read_records(spec: TargetSpec, path: Path) -> list[FixtureRecord]:
    """Every record of the fixtures file; a line that is not one is an error naming FILE:LINE and field."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise spec.fail(f"Replay fixture file not found or unreadable: {path}: {exc}") from None
    records = []
    for number, line in enumerate(raw.replace("\r\n", "\n").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise spec.fail(f"Invalid replay fixture JSONL at {path}:{number}: {exc.msg}") from None
        try:
            record = FixtureRecord.model_validate(data)
            for index, message in enumerate(data["output"]):
                _check_content(message.get("content"), f"output.{index}.content")
        except ValidationError as exc:
            raise spec.fail(f"Invalid replay fixture record at {path}:{number}: {_issues(exc)}") from None
        except ValueError as exc:
            raise spec.fail(f"Invalid replay fixture record at {path}:{number}: {exc}") from None
        records.append(record.model_copy(update={"line": number, "raw_output": data["output"]}))
    return records


def _check_content(content: Any, where: str) -> None:
    """AgentV keeps any content; evalstore's messages hold a string or content blocks."""
    if content is None or isinstance(content, str):
        return
    if isinstance(content, list):
        try:
            Message.model_validate({"role": "assistant", "content": content})
            return
        except ValidationError:
            pass
    raise ValueError(f"{where}: evalstore keeps message content that is a string or a list of content blocks")


def _content_model(message: dict[str, Any]) -> dict[str, Any]:
    return message if "content" in message else {**message, "content": None}


def _issues(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<record>'}: {e['msg']}" for e in exc.errors())


def _ints(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in usage.items()}


def _matches(record: FixtureRecord | traces.Record, lookup: dict[str, Any]) -> bool:
    """``replayLookupIdentityMatches``."""
    if lookup["suite"] and record.suite != lookup["suite"]:
        return False
    if record.eval_path and not lookup["eval_path"]:
        return False
    if record.eval_path and lookup["eval_path"] and not same_eval_path(record.eval_path, lookup["eval_path"]):
        return False
    return (
        record.test_id == lookup["test_id"]
        and record.source_target == lookup["source_target"]
        and (record.attempt or 0) == lookup["attempt"]
        and (record.variant or None) == (lookup["variant"] or None)
    )


def _normal(path: str) -> str:
    out = path.replace("\\", "/")
    out = out[2:] if out.startswith("./") else out
    while "//" in out:
        out = out.replace("//", "/")
    return out


def same_eval_path(record_path: str, lookup_path: str) -> bool:
    """``sameReplayEvalPath``: equal once normalised, or the record's relative path ending the absolute one."""
    record, lookup = _normal(record_path), _normal(lookup_path)
    return record == lookup or (os.path.isabs(lookup_path) and lookup.endswith("/" + record))


def lookup_key(lookup: dict[str, Any]) -> str:
    parts = [f"suite={lookup['suite']}"] if lookup["suite"] else []
    parts += [f"eval_path={lookup['eval_path']}"] if lookup["eval_path"] else []
    parts += [
        f"test_id={lookup['test_id']}",
        f"source_target={lookup['source_target']}",
        f"attempt={lookup['attempt']}",
        f"variant={lookup['variant'] or '<none>'}",
    ]
    return " ".join(parts)


def _source(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> tuple[Path, str]:
    fixtures = _text(spec, config, "fixtures", empty_ok=False)
    trace_file = _text(spec, config, "execution_traces", empty_ok=False)
    if (fixtures is not None) + (trace_file is not None) != 1:
        raise spec.fail(
            f'Target "{spec.name}" (provider: replay) requires exactly one replay source: "fixtures" or "execution_traces"'
        )
    written = fixtures if fixtures is not None else trace_file
    assert written is not None
    path = Path(written)
    # ``resolveReplaySourcePath``: relative to the eval file's folder.
    return (path if path.is_absolute() else (eval_dir / path)).resolve(), (
        "fixtures" if fixtures is not None else "execution_traces"
    )


def _text(
    spec: TargetSpec, config: dict[str, Any], key: str, *, required: bool = False, empty_ok: bool = True
) -> str | None:
    """``resolveOptionalString`` with literals allowed: trimmed; an empty ``${{ VAR }}`` is unset where
    AgentV's field is optional in the environment, else an error."""
    written = spec.fields.get(key)
    if written is None:
        if required:
            raise spec.fail(f"{spec.name} replay {key} is required")
        return None
    if not isinstance(written, str):
        raise spec.fail(f"{spec.name} replay {key} must be a string")
    value = str(config.get(key, written))
    match = ENV_REFERENCE.fullmatch(written.strip())
    if not value.strip():
        if match and (required or not empty_ok):
            raise spec.fail(f"Environment variable '{match.group(1)}' required for {spec.name} replay {key} is empty")
        if required:
            raise spec.fail(f"{spec.name} replay {key} is required")
        return None
    return value if match else value.strip()


def _error(spec: TargetSpec, message: str) -> TargetOutcome:
    return TargetOutcome(messages=[], status="error", error=f"target '{spec.name}': {message}")
