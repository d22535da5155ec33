"""An LLM grader's executable prompt template (``prompt: {command: [...], config}``), run as AgentV 4.42.4
runs it (``graders/prompt-resolution.ts``, ``executePromptTemplate``).

The script gets, as JSON on stdin (keys rewritten to snake_case, indented by two), ``criteria``,
``expected_output``, ``output`` and ``answer`` (the candidate), ``messages``, ``input_files``, ``input``,
``metadata``, ``trace``, ``file_changes``, ``workspace_path`` and ``config`` (``prompt.config``); it runs
in its own folder; what it prints, trimmed, is the grader's template, whose ``{{variables}}`` are then
filled as a prompt file's are. A non-zero exit or empty output fails the grader.

The execution is recorded as the grader's first call (``call: process``, with its argv, folder, script
digest, stdin and stdout), and reused, as a code grader's is (``process_cache``), when everything the
script is given is byte-identical: an unchanged replay runs no template script. Beyond AgentV, which sets
no limit unless ``--agent-timeout``, the script is killed after the code graders' 60 seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Literal

from evalstore.replay.content import dump_messages, expected_messages
from evalstore.replay.evalfile.specs import LlmGraderSpec
from evalstore.replay.grading.answer import one_line
from evalstore.replay.grading.graders.base import GradingContext, process_output_mask
from evalstore.replay.grading.graders.process_cache import process_cache_key
from evalstore.replay.grading.preprocessing import script_digest
from evalstore.replay.jsontext import js_number, stringify, to_snake_deep
from evalstore.replay.jstext import js_trim
from evalstore.replay.processes.children import ChildResult, child_environment, run_child
from evalstore.store.events import GraderCalled

TIMEOUT = 60.0
MAX_STDOUT_BYTES = 10_000_000
STDERR_CHARS = 2_000


@dataclass
class TemplateRun:
    """What running the template script came to: the template, or why there is none."""

    template: str | None
    error: str | None
    call_event_id: str
    reused: bool


def payload(ctx: GradingContext, spec: LlmGraderSpec, answer: str) -> bytes:
    """The script's stdin, as AgentV writes it: ``JSON.stringify(toSnakeCaseDeep(payload), null, 2)``."""
    test, transcript = ctx.test, ctx.transcript
    recorded = ctx.trace().read_model()  # AgentV's Trace read model, as a code grader gets it
    fields: dict[str, Any] = {
        "criteria": test.criteria or "",
        "expected_output": expected_messages(test.expected_output),
        "output": answer,
        "answer": answer,
        "messages": recorded["messages"],
        "input_files": list(test.input_files),
        "input": dump_messages(list(test.input)),
        "metadata": test.metadata or None,
        "trace": recorded,
        "file_changes": transcript.file_changes,
        "workspace_path": _workspace(ctx),
        "config": spec.prompt_config,
    }
    if transcript.error is not None:  # as a code grader's payload: only a failed result graded all the same
        fields["error"] = transcript.error
    return stringify(js_number(to_snake_deep(fields)), indent=True)


def run_template(ctx: GradingContext, spec: LlmGraderSpec, answer: str) -> TemplateRun:
    """Run (or reuse) the grader's template script and record the execution."""
    argv = list(spec.prompt_command or [])
    cwd = os.path.dirname(argv[-1])
    stdin = payload(ctx, spec, answer)
    env = child_environment(ctx.options.environment)
    script = script_digest(argv)
    key = None
    if _workspace(ctx) is None:  # a live workspace holds files no digest covers
        key = process_cache_key(argv=argv, script_sha256=script, stdin=stdin, tmp_path=None, cwd=cwd, env=env)
    reused = ctx.recorder.find_process_call(key) if key and not ctx.options.no_cache else None
    if reused is not None:
        call = reused[1]
        child = ChildResult(
            argv=argv,
            exit_code=call.exit_code,
            stdout=ctx.recorder.get_blob(call.reply_sha256) if call.reply_sha256 else b"",
            stderr=ctx.recorder.get_blob(call.stderr_sha256) if call.stderr_sha256 else b"",
            duration_ms=0.0,
        )
    else:
        ctx.waiting()
        with ctx.options.process_slots or contextlib.nullcontext():
            child = run_child(argv, stdin, timeout=TIMEOUT, max_output_bytes=MAX_STDOUT_BYTES, cwd=cwd, env=env)
        mask = process_output_mask(ctx.transcript, env)
        if mask:  # what the script prints of a secret of its environment (or the live workspace's) is not stored
            child = dataclasses.replace(child, stdout=mask.data(child.stdout), stderr=mask.data(child.stderr))
    template, error = _template(child)
    outcome: Literal["ok", "error", "timeout"] = "timeout" if child.timed_out else ("error" if error else "ok")
    event = GraderCalled(
        test_id=ctx.test.id,
        target=ctx.target,
        attempt=ctx.attempt,
        grader=spec.name,
        grader_type=spec.type,
        call="process",
        request_sha256=ctx.recorder.put_blob(stdin),
        reply_sha256=ctx.recorder.put_blob(child.stdout),
        stderr_sha256=ctx.recorder.put_blob(child.stderr) if child.stderr else None,
        latency_ms=child.duration_ms,
        outcome=outcome,
        error=error,
        argv=argv,
        cwd=cwd,
        script_sha256=script,
        exit_code=child.exit_code,
        cache_key=key,
        cache_hit=reused is not None,
        reused_from=reused[0] if reused else None,
    )
    return TemplateRun(template, error, ctx.recorder.record(event), reused is not None)


def _workspace(ctx: GradingContext) -> str | None:
    """The workspace the script is told of: the agent's live one, when the eval configures one (AgentV
    passes none otherwise; evalstore's default per-test folder is not a workspace to it)."""
    return ctx.transcript.workspace_path if ctx.suite.workspace_for(ctx.test).configured else None


def _template(child: ChildResult) -> tuple[str | None, str | None]:
    """The template the script printed, or AgentV's reason there is none."""
    failed = "Prompt template execution failed"
    if child.spawn_error:
        return None, f"{failed}: {child.spawn_error}"
    if child.timed_out:
        return None, f"{failed}: timed out after {TIMEOUT:g} s; its process group was killed"
    if child.output_exceeded:
        return None, f"{failed}: stdout exceeded {MAX_STDOUT_BYTES} bytes"
    if child.exit_code != 0:
        stderr = one_line(js_trim(child.stderr_text()), STDERR_CHARS)
        code = f"Code evaluator exited with code {child.exit_code}"
        return None, f"{failed}: {code}: {stderr}" if stderr else f"{failed}: {code}"
    template = js_trim(child.stdout.decode("utf-8", errors="replace"))
    if not template:
        return None, f"{failed}: Prompt template produced empty output"
    return template, None
