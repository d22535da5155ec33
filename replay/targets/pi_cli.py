"""The ``pi-cli`` provider: the pi coding agent run as AgentV 4.42.4's ``PiCliProvider`` runs it, and its
``--mode json`` events read as AgentV reads them.

Started as ``EXECUTABLE [--provider P] [--model M] [--api-key K] --mode json --print --no-session [--tools T]
[--thinking T] [args...] [@FILE...] PROMPT``: the question (``@[Role]:`` markers written ``[[Role]]:``, the
``system_prompt`` before it), each input file as ``@path``, stdin closed. ``executable`` may carry arguments
of its own (split on whitespace). It runs in the eval's workspace, else the target's ``cwd``, else a
temporary folder of its own, where the question is also written to ``prompt.md``. Its environment is this
process's with the key under the subprovider's variable (``azure``: ``AZURE_OPENAI_API_KEY`` and the
endpoint's ``AZURE_OPENAI_*``), and, when a subprovider is named, other providers' variables removed.

The messages are ``agent_end``'s (else each ``turn_end``'s message): text, tool calls from ``toolCall``/
``tool_use`` blocks (a ``tool_result`` block fills its output), the start time and the model's metadata;
the last assistant message without text gets the last ``message_end`` text; tool calls seen only in
``tool_execution_start``/``_end`` events join the last assistant message. Usage is ``agent_end``'s, else
the messages' summed. AgentV keeps no cost from pi.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message, candidate_text
from evalstore.replay.targets import agent_cli
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec
from evalstore.replay.targets.claude_cli import executable_of
from evalstore.replay.targets.copilot_cli import extra_args
from evalstore.replay.targets.tool_names import normalize
from evalstore.replay.targetsfile.loader import ENV_REFERENCE

LABEL = "Pi CLI"
ENV_KEYS = {
    "google": "GEMINI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "groq": "GROQ_API_KEY",
    "xai": "XAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
}
# Each provider's own variables: naming a subprovider removes the others' (pi picks a provider by them).
OWN_PREFIXES = {
    "openrouter": ("OPENROUTER_",),
    "anthropic": ("ANTHROPIC_",),
    "openai": ("OPENAI_",),
    "azure-openai-responses": ("AZURE_OPENAI_",),
    "google": ("GEMINI_", "GOOGLE_GENERATIVE_AI_"),
    "gemini": ("GEMINI_", "GOOGLE_GENERATIVE_AI_"),
    "groq": ("GROQ_",),
    "xai": ("XAI_",),
}


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    _settings(spec, config)


def _settings(spec: TargetSpec, config: dict[str, Any]) -> dict[str, Any]:
    """``resolvePiCliConfig``: the key only as a ``${{ VAR }}`` reference; the rest as written."""

    def text(*keys: str) -> str | None:
        for key in keys:
            value = config.get(key)
            if value is not None:
                if not isinstance(value, str):
                    raise spec.fail(f"{spec.name} pi-cli {key} must be a string")
                return value.strip() or None
        return None

    written = spec.fields.get("api_key")
    blank = isinstance(written, str) and not written.strip()
    if (
        written is not None
        and not blank
        and not (isinstance(written, str) and ENV_REFERENCE.fullmatch(written.strip()))
    ):
        raise spec.fail(
            f"{spec.name} pi-cli api key must use ${{{{ VARIABLE_NAME }}}} syntax for environment variables "
            "(AgentV 4.42.4 refuses a literal value here)"
        )
    return {
        "executable": executable_of(spec, config, "pi"),
        "subprovider": text("subprovider"),
        "model": text("model", "pi_model"),
        "api_key": text("api_key"),
        "base_url": text("base_url", "endpoint"),
        "tools": text("tools", "pi_tools"),
        "thinking": text("thinking", "pi_thinking"),
        "args": extra_args(spec, config, "pi-cli"),
        "system_prompt": text("system_prompt"),
        "cwd": text("cwd"),
    }


def cli_provider(name: str) -> str:
    """``resolveCliProvider``: ``azure`` is pi's ``azure-openai-responses``; other names as written."""
    return "azure-openai-responses" if name.lower() == "azure" else name


def argv(settings: dict[str, Any], question: str, files: list[str]) -> list[str]:
    """``buildPiArgs`` after the executable's own words."""
    words = settings["executable"].split()
    args = list(words)
    if settings["subprovider"]:
        args += ["--provider", cli_provider(settings["subprovider"])]
    if settings["model"]:
        args += ["--model", settings["model"]]
    if settings["api_key"] and (settings["subprovider"] or "").lower() != "azure":
        args += ["--api-key", settings["api_key"]]
    args += ["--mode", "json", "--print", "--no-session"]
    if settings["tools"]:
        args += ["--tools", settings["tools"]]
    if settings["thinking"]:
        args += ["--thinking", settings["thinking"]]
    args += settings["args"]
    args += [f"@{f}" for f in files]
    prompt = f"{settings['system_prompt']}\n\n{question}" if settings["system_prompt"] else question
    args.append(re.sub(r"@\[([^\]]+)\]:", r"[[\1]]:", prompt))
    return args


def environment(settings: dict[str, Any]) -> dict[str, str]:
    """``buildEnv``."""
    env = dict(os.environ)
    provider = (settings["subprovider"] or "google").lower()
    if provider == "azure":
        if settings["api_key"]:
            env["AZURE_OPENAI_API_KEY"] = settings["api_key"]
        if settings["base_url"]:
            if re.match(r"^https?://", settings["base_url"]):
                env["AZURE_OPENAI_BASE_URL"] = settings["base_url"]
            else:
                found = re.match(r"^https?://([^./]+)", settings["base_url"])
                env["AZURE_OPENAI_RESOURCE_NAME"] = found.group(1) if found else settings["base_url"]
    elif settings["api_key"] and ENV_KEYS.get(provider):
        env[ENV_KEYS[provider]] = settings["api_key"]
    if settings["subprovider"]:
        own = OWN_PREFIXES.get(cli_provider(settings["subprovider"]), ())
        others = [p for key, prefixes in OWN_PREFIXES.items() if key != provider for p in prefixes]
        env = {k: v for k, v in env.items() if not (k.startswith(tuple(others)) and not k.startswith(own))}
    return env


def run(request: RunRequest) -> TargetOutcome:
    spec = request.spec
    settings = _settings(spec, request.config)
    question = agent_cli.agent_question(request.test.input, str(request.eval_dir))
    files = agent_cli.input_files(request.test.input)
    command = argv(settings, question, files)
    own_folder: Path | None = None
    if request.workspace_configured:
        cwd = request.workspace
    elif settings["cwd"]:
        cwd = Path(settings["cwd"]).expanduser().resolve()
    else:
        own_folder = cwd = Path(tempfile.mkdtemp(prefix="agentv-pi-"))
    # AgentV's pi provider sets no limit of its own; evalstore's default bounds a hung agent.
    timeout = agent_cli.timeout_seconds(request, spec)
    try:
        (cwd / "prompt.md").write_text(question, encoding="utf-8")
        ran = agent_cli.run_agent(command, "", cwd=cwd, env=environment(settings), timeout=timeout)
        stderr = ran.child.stderr_text()[-10_000:]
        failed = _failure(ran, settings["executable"].split()[0] if settings["executable"].split() else "")
        if failed is None:
            try:
                events = parse_events(ran.stdout)
            except ValueError as exc:
                failed = str(exc)
        if failed is not None:
            return agent_cli.failed_outcome(spec, ran, failed, stderr, cwd)
        messages = messages_of(events)
        return TargetOutcome(
            messages=messages,
            output_text=candidate_text(messages),
            token_usage=token_usage(events),
            duration_ms=round(ran.child.duration_ms),
            exit_code=ran.child.exit_code,
            stderr=stderr,
            cwd=None if own_folder else cwd,
        )
    finally:
        if own_folder is not None:
            shutil.rmtree(own_folder, ignore_errors=True)


def _failure(ran: agent_cli.Ran, executable: str) -> str | None:
    child = ran.child
    if child.spawn_error and ("No such file" in child.spawn_error or "not found" in child.spawn_error):
        return f"{LABEL} executable '{executable}' was not found. Update the target executable or add it to PATH."
    return agent_cli.failure(ran, LABEL, executable, "")


def parse_events(stdout: str) -> list[Any]:
    """``parsePiJsonl``: every line that is JSON; none at all is an error."""
    text = stdout.strip()
    if not text:
        raise ValueError(f"{LABEL} produced no output")
    events = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip():
            try:
                events.append(json.loads(line.strip()))
            except ValueError:
                continue
    if not events:
        raise ValueError(f"{LABEL} produced no valid JSON output")
    return events


def _tool_calls(content: Any) -> list[dict[str, Any]]:
    """``extractToolCalls`` of a pi message's content."""
    if not isinstance(content, list):
        return []
    calls: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_use" and isinstance(part.get("name"), str):
            call = {"tool": part["name"], "input": part.get("input")}
        elif kind in ("toolCall", "tool_call") and isinstance(part.get("name"), str):
            call = {"tool": part["name"], "input": part.get("arguments", part.get("input"))}
        elif kind == "tool_result" and isinstance(part.get("tool_use_id"), str):
            for index, existing in enumerate(calls):
                if existing.get("id") == part["tool_use_id"]:
                    calls[index] = {**existing, "output": part.get("content")}
                    break
            continue
        else:
            continue
        if isinstance(part.get("id"), str):
            call["id"] = part["id"]
        calls.append(normalize("pi-cli", call))
    return calls


def _message(message: Any) -> dict[str, Any] | None:
    """``convertPiMessage``."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return None
    out: dict[str, Any] = {"role": message["role"]}
    text = agent_cli.text_content(message.get("content"))
    if text is not None:
        out["content"] = text
    calls = _tool_calls(message.get("content"))
    if calls:
        out["tool_calls"] = calls
    stamp = message.get("timestamp")
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
        out["start_time"] = (
            datetime.fromtimestamp(stamp / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    elif isinstance(stamp, str):
        out["start_time"] = stamp
    metadata = {k: message[k] for k in ("api", "provider", "model", "usage", "stopReason") if _truthy(message.get(k))}
    if metadata:
        out["metadata"] = metadata
    return out


def _truthy(value: Any) -> bool:
    """JavaScript's truthiness: an object or a list is true even when empty."""
    return isinstance(value, (dict, list)) or bool(value)


def messages_of(events: list[Any]) -> list[Message]:
    """``extractMessages`` (see the module's docstring)."""
    records = [e for e in events if isinstance(e, dict)]
    messages: list[dict[str, Any]] | None = None
    for event in reversed(records):
        if event.get("type") == "agent_end" and isinstance(event.get("messages"), list):
            messages = [m for m in map(_message, event["messages"]) if m is not None]
            break
    if messages is None:
        messages = [m for m in (_message(e.get("message")) for e in records if e.get("type") == "turn_end") if m]
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant" and not messages[index].get("content"):
            for event in reversed(records):
                said = event.get("message") if event.get("type") == "message_end" else None
                if isinstance(said, dict) and said.get("role") == "assistant":
                    text = agent_cli.text_content(said.get("content"))
                    if text:
                        messages[index] = {**messages[index], "content": text}
                        break
            break
    _add_event_tool_calls(messages, records)
    return [Message.model_validate(m) for m in messages]


def _key(call: dict[str, Any]) -> str:
    return f"{call['tool']}:{json.dumps(call.get('input'), separators=(',', ':'), ensure_ascii=False)}"


def _add_event_tool_calls(messages: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """``extractToolCallsFromEvents`` then ``injectEventToolCalls``."""
    starts: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}
    for event in events:
        if event.get("type") == "tool_execution_start" and isinstance(event.get("toolName"), str):
            ident = event["toolCallId"] if isinstance(event.get("toolCallId"), str) else f"anon-{len(starts)}"
            starts[ident] = {"tool": event["toolName"], "input": event.get("args")}
        elif event.get("type") == "tool_execution_end" and isinstance(event.get("toolCallId"), str):
            results[event["toolCallId"]] = event.get("result")
    found = []
    for ident, call in starts.items():
        entry = {**call, "output": results.get(ident)}
        if not ident.startswith("anon-"):
            entry["id"] = ident
        found.append(normalize("pi-cli", {k: v for k, v in entry.items() if v is not None or k == "tool"}))
    if not found:
        return
    ids = {c["id"] for m in messages for c in m.get("tool_calls") or [] if c.get("id")}
    keys = {_key(c) for m in messages for c in m.get("tool_calls") or []}
    missing = [c for c in found if not (c.get("id") and c["id"] in ids) and _key(c) not in keys]
    if not missing:
        return
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            messages[index] = {**messages[index], "tool_calls": [*(messages[index].get("tool_calls") or []), *missing]}
            return
    messages.append({"role": "assistant", "content": "", "tool_calls": missing})


def _count(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _first(usage: dict[str, Any], *keys: str) -> Any:
    """JavaScript's ``a ?? b ?? c``: the first that is neither null nor missing."""
    for key in keys:
        if usage.get(key) is not None:
            return usage[key]
    return None


def token_usage(events: list[Any]) -> dict[str, Any] | None:
    """``extractTokenUsage``: the last ``agent_end``'s usage, else its messages' usage summed."""
    for event in reversed([e for e in events if isinstance(e, dict)]):
        if event.get("type") != "agent_end":
            continue
        usage = event.get("usage")
        if isinstance(usage, dict):
            tokens_in = _count(_first(usage, "input_tokens", "inputTokens", "input"))
            tokens_out = _count(_first(usage, "output_tokens", "outputTokens", "output"))
            if tokens_in is not None or tokens_out is not None:
                out: dict[str, Any] = {"input": tokens_in or 0, "output": tokens_out or 0}
                cached = _count(_first(usage, "cache_read_input_tokens", "cached", "cachedTokens"))
                reasoning = _count(_first(usage, "reasoning_tokens", "reasoningTokens", "reasoning"))
                if cached is not None:
                    out["cached"] = cached
                if reasoning is not None:
                    out["reasoning"] = reasoning
                return out
        if isinstance(event.get("messages"), list):
            return _summed(event["messages"])
    return None


def _summed(messages: list[Any]) -> dict[str, Any] | None:
    total_in: float = 0
    total_out: float = 0
    cached: float | None = None
    found = False
    for message in messages:
        usage = message.get("usage") if isinstance(message, dict) else None
        if not isinstance(usage, dict):
            continue
        tokens_in = _count(_first(usage, "input_tokens", "inputTokens", "input"))
        tokens_out = _count(_first(usage, "output_tokens", "outputTokens", "output"))
        if tokens_in is None and tokens_out is None:
            continue
        found = True
        total_in += tokens_in or 0
        total_out += tokens_out or 0
        read = _count(_first(usage, "cache_read_input_tokens", "cached", "cachedTokens"))
        if read is not None:
            cached = (cached or 0) + read
    if not found:
        return None
    out: dict[str, Any] = {"input": total_in, "output": total_out}
    if cached is not None:
        out["cached"] = cached
    return out
