"""The ``claude-cli`` provider (``claude``, ``claude-code``, and ``cc-mirror``'s variants): Claude Code run
as AgentV 4.42.4's ``ClaudeCliProvider`` runs it, and its ``stream-json`` output read as AgentV reads it.

Started as ``EXECUTABLE -p --output-format stream-json --include-partial-messages --verbose``, then
``--dangerously-skip-permissions`` (unless ``bypass_permissions: false``), ``--model M``, ``--max-turns N``;
the prompt document on stdin; in the eval's workspace (else the target's ``cwd``, else here); with this
process's environment less ``CLAUDECODE`` and ``CLAUDE_CODE_ENTRYPOINT`` (a nested Claude Code would
refuse to start).

The stream is one JSON event per line. Each ``assistant`` event is one assistant message: its text blocks
(joined by newlines; content blocks when an image is among them) and its ``tool_use`` blocks as tool calls
(name, arguments, id; names made canonical). The ``result`` event gives the cost, the duration and the
usage: input counts cache reads and cache writes, ``cached`` the cache reads. AgentV keeps nothing else of
the stream (tool results, per-call timings), and neither does evalstore, so the trace its graders grade
is AgentV's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message, candidate_text
from evalstore.replay.piai.config import _number
from evalstore.replay.targets import agent_cli
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec
from evalstore.replay.targets.tool_names import normalize

LABEL = "Claude CLI"
INSTALL = "Install claude-code or ensure it is in PATH."
NESTED_SESSION_MARKERS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    argv(spec, config)


def validate_cc_mirror(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    argv(spec, _cc_mirror(spec, config))


def run_cc_mirror(request: RunRequest) -> TargetOutcome:
    """``cc-mirror``: Claude Code as a cc-mirror variant installed it, run as ``claude-cli``."""
    return run(replace(request, config=_cc_mirror(request.spec, request.config)))


def _cc_mirror(spec: TargetSpec, config: dict[str, Any]) -> dict[str, Any]:
    """AgentV's ``cc-mirror`` case: without ``executable``, the variant's binary (``variant``, else the
    target's name) from ``~/.cc-mirror/VARIANT/variant.json``'s ``binaryPath``."""
    if config.get("executable"):
        return config
    variant = _optional_text(config.get("variant")) or spec.name
    where = Path.home() / ".cc-mirror" / variant / "variant.json"
    prefix = f'cc-mirror variant "{variant}": {where}'
    if not where.exists():
        raise spec.fail(f'{prefix} not found. Install the variant or set "executable" explicitly.')
    try:
        binary = json.loads(where.read_text(encoding="utf-8")).get("binaryPath")
    except (OSError, ValueError, AttributeError) as exc:
        raise spec.fail(f'cc-mirror variant "{variant}": failed to parse {where}: {exc}') from None
    if not isinstance(binary, str) or not binary.strip():
        raise spec.fail(f'{prefix} missing "binaryPath" field')
    return {**config, "executable": binary}


def run(request: RunRequest) -> TargetOutcome:
    spec, config = request.spec, request.config
    command = argv(spec, config)
    timeout = agent_cli.timeout_seconds(request, spec)
    cwd = agent_cli.working_folder(request, _optional_text(config.get("cwd")))
    ran = agent_cli.run_agent(
        command,
        agent_cli.prompt_document(request),
        cwd=cwd,
        env=agent_cli.environment(drop=NESTED_SESSION_MARKERS),
        timeout=timeout,
    )
    failed = agent_cli.failure(ran, LABEL, command[0], INSTALL)
    stderr = ran.child.stderr_text()[-10_000:]
    if failed is not None:
        return agent_cli.failed_outcome(spec, ran, failed, stderr, cwd)
    outcome = read_stream(ran.lines)
    outcome.exit_code = ran.child.exit_code
    outcome.stderr = stderr
    outcome.cwd = cwd
    if outcome.duration_ms is None:
        outcome.duration_ms = round(ran.child.duration_ms)
    return outcome


def argv(spec: TargetSpec, config: dict[str, Any]) -> list[str]:
    """``buildArgs`` after the executable (``executable``, ``command`` or ``binary``; default ``claude``)."""
    executable = executable_of(spec, config, "claude")
    args = [executable, "-p", "--output-format", "stream-json", "--include-partial-messages", "--verbose"]
    if _boolean(spec, config.get("bypass_permissions")) is not False:
        args.append("--dangerously-skip-permissions")
    model = _optional_text(config.get("model"))
    if model:
        args += ["--model", model]
    turns = config.get("max_turns")
    if isinstance(turns, (int, float)) and not isinstance(turns, bool):
        args += ["--max-turns", _js_number(turns)]
    _number(spec, config.get("timeout_seconds"), f"{spec.name} claude timeout (seconds)")
    return args


def executable_of(spec: TargetSpec, config: dict[str, Any], default: str) -> str:
    for key in ("executable", "command", "binary"):
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise spec.fail(f"{spec.name} {key} must be a string")
        if value.strip():
            return value.strip()
        break
    return default


def read_stream(lines: list[str]) -> TargetOutcome:
    """AgentV's reading of Claude Code's ``stream-json`` events (see the module's docstring)."""
    messages: list[Message] = []
    usage: dict[str, Any] | None = None
    cost: float | None = None
    duration: float | None = None
    for line in lines:
        event = agent_cli.json_object(line)
        if event is None:
            continue
        if event.get("type") == "assistant" and isinstance(event.get("message"), dict):
            content = event["message"].get("content")
            calls = tool_calls(content)
            message: dict[str, Any] = {"role": "assistant"}
            shown = content_blocks(content)
            text = agent_cli.text_content(content)
            if shown is not None:
                message["content"] = shown
            elif text is not None:
                message["content"] = text
            if calls:
                message["tool_calls"] = calls
            messages.append(Message.model_validate(message))
        if event.get("type") == "result":
            if _is_number(event.get("total_cost_usd")):
                cost = event["total_cost_usd"]
            if _is_number(event.get("duration_ms")):
                duration = event["duration_ms"]
            if isinstance(event.get("usage"), dict):
                usage = token_usage(event["usage"])
    return TargetOutcome(
        messages=messages,
        output_text=candidate_text(messages),
        token_usage=usage,
        cost_usd=cost,
        duration_ms=duration,
    )


def token_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """The ``result`` event's usage as AgentV adds it up (a value that is null or missing counts 0)."""

    def count(key: str) -> Any:
        value = usage.get(key)
        return 0 if value is None else value

    out: dict[str, Any] = {
        "input": count("input_tokens") + count("cache_read_input_tokens") + count("cache_creation_input_tokens"),
        "output": count("output_tokens"),
    }
    if usage.get("cache_read_input_tokens") is not None:
        out["cached"] = usage["cache_read_input_tokens"]
    if usage.get("reasoning_tokens") is not None:
        out["reasoning"] = usage["reasoning_tokens"]
    return out


def content_blocks(content: Any) -> list[dict[str, Any]] | None:
    """``toContentArray``: text and image blocks, only when an image is among them."""
    if not isinstance(content, list):
        return None
    blocks: list[dict[str, Any]] = []
    images = False
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image" and isinstance(part.get("source"), dict):
            source = part["source"]
            media = part.get("media_type") if isinstance(part.get("media_type"), str) else None
            media = media or (source.get("media_type") if isinstance(source.get("media_type"), str) else None)
            media = media or "application/octet-stream"
            if isinstance(source.get("data"), str) and source["data"]:
                data = f"data:{media};base64,{source['data']}"
            elif isinstance(part.get("url"), str) and part["url"]:
                data = part["url"]
            else:
                continue
            blocks.append({"type": "image", "media_type": media, "source": data})
            images = True
    return blocks if images and blocks else None


def tool_calls(content: Any) -> list[dict[str, Any]]:
    """``extractToolCalls``: each ``tool_use`` block as ``{tool, input, id}``, its name made canonical."""
    if not isinstance(content, list):
        return []
    calls = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "tool_use" and isinstance(part.get("name"), str):
            call: dict[str, Any] = {"tool": part["name"], "input": part.get("input")}
            if isinstance(part.get("id"), str):
                call["id"] = part["id"]
            calls.append(normalize("claude-cli", call))
    return calls


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _js_number(value: float) -> str:
    """``String(n)`` for a number of turns."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def _optional_text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _boolean(spec: TargetSpec, value: Any) -> bool | None:
    """``resolveOptionalBoolean``."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        return value.strip().lower() in ("true", "1")
    raise spec.fail(f"{spec.name} bypass_permissions: expected boolean value")
