"""The ``cli`` provider: an agent run as a command, the way AgentV's cli provider runs it.

``command`` is a template. A string is run through ``/bin/sh -c`` with every substituted value
shell-quoted; a list is run as argv with values substituted verbatim (an element that is exactly
``{FILES}`` expands to one argument per file). Placeholders: ``{PROMPT}``, ``{PROMPT_FILE}``,
``{OUTPUT_FILE}``, ``{EVAL_ID}``, ``{ATTEMPT}``, ``{FILES}``; unknown ones are left as written.

The answer is the output file when the agent wrote one (non-empty), else stdout. Either is plain
text or AgentV's JSON ``{"output": [messages], "text"?, "token_usage"?, "cost_usd"?}`` (legacy
``output_messages`` accepted); a JSON object without ``output``/``text`` is plain text, as in AgentV.

Other fields: ``cwd`` (relative to the eval file's directory; default the test workspace),
``timeout_seconds``, ``output_file`` (a fixed answer path, relative to the workspace), ``env`` (extra
environment variables), ``files_format`` (``{path}``/``{basename}``), ``keep_temp_files``,
``healthcheck`` (``{command}`` or ``{url}``, ``type:`` optional as in AgentV; run once before the
run starts). AgentV's spellings are accepted for each: ``command_template``/``commandTemplate``,
``timeoutSeconds``, ``filesFormat``/``attachments_format``, ``keep_output_files``/``keepTempFiles``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalstore.replay.content import FileBlock, Message, last_assistant, question_text
from evalstore.replay.processes.children import run_child
from evalstore.replay.targets.base import RunRequest, TargetOutcome, TargetSpec, TargetStatus, positive_seconds
from evalstore.replay.targetsfile.cli_fields import PLACEHOLDER, field_value
from evalstore.replay.targetsfile.loader import ENV_REFERENCE
from evalstore.store.errors import error_line

DEFAULT_TIMEOUT_SECONDS = 1800.0
MAX_ANSWER_BYTES = 50 * 1024 * 1024
"""Cap on stdout and on the output file: an answer is text, not a data dump."""
ERROR_TAIL_CHARS = 2000

HEALTHCHECK_ATTEMPT = "0"
"""The healthcheck's ``{ATTEMPT}`` (cli.ts ``request.attempt ?? 0``, no request). A test's is its call's
(``RunRequest.attempt``): 0, raised when a failed call is tried again (``--max-retries``); each trial starts
at 0 again."""

HEALTHCHECK_TIMEOUT_SECONDS = 60.0
# What ``sh`` exits with when it cannot find or run the command (POSIX): said plainly, not as a code.
_SHELL_NOT_FOUND = {127: "command not found", 126: "command not executable"}


def validate(spec: TargetSpec, config: dict[str, Any], eval_dir: Path) -> None:
    """Check the configuration and run the ``healthcheck`` once, before any test runs; a failure
    raises TargetConfigError, so a broken target stops the run before it is recorded."""
    command = _command(spec, config, field_value(spec.fields, "command"))
    _cwd(spec, config, eval_dir, eval_dir)
    positive_seconds(spec, field_value(config, "timeout_seconds"), "timeout_seconds")
    env = _environment(spec, config)
    _check_program(spec, command, config, eval_dir, env)
    check = config.get("healthcheck")
    if check is not None:
        _healthcheck(spec, config, check, eval_dir)


def run(request: RunRequest) -> TargetOutcome:
    spec, config = request.spec, request.config
    command = _command(spec, config, field_value(spec.fields, "command"))
    cwd = _cwd(spec, config, request.eval_dir, request.workspace)
    timeout = request.timeout or positive_seconds(spec, field_value(config, "timeout_seconds"), "timeout_seconds")
    timeout = timeout or DEFAULT_TIMEOUT_SECONDS
    env = _environment(spec, config)

    scratch = Path(tempfile.mkdtemp(prefix="evalstore-target-"))
    try:
        prompt = prompt_text(request)
        prompt_file = scratch / "prompt.txt"
        prompt_file.write_text(prompt, encoding="utf-8")
        output_file = _output_file(config, request.workspace, scratch)
        values = {
            "PROMPT": prompt,
            "PROMPT_FILE": str(prompt_file),
            "OUTPUT_FILE": str(output_file),
            "EVAL_ID": request.test.id,
            "ATTEMPT": str(request.attempt),
        }
        files = _input_files(request)
        argv = _render(command, values, files, str(field_value(config, "files_format") or "{path}"))
        env = {
            **env,
            "AGENTV_WORKSPACE_PATH": str(request.workspace),
            "EVALSTORE_WORKSPACE": str(request.workspace),
            "EVALSTORE_EVAL_ID": request.test.id,
        }
        child = run_child(
            argv, b"", timeout=timeout, max_output_bytes=MAX_ANSWER_BYTES, cwd=str(cwd), env=env, die_with_parent=True
        )
        stderr = child.stderr_text()
        failure = _failure(spec, child, timeout, command)
        if failure is not None:
            status, message = failure
            return TargetOutcome(
                messages=[],
                exit_code=child.exit_code,
                status=status,
                error=message,
                stderr=stderr[-10_000:],
                cwd=cwd,
            )
        raw = _read_answer(output_file)
        if raw is None:
            raw = child.stdout.decode("utf-8", errors="replace")
        try:
            outcome = parse_answer(raw)
        except ValueError as exc:
            return TargetOutcome(
                messages=[],
                exit_code=child.exit_code,
                status="error",
                error=f"target '{spec.name}': malformed output: {exc}",
                stderr=stderr[-10_000:],
                cwd=cwd,
            )
        outcome.exit_code = child.exit_code
        outcome.cwd = cwd
        outcome.stderr = stderr[-10_000:]
        return outcome
    finally:
        if not field_value(config, "keep_temp_files"):
            shutil.rmtree(scratch, ignore_errors=True)


def prompt_text(request: RunRequest) -> str:
    """What the agent is asked: the test's input messages rendered as one text, a file named by its path
    (``<file: path="...">``, found where the eval named it) and not embedded, as AgentV asks a cli target
    (``usesFileReferencePrompt``: the agent reads the files itself, passed as ``{FILES}``)."""
    return question_text(request.test.input, base_dir=str(request.eval_dir), file_refs=True)


def parse_answer(raw: str) -> TargetOutcome:
    """Turn the agent's answer text (output file or stdout) into messages; raises ValueError if malformed."""
    text = raw.replace("\r\n", "\n")
    data = _json_object(text)
    if data is not None:
        listed = data.get("output", data.get("output_messages"))
        if isinstance(listed, list) and listed:
            messages = _messages(listed)
        elif "text" in data:
            value = data["text"]
            messages = [Message(role="assistant", content=value if isinstance(value, str) else json.dumps(value))]
        else:
            data = None
    if data is None:
        answer = text.rstrip("\n")
        return TargetOutcome(messages=[Message(role="assistant", content=answer)], output_text=answer)
    usage = data.get("token_usage")
    final = last_assistant(messages)
    output_text = data["text"] if isinstance(data.get("text"), str) else (final.text() if final else "")
    return TargetOutcome(
        messages=messages,
        output_text=output_text,
        token_usage=usage if isinstance(usage, dict) else None,
        cost_usd=_metric(data.get("cost_usd")),
        duration_ms=_metric(data.get("duration_ms")),
    )


def _metric(value: Any) -> float | None:
    """``cost_usd``/``duration_ms`` as AgentV's cli provider keeps them: a number, a negative one dropped."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _messages(items: list[Any]) -> list[Message]:
    messages = []
    for index, item in enumerate(items):
        # Entries without a role are skipped, as AgentV does.
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            continue
        try:
            messages.append(Message.model_validate(item))
        except ValidationError as exc:
            # A content union reports one error per alternative; the deepest names the real fault.
            worst = max(exc.errors(), key=lambda e: len(e["loc"]))
            where = ".".join(str(p) for p in worst["loc"])
            raise ValueError(f"output[{index}].{where}: {worst['msg']}") from None
    if not messages:
        raise ValueError("`output` holds no message with a `role`")
    return messages


def _command(spec: TargetSpec, config: dict[str, Any], unresolved: Any) -> str | list[str]:
    """The command, resolved. A string runs through ``sh -c``, so each ``${{ VAR }}`` in it is filled
    shell-quoted from the ``unresolved`` command (the field as written), as
    ``{PROMPT}`` is: a value holding ``'x; touch PWNED'`` or a ``"`` stays one word. AgentV fills it
    raw; this difference is deliberate (docs/usage.md)."""
    command = field_value(config, "command")
    if isinstance(command, str) and command.strip():
        if isinstance(unresolved, str):
            return ENV_REFERENCE.sub(lambda m: _quote(os.environ.get(m.group(1), "")), unresolved)
        return command
    if isinstance(command, list) and command and all(isinstance(a, (str, int, float)) for a in command):
        return [str(a) for a in command]
    if command is None:
        raise spec.fail(
            "a cli target needs `command:` (or AgentV's `command_template:`): a template string or an argv list"
        )
    raise spec.fail(f"`command` must be a non-empty string or list of strings, got {command!r}")


# Words a shell command line may start with that are not a program to look for.
_SHELL_WORDS = frozenset(
    {
        *("cd", "exec", "export", "set", "source", ".", "eval", "test", "[", "echo", "printf", "true", "false"),
        *("exit", "if", "for", "while", "until", "case", "{", "(", "!", "time", "command", "builtin", "ulimit"),
        *("umask", "trap", "wait", "read"),
    }
)


def _check_program(
    spec: TargetSpec, command: str | list[str], config: dict[str, Any], eval_dir: Path, env: dict[str, str]
) -> None:
    """The program the command starts must exist: otherwise every test of the run would end in the
    same error, after the run was recorded. Only what can be known beforehand is checked: a program
    named by a placeholder, a shell construct or a path relative to the (per-test) workspace is not."""
    if isinstance(command, list):
        program = command[0]
    else:
        try:
            words = shlex.split(command)
        except ValueError:
            return
        words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)] or [""]
        program = words[0]
        if program in _SHELL_WORDS or any(c in program for c in "$`(){}*?;|&<>"):
            return
    if not program or PLACEHOLDER.search(program):
        return
    if "/" in program:
        path = Path(program).expanduser()
        if not path.is_absolute():
            if config.get("cwd") in (None, ""):
                return  # relative to the test's workspace, made when the test runs
            path = _cwd(spec, config, eval_dir, eval_dir) / path
        if not path.is_file():
            raise spec.fail(f"`command` starts {program!r}, which does not exist ({path}); fix the path")
        if not os.access(path, os.X_OK) and isinstance(command, list):
            raise spec.fail(f"`command` starts {program!r}, which is not executable ({path})")
        return
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise spec.fail(f"`command` starts {program!r}, which is not found on PATH; install it or fix the command")


def _cwd(spec: TargetSpec, config: dict[str, Any], eval_dir: Path, default: Path) -> Path:
    raw = config.get("cwd")
    if raw is None or raw == "":
        return default
    cwd = Path(str(raw)).expanduser()
    if not cwd.is_absolute():
        cwd = eval_dir / cwd
    if not cwd.is_dir():
        raise spec.fail(f"`cwd` {raw!r} is not a directory (resolved to {cwd})")
    return cwd.resolve()


def _output_file(config: dict[str, Any], workspace: Path, scratch: Path) -> Path:
    raw = field_value(config, "output_file")
    if not raw:
        return scratch / "output.json"
    path = Path(str(raw)).expanduser()
    path = path if path.is_absolute() else workspace / path
    path.parent.mkdir(parents=True, exist_ok=True)
    # A file left from a workspace template must not pass for this run's answer.
    path.unlink(missing_ok=True)
    return path


def _input_files(request: RunRequest) -> list[str]:
    """``{FILES}``: every input file the eval found, as AgentV collects them (``collectResolvedInputFilePaths``:
    the ``type: file`` parts of the input messages in order, ``input_files`` among them), each once."""
    seen: dict[str, None] = {}
    for message in request.test.input:
        for block in message.blocks():
            if isinstance(block, FileBlock) and os.path.isabs(block.path) and os.path.isfile(block.path):
                seen.setdefault(os.path.normpath(block.path), None)
    for name in request.test.input_files:
        path = Path(name)
        seen.setdefault(str(path if path.is_absolute() else (request.eval_dir / path).resolve()), None)
    return list(seen)


def _render(command: str | list[str], values: dict[str, str], files: list[str], files_format: str) -> list[str]:
    def formatted(path: str, quote: bool) -> str:
        q = _quote if quote else (lambda s: s)
        return files_format.replace("{path}", q(path)).replace("{basename}", q(os.path.basename(path)))

    if isinstance(command, str):
        quoted = {k: _quote(v) for k, v in values.items()}
        quoted["FILES"] = " ".join(formatted(f, True) for f in files)
        return ["/bin/sh", "-c", _substitute(command, quoted)]
    raw = {**values, "FILES": " ".join(formatted(f, False) for f in files)}
    argv: list[str] = []
    for arg in command:
        if arg == "{FILES}":
            argv.extend(formatted(f, False) for f in files)
        else:
            argv.append(_substitute(arg, raw))
    return argv


def _substitute(template: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _quote(value: str) -> str:
    return shlex.quote(value) if value else "''"


def _read_answer(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_ANSWER_BYTES + 1)
    except OSError:
        return None
    if not data:
        return None
    return data[:MAX_ANSWER_BYTES].decode("utf-8", errors="replace")


def _failure(spec: TargetSpec, child: Any, timeout: float, command: str | list[str]) -> tuple[TargetStatus, str] | None:
    prefix = f"target '{spec.name}'"
    if child.spawn_error:
        return "error", f"{prefix}: {child.spawn_error}"
    if child.timed_out:
        return "timeout", f"{prefix}: timed out after {timeout:g}s; its process group was killed"
    if child.output_exceeded:
        return "error", f"{prefix}: stdout exceeded {MAX_ANSWER_BYTES} bytes; the process group was killed"
    if child.exit_code == 0:
        return None
    if child.exit_code is not None and child.exit_code < 0:
        try:
            how = f"was killed by {signal.Signals(-child.exit_code).name}"
        except ValueError:
            how = f"was killed by signal {-child.exit_code}"
    elif isinstance(command, str) and child.exit_code in _SHELL_NOT_FOUND:
        how = f"exited with code {child.exit_code} ({_SHELL_NOT_FOUND[child.exit_code]})"
    else:
        how = f"exited with code {child.exit_code}"
    detail = child.stderr_text().strip() or child.stdout.decode("utf-8", errors="replace").strip()
    return "error", f"{prefix}: {how}" + (f": {detail[-ERROR_TAIL_CHARS:]}" if detail else "")


def _environment(spec: TargetSpec, config: dict[str, Any]) -> dict[str, str]:
    """The agent's environment: ours plus the target's ``env`` (resolved; an empty value for null)."""
    extra = config.get("env") or {}
    if not isinstance(extra, dict):
        raise spec.fail("`env` must be a mapping of variable names to values")
    return {**os.environ, **{str(k): "" if v is None else str(v) for k, v in extra.items()}}


def _get_status(spec: TargetSpec, url: str, timeout: float) -> int:
    """The HTTP status ``GET url`` answers within ``timeout`` seconds, connect to headers (AgentV's ``fetch``
    with an abort signal): a server dripping its headers fails the check at the deadline. Redirects are
    followed, as ``fetch`` follows them; the body is not read."""
    import httpx

    from evalstore.replay.bounded_http import deadline, deadline_client

    try:
        with (
            deadline_client(timeout=timeout, follow_redirects=True) as http,
            deadline(timeout),
            http.stream("GET", url) as response,
        ):
            return response.status_code
    except httpx.TimeoutException:
        raise spec.fail(f"healthcheck failed: GET {url}: no answer within {timeout:g}s") from None
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        raise spec.fail(f"healthcheck failed: GET {url}: {error_line(exc)}") from None


def _healthcheck(spec: TargetSpec, config: dict[str, Any], check: Any, eval_dir: Path) -> None:
    """AgentV's cli ``healthcheck``: a command that must exit 0, or a URL that must answer 2xx. Which one is
    told by its fields, as AgentV tells it (``normalizeCliHealthcheck``): a ``url`` is an HTTP check,
    otherwise a ``command`` is required; a ``type:`` is not needed (and not read)."""
    if not isinstance(check, dict):
        raise spec.fail("`healthcheck` must be a mapping with a `command` or a `url`")
    if not check.get("url") and not field_value(check, "command"):
        raise spec.fail("healthcheck: either `command` or `url` is required")
    timeout = positive_seconds(spec, field_value(check, "timeout_seconds"), "healthcheck.timeout_seconds")
    timeout = timeout or positive_seconds(spec, field_value(config, "timeout_seconds"), "timeout_seconds")
    timeout = timeout or HEALTHCHECK_TIMEOUT_SECONDS
    if check.get("url"):
        # ``url`` is resolved; base.check_target puts the references back into any error raised here.
        url = check["url"]
        if not isinstance(url, str):
            raise spec.fail("healthcheck: `url` must be a string")
        status = _get_status(spec, url, timeout)
        if not 200 <= status < 300:
            raise spec.fail(f"healthcheck failed: GET {url} answered HTTP {status}")
        return
    written = spec.fields.get("healthcheck")
    command = _command(
        spec,
        {"command": field_value(check, "command")},
        field_value(written, "command") if isinstance(written, dict) else None,
    )
    cwd = _cwd(spec, check, eval_dir, _cwd(spec, config, eval_dir, eval_dir))
    values = {
        "PROMPT": "",
        "PROMPT_FILE": "",
        "OUTPUT_FILE": "",
        "EVAL_ID": "healthcheck",
        "ATTEMPT": HEALTHCHECK_ATTEMPT,
    }
    argv = _render(command, values, [], "{path}")
    child = run_child(
        argv, b"", timeout=timeout, max_output_bytes=MAX_ANSWER_BYTES, cwd=str(cwd), env=_environment(spec, config)
    )
    failure = _failure(spec, child, timeout, command)
    if failure is not None:
        raise spec.fail("healthcheck failed: " + failure[1].removeprefix(f"target '{spec.name}': "))
