"""What AgentV 4.42.4's coding-agent CLI providers (``claude-cli``, ``copilot-cli``, ``pi-cli``) share: the
prompt they are given (``preread.ts``' ``buildPromptDocument`` over the question in ``agent`` mode, files
named by absolute path), the folder they run in, the environment, running the process, and the errors
AgentV words.

Each provider module builds its argv and reads its own output stream into messages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalstore.replay.content import FileBlock, Message, question_text
from evalstore.replay.processes.children import ChildResult, run_child
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec

DEFAULT_TIMEOUT_SECONDS = 1800.0
"""Used when neither ``--timeout`` nor the target's ``timeout_seconds`` says (AgentV then waits on its
eval-level agent timeout)."""
MAX_OUTPUT_BYTES = 200 * 1024 * 1024
"""Cap on an agent's stdout: a stream of JSON events, long but finite."""


def _resolved(block: FileBlock) -> str | None:
    """The file's absolute path when the eval's loader found it (AgentV's ``resolvedPath``)."""
    for key in ("resolved_path", "resolvedPath"):
        value = getattr(block, key, None)
        if isinstance(value, str) and value:
            return value
    return block.path if os.path.isabs(block.path) else None


def agent_question(messages: list[Message], base_dir: str | None) -> str:
    """``buildPromptInputs(test, 'agent').question``: a file block is ``<file: path="ABSOLUTE">`` (the path
    as written when the file was not found)."""
    shown = []
    for message in messages:
        if isinstance(message.content, list):
            blocks = [
                b.model_copy(update={"path": _resolved(b) or b.path}) if isinstance(b, FileBlock) else b
                for b in message.content
            ]
            message = message.model_copy(update={"content": blocks})
        shown.append(message)
    return question_text(shown, base_dir=base_dir, file_refs=True)


def input_files(messages: list[Message]) -> list[str]:
    """``collectResolvedInputFilePaths`` then ``normalizeInputFiles``: every found file of the input, once."""
    seen: dict[str, None] = {}
    for message in messages:
        if not isinstance(message.content, list):
            continue
        for block in message.content:
            if isinstance(block, FileBlock) and (found := _resolved(block)):
                seen.setdefault(os.path.abspath(found), None)
    return list(seen)


def file_uri(path: str) -> str:
    normal = path.replace("\\", "/")
    return f"file:///{normal}" if len(normal) > 2 and normal[1] == ":" else f"file://{normal}"


def prompt_document(request: RunRequest) -> str:
    """``buildPromptDocument``: the mandatory pre-read list of input files (when there are any), then the
    question under ``[[ ## user_query ## ]]``."""
    question = agent_question(request.test.input, str(request.eval_dir)).strip()
    files = input_files(request.test.input)
    parts: list[str] = []
    if files:
        listed = "\n".join(f"* [{os.path.basename(f)}]({file_uri(f)})" for f in files)
        block = "\n".join(
            [
                f"Read all input files:\n{listed}.",
                "If any file is missing, fail with ERROR: missing-file <filename> and stop.",
                "Then apply system_instructions on the user query below.",
            ]
        )
        parts += ["\n", block]
    parts += ["\n[[ ## user_query ## ]]\n", question]
    return "\n".join(parts).strip()


def working_folder(request: RunRequest, configured: str | None) -> Path | None:
    """Where AgentV starts the agent: the test's workspace when the eval configures one, else the target's
    ``cwd`` (relative to where evalstore runs, as AgentV resolves it), else evalstore's own folder."""
    if request.workspace_configured:
        return request.workspace
    if configured:
        return Path(configured).expanduser().resolve()
    return None


def environment(drop: tuple[str, ...] = (), add: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent's environment: evalstore's, less ``drop``, plus ``add``."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, **(add or {})}


def timeout_seconds(request: RunRequest, spec: TargetSpec, default: float = DEFAULT_TIMEOUT_SECONDS) -> float:
    """``--timeout``, else the target's ``timeout_seconds`` (``resolveTimeoutMs``: a number or a numeric
    string, more than zero), else ``default``."""
    from evalstore.replay.piai.config import _number

    configured = _number(spec, request.config.get("timeout_seconds"), f"{spec.name} timeout (seconds)")
    if configured is not None and configured <= 0:
        raise spec.fail(f"{spec.name} timeout must be greater than zero seconds")
    return request.timeout or (float(configured) if configured else default)


@dataclass
class Ran:
    """One agent process, finished."""

    child: ChildResult
    stdout: str
    timeout: float

    @property
    def lines(self) -> list[str]:
        """Its stdout's non-blank lines, trimmed (how AgentV feeds its stream parsers)."""
        return [line.strip() for line in self.stdout.replace("\r\n", "\n").split("\n") if line.strip()]


def run_agent(argv: list[str], prompt: str, *, cwd: Path | None, env: dict[str, str], timeout: float) -> Ran:
    child = run_child(
        argv,
        prompt.encode("utf-8"),
        timeout=timeout,
        max_output_bytes=MAX_OUTPUT_BYTES,
        cwd=None if cwd is None else str(cwd),
        env=env,
        die_with_parent=True,
    )
    return Ran(child, child.stdout.decode("utf-8", errors="replace"), timeout)


def failure(ran: Ran, label: str, executable: str, install: str) -> str | None:
    """AgentV's words for an agent that did not finish: not found, timed out, or a non-zero exit (with its
    stderr, else its stdout)."""
    child = ran.child
    if child.spawn_error:
        if "No such file" in child.spawn_error or "not found" in child.spawn_error:
            return f"{label} executable '{executable}' was not found on PATH. {install}"
        return f"{label}: {child.spawn_error}"
    if child.timed_out:
        return f"{label} timed out after {math.ceil(ran.timeout)}s"
    if child.output_exceeded:
        return f"{label} wrote more than {MAX_OUTPUT_BYTES} bytes to stdout; it was stopped"
    if child.exit_code != 0:
        detail = child.stderr_text().strip() or ran.stdout.strip()
        code = -1 if child.exit_code is None or child.exit_code < 0 else child.exit_code
        prefix = f"{label} exited with code {code}"
        return f"{prefix}: {detail[-2000:]}" if detail else prefix
    return None


def failed_outcome(spec: TargetSpec, ran: Ran, failed: str, stderr: str, cwd: Path | None) -> TargetOutcome:
    """An agent run that gave no answer: a timeout or an error, with its exit code and stderr's tail."""
    return TargetOutcome(
        messages=[],
        exit_code=ran.child.exit_code,
        status="timeout" if ran.child.timed_out else "error",
        error=f"target '{spec.name}': {failed}",
        stderr=stderr,
        cwd=cwd,
    )


def json_object(line: str) -> dict[str, Any] | None:
    """``tryParseJson``: the line as a JSON object, else None."""
    import json

    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def text_content(content: Any) -> str | None:
    """What AgentV's Claude and pi providers each write out (``extractTextContent``, ``extractPiTextContent``):
    a string as it is; text blocks joined by newlines; none when there are none."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    return "\n".join(texts) if texts else None
