"""The ``copilot-cli`` provider (``copilot``): GitHub Copilot CLI driven over the Agent Client Protocol, as
AgentV 4.42.4's ``CopilotCliProvider`` drives it.

Started as ``EXECUTABLE --acp --stdio --allow-all-tools --yolo [--model M] [args...]`` in the eval's
workspace (else the target's ``cwd``, else here), with this process's environment plus, when the target
names a ``base_url``, Copilot's own-model settings (``COPILOT_PROVIDER_*``). ``executable: copilot`` (the
default) is Copilot's native binary when a ``node_modules`` above the current folder or a global npm
root holds ``@github/copilot-<os>-<arch>``, else ``copilot`` on PATH.

The conversation (JSON-RPC 2.0, one message per line both ways): ``initialize`` (protocol 1; the client
can read and write files and use a terminal), ``session/new`` (the folder, no MCP servers),
``session/prompt`` (the ``system_prompt`` as a first text block when set, then the prompt document);
every permission request is allowed. While the prompt runs, ``session/update`` notifications are read as
AgentV reads them: a tool call is timed from its ``tool_call`` to the ``tool_call_update`` that completes
it (one that arrives completed takes 0 ms), its title (or kind) made a canonical name, its ``rawInput``
and ``rawOutput`` kept; ``agent_message_chunk`` texts make the answer; ``usage_update`` gives the usage
and adds up the cost; the prompt's own ``usage``, when it counts tokens, wins. The answer is one assistant
message carrying the tool calls. A tool call Copilot rejected fails the test with AgentV's advice.
"""

from __future__ import annotations

import json
import os
import platform
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalstore.replay.content import Message
from evalstore.replay.processes.children import conversing_child
from evalstore.replay.targets import agent_cli
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec
from evalstore.replay.targets.claude_cli import executable_of
from evalstore.replay.targets.tool_names import normalize
from evalstore.replay.targetsfile.loader import ENV_REFERENCE
from evalstore.replay.workspace.changes import session_artifacts

LABEL = "Copilot CLI"
PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT_SECONDS = 90 * 60.0
"""``DEFAULT_COPILOT_TIMEOUT_MS``."""
STDERR_TAIL_CHARS = 10_000
_METHOD_NOT_FOUND = -32601
_INTERNAL_ERROR = -32603
# What the ACP client AgentV builds answers: permissions only. The SDK's handler for the file and
# terminal methods finds no implementation on that client and answers an internal error.
_CLIENT_METHODS_WITHOUT_HANDLER = {
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
    "terminal/output",
    "terminal/release",
    "terminal/wait_for_exit",
    "terminal/kill",
}
_STATUSES = {"pending", "in_progress", "completed", "failed"}


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    argv(spec, config)
    provider_environment(spec, config)


def argv(spec: TargetSpec, config: dict[str, Any]) -> list[str]:
    executable = executable_of(spec, config, "copilot")
    if executable == "copilot":
        executable = native_binary() or executable
    args = [executable, "--acp", "--stdio", "--allow-all-tools", "--yolo"]
    model = config.get("model")
    if isinstance(model, str) and model.strip():
        args += ["--model", model.strip()]
    return args + extra_args(spec, config, "copilot-cli")


def extra_args(spec: TargetSpec, config: dict[str, Any], label: str) -> list[str]:
    """``resolveOptionalStringArray``: ``args`` (or ``arguments``), each a non-empty string, trimmed."""
    raw = config.get("args", config.get("arguments"))
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise spec.fail(f"{spec.name} {label} args must be an array of strings")
    out = []
    for index, item in enumerate(raw):
        if not isinstance(item, str):
            raise spec.fail(f"{spec.name} {label} args[{index}] must be a string")
        if not item.strip():
            raise spec.fail(f"{spec.name} {label} args[{index}] cannot be empty")
        out.append(item.strip())
    return out


def native_binary() -> str | None:
    """``resolvePlatformCliPath`` without AgentV's own install: ``@github/copilot-<os>-<arch>/copilot`` in a
    ``node_modules`` of the current folder or one above it (ten levels), then in the global npm roots."""
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    machine = {"x86_64": "x64", "amd64": "x64", "arm64": "arm64", "aarch64": "arm64"}.get(platform.machine().lower())
    if system is None or machine is None:
        return None
    package = Path("@github") / f"copilot-{system}-{machine}" / "copilot"
    folder = Path.cwd()
    for _ in range(10):
        candidate = folder / "node_modules" / package
        if candidate.exists():
            return str(candidate)
        if folder.parent == folder:
            break
        folder = folder.parent
    home = Path.home()
    roots = [
        Path("/opt/homebrew/lib/node_modules"),
        Path("/usr/local/lib/node_modules"),
        Path("/usr/lib/node_modules"),
        home / ".npm-global" / "lib" / "node_modules",
        home / ".local" / "lib" / "node_modules",
    ]
    prefix = os.environ.get("npm_config_prefix")  # noqa: SIM112 (npm's own lower-case name)
    if prefix:
        roots.append(Path(prefix) / "lib" / "node_modules")
    for root in roots:
        for candidate in (root / package, root / "@github" / "copilot" / "node_modules" / package):
            if candidate.exists():
                return str(candidate)
    return None


def provider_environment(spec: TargetSpec, config: dict[str, Any]) -> dict[str, str]:
    """``buildCopilotCliProviderEnv``: with a ``base_url``, Copilot's own-model settings (``subprovider``,
    the key as a ``${{ VAR }}`` reference: ``bearer_token`` else ``api_key``, ``api_format``, ``api_version``)."""
    base_url = _text(config.get("base_url"))
    if not base_url:
        return {}
    env = {"COPILOT_PROVIDER_BASE_URL": base_url}
    kind = _text(config.get("subprovider"))
    if kind:
        env = {"COPILOT_PROVIDER_TYPE": kind, **env}
    secrets = {}
    for key in ("api_key", "bearer_token"):
        written = spec.fields.get(key)
        if written is None:
            continue
        if not isinstance(written, str) or (written.strip() and not ENV_REFERENCE.fullmatch(written.strip())):
            raise spec.fail(
                f"{spec.name} copilot {key.replace('_', ' ')} must use ${{{{ VARIABLE_NAME }}}} syntax for "
                "environment variables (AgentV 4.42.4 refuses a literal value here)"
            )
        value = _text(config.get(key))
        if value:
            secrets[key] = value
    if "bearer_token" in secrets:
        env["COPILOT_PROVIDER_BEARER_TOKEN"] = secrets["bearer_token"]
    elif "api_key" in secrets:
        env["COPILOT_PROVIDER_API_KEY"] = secrets["api_key"]
    wire = _text(config.get("api_format"))
    if wire:
        env["COPILOT_PROVIDER_WIRE_API"] = wire
    version = _text(config.get("api_version"))
    if version:
        env["COPILOT_PROVIDER_AZURE_API_VERSION"] = version
    return env


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class _Session:
    """What the session's notifications said, as AgentV's ``sessionUpdate`` keeps it."""

    running: dict[str, tuple[dict[str, Any], float]] = field(default_factory=dict)
    done: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""
    usage: dict[str, Any] | None = None
    cost: float | None = None

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "tool_call" and isinstance(update.get("toolCallId"), str) and isinstance(update.get("title"), str):
            self._tool_call(update)
        elif kind == "tool_call_update" and isinstance(update.get("toolCallId"), str):
            status = update.get("status")
            started = self.running.pop(update["toolCallId"], None) if status in ("completed", "failed") else None
            if started is not None:
                call, at = started
                took = round((time.monotonic() - at) * 1000)
                self._finish(call | {"output": update.get("rawOutput"), "end_time": _now(), "duration_ms": took})
        elif kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
                self.answer += content["text"]
        elif kind == "usage_update" and _number(update.get("used")) and _number(update.get("size")):
            self.usage = {"input": update["used"], "output": 0}
            cost = update.get("cost")
            if isinstance(cost, dict) and cost.get("currency") == "USD" and _number(cost.get("amount")):
                self.cost = (self.cost or 0) + cost["amount"]

    def _tool_call(self, update: dict[str, Any]) -> None:
        status = update.get("status")
        if status is not None and status not in _STATUSES:
            return  # not a tool call the protocol's schema accepts
        name = update.get("title") or update.get("kind") or "unknown"
        call = {"tool": name, "input": update.get("rawInput"), "id": update["toolCallId"]}
        if status in (None, "pending", "in_progress"):
            self.running[update["toolCallId"]] = ({**call, "start_time": _now()}, time.monotonic())
        if status in ("completed", "failed"):
            now = _now()
            self._finish(
                call | {"output": update.get("rawOutput"), "start_time": now, "end_time": now, "duration_ms": 0}
            )

    def _finish(self, call: dict[str, Any]) -> None:
        self.done.append(normalize("copilot-cli", {k: v for k, v in call.items() if v is not None}))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Failed(Exception):
    pass


class _Connection:
    """The client side of one ACP connection over the agent's stdin and stdout."""

    def __init__(self, proc: subprocess.Popen[bytes], session: _Session) -> None:
        self.proc = proc
        self.session = session
        self.responses: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.stderr: list[bytes] = []
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def request(self, method: str, params: dict[str, Any], deadline: float) -> Any:
        request_id = self.next_id
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                message = self.responses.get(timeout=left)
            except queue.Empty:
                raise TimeoutError from None
            if message is None:
                raise _Failed(f"{LABEL} exited before answering {method}")
            if message.get("id") != request_id:
                continue
            if "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                raise _Failed(f"{LABEL} answered {method} with an error: {error.get('message', error)}")
            return message.get("result")

    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._write_lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass  # the agent is gone; the reader sees its stdout close

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # the SDK logs and drops a line that is not JSON
                if not isinstance(message, dict):
                    continue
                if "method" in message and "id" in message:
                    self._answer(message)
                elif "method" in message:
                    params = message.get("params")
                    if message["method"] == "session/update" and isinstance(params, dict):
                        update = params.get("update")
                        if isinstance(update, dict):
                            self.session.update(update)
                elif "id" in message:
                    self.responses.put(message)
        except (OSError, ValueError):
            pass
        finally:
            self.responses.put(None)

    def _answer(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method == "session/request_permission":
            reply: dict[str, Any] = {"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
        elif method in _CLIENT_METHODS_WITHOUT_HANDLER:
            reply = {"error": {"code": _INTERNAL_ERROR, "message": "Internal error"}}
        else:
            reply = {"error": {"code": _METHOD_NOT_FOUND, "message": f'"Method not found": {method}'}}
        self._send({"jsonrpc": "2.0", "id": message["id"], **reply})

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            fd = self.proc.stderr.fileno()
            while chunk := os.read(fd, 65536):
                self.stderr.append(chunk)
        except (OSError, ValueError):
            pass

    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", errors="replace")[-STDERR_TAIL_CHARS:]


def run(request: RunRequest) -> TargetOutcome:
    spec, config = request.spec, request.config
    command = argv(spec, config)
    timeout = agent_cli.timeout_seconds(request, spec, DEFAULT_TIMEOUT_SECONDS)
    cwd = agent_cli.working_folder(request, _text(config.get("cwd"))) or Path.cwd()
    env = agent_cli.environment(add=provider_environment(spec, config))
    document = agent_cli.prompt_document(request)
    system = _text(config.get("system_prompt"))
    blocks = ([{"type": "text", "text": system}] if system else []) + [{"type": "text", "text": document}]
    started = time.monotonic()
    start_time = _now()
    session = _Session()
    deadline = started + timeout

    def failed(message: str, status: Any = "error", stderr: str = "") -> TargetOutcome:
        return TargetOutcome(
            messages=[], status=status, error=f"target '{spec.name}': {message}", stderr=stderr, cwd=cwd
        )

    try:
        with conversing_child(command, cwd=str(cwd), env=env) as proc:
            connection = _Connection(proc, session)
            try:
                connection.request(
                    "initialize",
                    {
                        "protocolVersion": PROTOCOL_VERSION,
                        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
                    },
                    deadline,
                )
                opened = connection.request("session/new", {"cwd": str(cwd), "mcpServers": []}, deadline)
                session_id = opened.get("sessionId") if isinstance(opened, dict) else None
                answered = connection.request("session/prompt", {"sessionId": session_id, "prompt": blocks}, deadline)
            except TimeoutError:
                return failed(f"{LABEL} timed out after {int(-(-timeout // 1))}s", "timeout", connection.stderr_text())
            except _Failed as exc:
                time.sleep(0.05)  # let the exit status and stderr arrive
                code = proc.poll()
                detail = connection.stderr_text().strip()
                said = f" (exit code {code})" if code is not None else ""
                return failed(
                    f"{exc}{said}" + (f": {detail[-2000:]}" if detail else ""), stderr=connection.stderr_text()
                )
            stderr = connection.stderr_text()
            exit_code = proc.poll()
    except FileNotFoundError as exc:
        return failed(
            f"Failed to start Copilot CLI executable '{command[0]}' for target '{spec.name}'. "
            f"spawn {command[0]} {'ENOENT' if exc.errno == 2 else exc.strerror}"
        )
    except PermissionError as exc:
        return failed(f"Failed to start Copilot CLI executable '{command[0]}' for target '{spec.name}'. {exc.strerror}")
    usage = answered.get("usage") if isinstance(answered, dict) else None
    if isinstance(usage, dict) and _number(usage.get("totalTokens")) and usage["totalTokens"] > 0:
        tokens: dict[str, Any] = {"input": usage.get("inputTokens"), "output": usage.get("outputTokens")}
        if usage.get("thoughtTokens") is not None:
            tokens["reasoning"] = usage["thoughtTokens"]
        if usage.get("cachedReadTokens") is not None:
            tokens["cached"] = usage["cachedReadTokens"]
        session.usage = tokens
    rejected = [
        c
        for c in session.done
        if isinstance(c.get("output"), dict) and c["output"].get("code") in ("rejected", "denied")
    ]
    if rejected:
        tools = ", ".join(c["tool"] for c in rejected)
        return failed(
            f'Copilot rejected {len(rejected)} tool call(s): {tools}. Add args: ["--yolo"] to your target config '
            "or re-run with --yolo to bypass permission checks.",
            stderr=stderr,
        )
    messages: list[Message] = []
    if session.done:
        messages.append(
            Message.model_validate({"role": "assistant", "content": session.answer or None, "tool_calls": session.done})
        )
    elif session.answer:
        messages.append(Message(role="assistant", content=session.answer))
    # What Copilot saved in its session's ``files/`` instead of the workspace (copilot-cli.ts:353): the folder
    # ACP's session id names under the home folder's session state.
    named = session_id if isinstance(session_id, str) and session_id else None
    session_files = Path.home() / ".copilot" / "session-state" / named / "files" if named else None
    return TargetOutcome(
        messages=messages,
        output_text=session.answer,
        token_usage=session.usage,
        cost_usd=session.cost,
        duration_ms=round((time.monotonic() - started) * 1000),
        start_time=start_time,
        end_time=_now(),
        exit_code=exit_code,
        stderr=stderr,
        cwd=cwd,
        file_changes=session_artifacts(session_files) if session_files else None,
    )
