"""The ``copilot-log`` provider, as AgentV 4.42.4's ``CopilotLogProvider``: no agent runs; each test is
answered by a Copilot CLI session already on disk, its ``events.jsonl`` read as AgentV reads it.

The session is ``session_dir``, else ``session_id`` under ``session_state_dir`` (default
``~/.copilot/session-state``), else with ``discover: latest`` the session there whose ``events.jsonl``
changed last (of those whose ``workspace.yaml`` names ``cwd``, when the target gives one).

Events (``{type, data, timestamp}``): ``user.message`` and ``assistant.message`` (its ``toolRequests`` as
tool calls) are messages; ``skill.invoked`` is an assistant message with a ``Skill`` tool call;
``tool.execution_start`` and ``tool.execution_complete`` make an assistant message with the tool call and
its result; ``session.start`` gives the start time and ``session.shutdown`` the end and the token usage
(``modelMetrics``' input and output summed). Tool names are made canonical. AgentV also turns the files in
the session's ``files/`` folder into file changes; evalstore does not.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from evalstore.replay.content import Message, candidate_text
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec
from evalstore.replay.targets.tool_names import normalize
from evalstore.replay.workspace.changes import session_artifacts


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    _settings(spec, config)


def _settings(spec: TargetSpec, config: dict[str, Any]) -> dict[str, Any]:
    def text(key: str) -> str | None:
        value = config.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise spec.fail(f"{spec.name} copilot-log {key} must be a string")
        return value.strip() or None

    discover = config.get("discover")
    if discover is not None and discover != "latest":
        raise spec.fail(f'Target "{spec.name}": discover must be "latest" (got "{discover}")')
    settings = {
        "session_dir": text("session_dir"),
        "session_id": text("session_id"),
        "discover": discover,
        "session_state_dir": text("session_state_dir"),
        "cwd": text("cwd"),
    }
    if not (settings["session_dir"] or settings["session_id"] or discover):
        # AgentV fails every test with this; it is the target's to fix, so it stops the run first.
        raise spec.fail('CopilotLogProvider requires one of: sessionDir, sessionId, or discover="latest"')
    return settings


def run(request: RunRequest) -> TargetOutcome:
    spec = request.spec
    settings = _settings(spec, request.config)
    try:
        folder = session_folder(settings)
        events = folder / "events.jsonl"
        try:
            text = events.read_text(encoding="utf-8")
        except OSError as exc:
            raise LookupError(f"Failed to read Copilot session transcript at {events}: {exc.strerror or exc}") from None
    except LookupError as exc:
        return TargetOutcome(messages=[], status="error", error=f"target '{spec.name}': {exc}")
    # The session's ``files/``: what Copilot saved there instead of the workspace (copilot-log.ts:70).
    return replace(parse_events(text), file_changes=session_artifacts(folder / "files"))


def state_folder(settings: dict[str, Any]) -> Path:
    return (
        Path(settings["session_state_dir"])
        if settings["session_state_dir"]
        else Path.home() / ".copilot" / "session-state"
    )


def session_folder(settings: dict[str, Any]) -> Path:
    if settings["session_dir"]:
        return Path(settings["session_dir"])
    if settings["session_id"]:
        return state_folder(settings) / settings["session_id"]
    sessions = discover(state_folder(settings), settings["cwd"])
    if not sessions:
        where = f" for cwd={settings['cwd']}" if settings["cwd"] else ""
        shown = settings["session_state_dir"] or "~/.copilot/session-state/"
        raise LookupError(f"No Copilot CLI sessions found{where}. Check that sessions exist in {shown}")
    return sessions[0]


def discover(state: Path, cwd: str | None) -> list[Path]:
    """``discoverCopilotSessions``: session folders with a readable ``workspace.yaml``, newest
    ``events.jsonl`` first, those of another ``cwd`` left out."""
    try:
        entries = sorted(state.iterdir())
    except OSError:
        return []
    found: list[tuple[float, Path]] = []
    for folder in entries:
        try:
            workspace = yaml.safe_load((folder / "workspace.yaml").read_text(encoding="utf-8")) or {}
        except (OSError, ValueError, yaml.YAMLError):  # ValueError: not UTF-8, or an integer too long
            continue
        if cwd and str((workspace if isinstance(workspace, dict) else {}).get("cwd", "")) != cwd:
            continue
        try:
            changed = (folder / "events.jsonl").stat().st_mtime
        except OSError:
            changed = 0.0
        found.append((changed, folder))
    found.sort(key=lambda item: -item[0])  # stable: equal times keep the folders' order
    return [folder for _, folder in found]


def _string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the values a transcript holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value) if isinstance(value, list) else "[object Object]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _millis(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


def parse_events(text: str) -> TargetOutcome:
    """``parseCopilotEvents`` (see the module's docstring)."""
    messages: list[dict[str, Any]] = []
    running: dict[str, dict[str, Any]] = {}
    tokens_in: float = 0
    tokens_out: float = 0
    usage_seen = False
    start: str | None = None
    end: str | None = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not event.get("type"):
            continue
        data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
        kind = event["type"]
        if kind == "session.start":
            stamp = event.get("timestamp") or data.get("startTime")
            start = _string(stamp) if stamp else None
        elif kind == "user.message":
            messages.append(
                {"role": "user", "content": _string(data["content"]) if data.get("content") is not None else ""}
            )
        elif kind == "assistant.message":
            message: dict[str, Any] = {"role": "assistant"}
            if data.get("content") is not None:
                message["content"] = _string(data["content"])
            calls = []
            for request in data.get("toolRequests") or []:
                name = request.get("name") if request.get("name") is not None else request.get("toolName")
                call: dict[str, Any] = {
                    "tool": _string(name if name is not None else ""),
                    "input": request.get("arguments"),
                }
                if request.get("toolCallId"):
                    call["id"] = _string(request["toolCallId"])
                calls.append(normalize("copilot-log", call))
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
        elif kind == "skill.invoked":
            skill = _string(data.get("name") if data.get("name") is not None else "")
            messages.append({"role": "assistant", "tool_calls": [{"tool": "Skill", "input": {"skill": skill}}]})
        elif kind == "tool.execution_start":
            ident = _string(data.get("toolCallId") if data.get("toolCallId") is not None else "")
            if ident:
                tool = _string(data.get("toolName") if data.get("toolName") is not None else "")
                running[ident] = {"tool": tool, "input": data.get("arguments")}
        elif kind == "tool.execution_complete":
            ident = _string(data.get("toolCallId") if data.get("toolCallId") is not None else "")
            started = running.pop(ident, None)
            if started is not None:
                call = normalize("copilot-log", {**started, "output": data.get("result"), "id": ident})
                messages.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "session.shutdown":
            end = _string(event["timestamp"]) if event.get("timestamp") else None
            metrics = data.get("modelMetrics")
            if isinstance(metrics, dict):
                for entry in metrics.values():
                    usage = entry.get("usage") if isinstance(entry, dict) else None
                    if usage:
                        usage_seen = True
                        tokens_in += _as_number(usage.get("inputTokens"))
                        tokens_out += _as_number(usage.get("outputTokens"))
    duration = None
    if start and end:
        began, ended = _millis(start), _millis(end)
        duration = None if began is None or ended is None else ended - began
    parsed = [Message.model_validate({k: v for k, v in m.items() if v is not None or k == "content"}) for m in messages]
    return TargetOutcome(
        messages=parsed,
        output_text=candidate_text(parsed),
        token_usage={"input": tokens_in, "output": tokens_out} if usage_seen else None,
        duration_ms=_whole(duration),
        start_time=start,
    )


def _as_number(value: Any) -> float:
    """``Number(value ?? 0)``."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return int(number) if number.is_integer() else number


def _whole(value: float | None) -> float | None:
    return int(value) if value is not None and float(value).is_integer() else value
