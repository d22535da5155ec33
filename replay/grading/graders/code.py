"""The code grader: a script that reads the eval context as JSON on stdin and scores on stdout.

stdin is AgentV's code-grader contract (snake_case; see agentv-formats.md §4.3) plus ``files``: the raw
bytes of every file block the agent produced, copied into a private temporary directory, so a script
can open ``report.xlsx`` itself instead of trusting a converter's text.

stdout is either a JSON object (the full protocol ``{score, assertions, details}``) or plain text:

====================================  ==========================================
exit 0, stdout empty                   1
exit 0, ``true`` / ``pass`` / ``1``    1
exit 0, ``false`` / ``fail`` / ``0``   0
exit 0, a number                       the number, clamped to 0..1
exit 0, other text                     1
non-zero, stderr empty                 0 (a quality failure), JSON on stdout not read
non-zero, stderr not empty             execution error, stderr tail as evidence
====================================  ==========================================

The grader's own verdict is pass at 0.8, as AgentV's ``scoreToVerdict`` (``min_score`` gates only a
required grader's test score). Difference from AgentV 4.42: AgentV ignores the tokens and numbers
(only the exit code counts, so ``echo 0.2`` scores 1); evalstore reads them, as the product brief
asks. A further choice of ours: stdout that starts with ``{`` but does not parse is an execution error
(AgentV would score it 1 as plain text). A timeout, a command that cannot start, an output flood and a
non-zero exit with stderr are execution errors; AgentV scores those 0 as quality failures. So such a
test is evalstore's ``execution_error`` but not AgentV's (``GraderResult.scored_by_agentv``,
``failures.GRADER_SCORED``): as in AgentV, the tests that depend on it run and ``fail_on_error`` does not
count it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
from typing import Any, Literal

from evalstore.replay.content import dump_messages, expected_messages, file_blocks
from evalstore.replay.errors import ReplayError
from evalstore.replay.evalfile.specs import CodeGraderSpec
from evalstore.replay.grading.answer import one_line
from evalstore.replay.grading.graders.base import (
    PASS_SCORE,
    GraderResult,
    GradingContext,
    process_output_mask,
    score_to_verdict,
)
from evalstore.replay.grading.graders.process_cache import process_cache_key
from evalstore.replay.grading.materialize import PrivateTempDir, materialize_files
from evalstore.replay.grading.preprocessing import PreparedAnswer, answer_for, script_digest
from evalstore.replay.jsontext import js_number, stringify, to_snake_deep, without_lone_surrogates
from evalstore.replay.jstext import js_truthy
from evalstore.replay.processes.children import ChildResult, child_environment, run_child
from evalstore.replay.targetsfile.redaction import SecretMask
from evalstore.replay.workspace.snapshot import SnapshotUnusable, materialize
from evalstore.store.codec import digest_json, sha256_hex
from evalstore.store.errors import StoreError
from evalstore.store.events import Assertion, GraderCalled

LARGE_OUTPUT_CHARS = 50_000
"""Above this the answer goes to a file (``output_path``) instead of inline (AgentV's limit)."""
MAX_STDOUT_BYTES = 10_000_000
STDERR_EVIDENCE_CHARS = 2_000

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_TRUE_TOKENS = ("true", "pass")
_FALSE_TOKENS = ("false", "fail")


class CodeGrader:
    def __init__(self, spec: CodeGraderSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        prepared = answer_for(ctx, list(self.spec.preprocessors))
        with PrivateTempDir(prefix="evalstore-grader-") as tmp:
            workspace, problem = grader_workspace(ctx, tmp)
            if problem is not None:
                result = execution_error(f"Code grader cannot run: {problem}")
                result.evidence = prepared.warnings + result.evidence
                result.preprocessing_event_ids = list(prepared.preprocessing_event_ids)
                return result
            files = materialize_files(
                file_blocks(ctx.transcript.messages), ctx.recorder, ctx.transcript.workspace_path, tmp
            )
            side_files: list[str] = []  # digests of what the process reads from files the payload only names
            # Without files of its own (each grader's are copied to its own folder, named in the payload), the
            # payload is the same for every code grader of the test given the same answer and config: built
            # and encoded once per test.
            shared = (
                ("code-grader stdin", prepared.text, repr(self.spec.config), workspace)
                if not files and len(prepared.text) <= LARGE_OUTPUT_CHARS
                else None
            )
            stdin = ctx.shared.get(shared) if shared else None
            if stdin is None:
                payload = build_payload(ctx, self.spec, prepared, [f.payload() for f in files], workspace)
                if len(prepared.text) > LARGE_OUTPUT_CHARS:
                    output_file = tmp.path / "output.json"
                    output_bytes = json.dumps(prepared.text, ensure_ascii=False).encode("utf-8")
                    output_file.write_bytes(output_bytes)
                    side_files.append(sha256_hex(output_bytes))
                    payload.update(output=None, answer=None, output_path=str(output_file))
                # As AgentV sends it: JSON.stringify(payload, null, 2), an integral float written as an integer.
                stdin = stringify(js_number(payload), indent=True)
                if shared:
                    ctx.shared[shared] = stdin
            with contextlib.ExitStack() as stack:
                env = grader_environment(ctx, workspace)
                proxy = None
                if self.spec.target_max_calls is not None:
                    from evalstore.replay.grading.graders.proxy import TargetProxy

                    try:
                        proxy = stack.enter_context(TargetProxy(ctx, self.spec))
                    except ReplayError as exc:
                        return execution_error(f"Code grader cannot run: its target proxy: {exc}")
                    env.update(proxy.env)
                script = script_digest([self.spec.script]) if self.spec.script else None
                key = None
                # A live workspace holds files no digest covers, and a grader with a target proxy depends on
                # calls made while it runs: such executions are never reused. A stored snapshot is covered
                # by the digest of its manifest (its files are named by their digests).
                if self.spec.cache and not ctx.transcript.workspace_path and proxy is None:
                    tmp_path = str(tmp.created) if tmp.created else None
                    if ctx.transcript.snapshot is not None and workspace:
                        side_files.append(digest_json(ctx.transcript.snapshot[1].model_dump(mode="json")))
                    key = process_cache_key(
                        argv=list(self.spec.command),
                        script_sha256=script,
                        stdin=stdin,
                        tmp_path=tmp_path,
                        cwd=self.spec.cwd,
                        env={k: v.replace(tmp_path, "$TMP") if tmp_path else v for k, v in env.items()},
                        side_files=side_files,
                    )
                reused = ctx.recorder.find_process_call(key) if key and not ctx.options.no_cache else None
                if reused is not None:
                    child = _recorded_child(ctx, reused[1])
                else:
                    if not ctx.transcript.workspace_path:  # graders in a live workspace share its files: in turn
                        ctx.waiting()
                    with ctx.options.process_slots or contextlib.nullcontext():
                        child = run_child(
                            list(self.spec.command),
                            stdin,
                            timeout=self.spec.timeout,
                            max_output_bytes=MAX_STDOUT_BYTES,
                            cwd=self.spec.cwd,
                            env=env,
                            warm=ctx.options.warm if self.spec.warm else None,
                        )
                    mask = secret_mask(ctx, env)
                    if mask:  # before anything is read from its output, or stored
                        child = dataclasses.replace(
                            child, stdout=mask.data(child.stdout), stderr=mask.data(child.stderr)
                        )
        result = interpret(child, self.spec)
        result.evidence = prepared.warnings + result.evidence
        result.preprocessing_event_ids = list(prepared.preprocessing_event_ids)
        result.cache_hit = reused is not None
        call = self._record_call(ctx, stdin, child, result, key, script, reused[0] if reused else None)
        result.grader_call_event_ids = [call]
        if proxy is not None:
            result.grader_call_event_ids += proxy.call_event_ids
            result.cache_hit = bool(proxy.call_event_ids) and proxy.cache_hits == proxy.calls
            result.grader_target = proxy._judge.target
            if proxy.refused:
                result.evidence.append(f"target proxy refused {proxy.refused} call(s) over max_calls {proxy.max_calls}")
        return result

    def _record_call(
        self,
        ctx: GradingContext,
        stdin: bytes,
        child: ChildResult,
        result: GraderResult,
        cache_key: str | None,
        script: str | None,
        reused_from: str | None,
    ) -> str:
        recorder = ctx.recorder
        outcome: Literal["ok", "error", "timeout"]
        if child.timed_out:
            outcome = "timeout"
        elif result.status == "execution_error":
            outcome = "error"
        else:
            outcome = "ok"
        event = GraderCalled(
            test_id=ctx.test.id,
            target=ctx.target,
            attempt=ctx.attempt,
            grader=self.spec.name,
            grader_type=self.spec.type,
            call="process",
            request_sha256=recorder.put_blob(stdin),
            reply_sha256=recorder.put_blob(child.stdout),
            stderr_sha256=recorder.put_blob(child.stderr) if child.stderr else None,
            latency_ms=child.duration_ms,
            outcome=outcome,
            error=result.assertions[0].text if outcome != "ok" and result.assertions else None,
            argv=list(self.spec.command),
            cwd=self.spec.cwd,
            script_sha256=script,
            exit_code=child.exit_code,
            cache_key=cache_key,
            cache_hit=reused_from is not None,
            reused_from=reused_from,
        )
        return recorder.record(event)


def grader_workspace(ctx: GradingContext, tmp: PrivateTempDir) -> tuple[str | None, str | None]:
    """(the workspace a code grader works in, or why it cannot run).

    During a run it is the agent's live workspace. Grading a stored test (replay, resume, ``assert
    --run``), it is a private copy of the test's workspace snapshot, made here and removed with ``tmp``.
    A test without a snapshot has no workspace, unless the eval configures one (``workspace.template``,
    ``path`` or ``repos``): its graders are then functional graders that cannot run without it, and so
    is a partial snapshot (files left out by its limits).
    """
    transcript = ctx.transcript
    if transcript.workspace_path:
        return transcript.workspace_path, None
    if transcript.snapshot is not None:
        _, snapshot = transcript.snapshot
        if snapshot.partial:
            listed = "; ".join(snapshot.omitted[:5])
            more = f" and {snapshot.omitted_count - 5} more" if snapshot.omitted_count > 5 else ""
            return None, (
                f"the stored workspace snapshot is partial: {snapshot.omitted_count} file(s) were left out by "
                f"its limits ({listed}{more}); raise workspace.snapshot limits and record again (a replay "
                "carries such a grader's recorded verdict only while it does not change the grader)"
            )
        folder = tmp.path / "workspace"
        folder.mkdir()
        try:
            materialize(snapshot, ctx.recorder.get_blob, folder)
        except (SnapshotUnusable, StoreError, OSError) as exc:
            return None, f"the stored workspace snapshot cannot be materialized: {exc}"
        return str(folder), None
    if ctx.suite.workspace_for(ctx.test).configured:
        return None, (
            "the run stored no workspace snapshot for this test (imported from AgentV, whose results keep none, "
            "or recorded before snapshots), and the eval configures a workspace its graders need; a replay "
            "carries such a grader's recorded verdict only while it does not change the grader"
        )
    return None, None


def _recorded_child(ctx: GradingContext, call: GraderCalled) -> ChildResult:
    """A recorded execution's outcome, standing in for running the process again."""
    recorder = ctx.recorder
    return ChildResult(
        argv=list(call.argv or []),
        exit_code=call.exit_code,
        stdout=recorder.get_blob(call.reply_sha256) if call.reply_sha256 else b"",
        stderr=recorder.get_blob(call.stderr_sha256) if call.stderr_sha256 else b"",
        duration_ms=0.0,
    )


def build_payload(
    ctx: GradingContext,
    spec: CodeGraderSpec,
    prepared: PreparedAnswer,
    files: list[dict[str, Any]],
    workspace: str | None = None,
) -> dict[str, Any]:
    """The stdin object of AgentV's code-grader contract, plus ``files``."""
    transcript = ctx.transcript
    test = ctx.test
    trace = ctx.trace()
    recorded = trace.read_model()  # AgentV's Trace read model, from the recorded transcript and metrics
    payload: dict[str, Any] = {
        "input": dump_messages(list(test.input)),
        "input_files": list(test.input_files),
        "criteria": test.criteria or "",
        "output": prepared.text,
        "answer": prepared.text,
        "expected_output": expected_messages(test.expected_output),
        "messages": recorded["messages"],
        "trace": recorded,
        "trace_summary": trace.summary_wire(),
        "token_usage": transcript.token_usage,
        "cost_usd": transcript.cost_usd,
        "duration_ms": transcript.duration_ms,
        "start_time": transcript.start_time,
        "end_time": transcript.end_time,
        "file_changes": transcript.file_changes,
        "workspace_path": workspace,
        "metadata": test.metadata or None,
        "config": spec.config,
        "files": files,
    }
    if transcript.error is not None:  # only a failed result graded all the same has one (AgentV grades none)
        payload["error"] = transcript.error
    return to_snake_deep(payload)  # the deep key rewrite AgentV applies at process boundaries


def grader_environment(ctx: GradingContext, workspace: str | None) -> dict[str, str]:
    """The grader's environment (a copy the caller may change): the run's or replay's
    (``GradeOptions.environment``, read from ``os.environ`` once: decoding every variable again for each
    test was a measurable part of a replay whose executions are all reused), made once per test."""
    key = ("code-grader env", workspace)
    env = ctx.shared.get(key)
    if env is None:
        # What run_child passes on: the reuse key holds exactly it.
        env = child_environment(ctx.options.environment)
        env.pop("AGENTV_TARGET_PROXY_URL", None)  # never a proxy the grader was not given
        env.pop("AGENTV_TARGET_PROXY_TOKEN", None)
        if workspace:
            env["AGENTV_WORKSPACE_PATH"] = workspace
        else:
            env.pop("AGENTV_WORKSPACE_PATH", None)
        ctx.shared[key] = env
    return dict(env)


def secret_mask(ctx: GradingContext, env: dict[str, str]) -> SecretMask:
    """What a grader's output must not carry into the store: the value of every variable of its
    environment whose name looks secret (``OPENAI_API_KEY``, ``GITHUB_TOKEN``), shown as its
    ``${{ NAME }}`` reference, and every URL password (the one rule, ``redaction.environment_mask``;
    ``run_child`` applied it already, this is for outputs read back from a recorded execution); in a
    live workspace, what the agent's files were masked for too (``base.process_output_mask``)."""
    key = ("code-grader mask",)
    mask = ctx.shared.get(key)
    if mask is None:
        mask = ctx.shared[key] = process_output_mask(ctx.transcript, env)
    return mask


def interpret(child: ChildResult, spec: CodeGraderSpec) -> GraderResult:
    """The grader result the child's exit code, stdout and stderr amount to."""
    if child.spawn_error:
        return execution_error(f"Code grader failed: {child.spawn_error}")
    if child.timed_out:
        return execution_error(
            f"Code grader failed: timed out after {spec.timeout:g} s (the grader's timeout); "
            "its process group was killed"
        )
    if child.output_exceeded:
        return execution_error(f"Code grader failed: stdout exceeded {MAX_STDOUT_BYTES} bytes")
    stdout = child.stdout.decode("utf-8", errors="replace").strip()
    stderr = child.stderr_text().strip()
    exit_code = child.exit_code
    if exit_code != 0 and stderr:
        return execution_error(f"Code grader failed: exited with code {exit_code}", stderr)
    if exit_code != 0 and stdout.startswith(("{", "[")):
        # AgentV does not read a reply from a process that failed: score 0, whatever the JSON says.
        text = f"Code evaluator failed: Code evaluator exited with code {exit_code}"
        return _result(0.0, [Assertion(text=text, passed=False)])
    if stdout.startswith("{"):
        try:
            reply = json.loads(stdout)
        except json.JSONDecodeError as exc:
            return execution_error(f"Code grader failed: stdout looks like JSON but does not parse ({exc})")
        # A lone surrogate ("\\ud800") in a reply would stop the run. Text decoded from UTF-8 holds none: only a
        # \\u escape makes one, and most replies have none to walk for.
        if "\\u" in stdout:
            reply = without_lone_surrogates(reply)
        if isinstance(reply, dict):
            return _protocol_result(reply)
    score = _plain_text_score(stdout) if exit_code == 0 else 0.0
    text = stdout or f"exit {exit_code}"
    result = _result(score, [Assertion(text=text, passed=score >= PASS_SCORE)])
    if exit_code == 0 and score != 1.0:
        # A documented difference (docs/usage.md, "Code-grader plain text"): said where the verdict is, since a
        # replay of AgentV's run shows it as a change of score the grader did not make.
        result.evidence.append(PLAIN_TEXT_DIFFERS)
    return result


PLAIN_TEXT_DIFFERS = (
    "read from plain-text stdout; AgentV 4.42.4 scores a plain-text stdout by the exit code alone (exit 0: 1.000)"
)


def _plain_text_score(stdout: str) -> float:
    token = stdout.lower()
    if not token or token in _TRUE_TOKENS:
        return 1.0
    if token in _FALSE_TOKENS:
        return 0.0
    if _NUMBER.match(token):
        return _clamp(float(token))
    return 1.0


def _protocol_result(reply: dict[str, Any]) -> GraderResult:
    assertions = [
        Assertion(  # as AgentV reads them: Boolean(passed), and evidence only when it is a string
            text=item["text"],
            passed=js_truthy(item.get("passed")),
            evidence=item["evidence"] if isinstance(item.get("evidence"), str) else None,
        )
        for item in reply.get("assertions") or []
        if isinstance(item, dict) and isinstance(item.get("text"), str)
    ]
    raw_score = reply.get("score")
    if isinstance(raw_score, (int, float)) and not isinstance(raw_score, bool) and math.isfinite(raw_score):
        score = _clamp(float(raw_score))
    elif assertions:
        score = sum(a.passed for a in assertions) / len(assertions)
    else:
        score = 0.0
    details = reply.get("details")
    return _result(score, assertions, details if isinstance(details, dict) else None)


def _result(score: float, assertions: list[Assertion], details: dict[str, Any] | None = None) -> GraderResult:
    return GraderResult(score=score, verdict=score_to_verdict(score), assertions=assertions, details=details)


def execution_error(text: str, stderr: str = "") -> GraderResult:
    """A code grader that could not grade: left out of the score. AgentV's code grader scores every such
    failure 0 (``fail``), so it is no execution error of AgentV's (``scored_by_agentv``)."""
    tail = stderr[-STDERR_EVIDENCE_CHARS:] if stderr else None
    evidence = [f"stderr: {one_line(stderr, STDERR_EVIDENCE_CHARS)}"] if stderr else []
    return GraderResult(
        score=0.0,
        verdict="skip",
        status="execution_error",
        assertions=[Assertion(text=text, passed=False, evidence=tail)],
        evidence=evidence,
        scored_by_agentv=True,
    )


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))
