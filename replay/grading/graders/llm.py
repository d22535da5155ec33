"""The LLM grader: renders the prompt, asks the judge (or the judge cache), and scores the reply.

Whatever goes wrong on the way (an unset key variable, a prompt file gone, a judge that never answers or
never answers in shape) ends as this grader's execution error: one bad grader must not stop a run. A judge
that failed is AgentV's execution error too (its verdict ``skip``); an executable prompt template that failed
is not (AgentV's throws, and the grader scores 0: ``GraderResult.scored_by_agentv``). No judge
target to be found is AgentV's thrown "No grader provider available", which the engine records as AgentV
does (``GraderThrew``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evalstore.replay.content import Message
from evalstore.replay.errors import NoJudgeError, ReplayError
from evalstore.replay.evalfile.specs import LlmGraderSpec
from evalstore.replay.grading.graders.base import GraderResult, GraderThrew, GradingContext
from evalstore.replay.grading.judge.calls import EVIDENCE_REPLY_CHARS, PARSE_ATTEMPTS, JudgeCall
from evalstore.replay.grading.judge.modes import choose_mode
from evalstore.replay.grading.judge.templates import PromptSource, choose_prompt, render, sections, template_variables
from evalstore.replay.grading.preprocessing import PreparedAnswer, prepare_answer
from evalstore.replay.jstext import js_trim
from evalstore.store.codec import canonical_json
from evalstore.store.events import Assertion


def _answer(ctx: GradingContext, spec: LlmGraderSpec) -> PreparedAnswer:
    """The candidate answer ({{output}}): the last assistant message with its files turned into text
    through the grader's converters."""
    return prepare_answer(ctx, spec.preprocessors)


def _execution_error(
    message: str,
    *,
    evidence: list[str] | None = None,
    call_ids: list[str] | None = None,
    grader_target: str | None = None,
    preprocessing_event_ids: list[str] | None = None,
    cache_hit: bool = False,
    rendered_prompt_sha256: str | None = None,
) -> GraderResult:
    return GraderResult(
        score=0.0,
        verdict="skip",
        status="execution_error",
        assertions=[Assertion(text=message, passed=False)],
        evidence=[*(evidence or []), message],
        grader_call_event_ids=call_ids or [],
        grader_target=grader_target,
        preprocessing_event_ids=preprocessing_event_ids or [],
        cache_hit=cache_hit,
        rendered_prompt_sha256=rendered_prompt_sha256,
    )


def no_grader_provider(grader: str, exc: NoJudgeError) -> str:
    """What AgentV 4.42.4 throws for an LLM grader with no judge: its own ``target:`` not defined
    (builtin-graders.ts:91), else no grader provider (llm-grader.ts:235)."""
    if exc.grader_target is not None:
        return f"llm-grader evaluator '{grader}': target '{exc.grader_target}' not found in targets"
    return "No grader provider available for LLM grading"


class LlmGrader:
    def __init__(self, spec: LlmGraderSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        spec = self.spec
        pool = ctx.judges
        if pool is None:
            return _execution_error(
                f"grader {spec.name!r}: no judge is configured; set EVALSTORE_JUDGE_BASE_URL or give a "
                "targets file with a grader_target"
            )
        try:
            target = pool.for_grader(ctx, spec.target)
        except NoJudgeError as exc:
            raise GraderThrew(no_grader_provider(spec.name, exc), f"grader {spec.name!r}: {exc}") from None
        except ReplayError as exc:
            return _execution_error(f"grader {spec.name!r}: {exc}")
        if spec.target is not None and spec.temperature is not None:
            # AgentV makes a grader with its own target with the grader's temperature (builtin-graders.ts).
            target = replace(target, temperature=spec.temperature)
        try:
            judge, why = pool.resolve_or_cache_only(target)
        except ReplayError as exc:
            return _execution_error(f"grader {spec.name!r}: {exc}", grader_target=target.name)
        # Without its key the judge cannot be called, but a recorded reply can still be reused.
        unavailable = f"grader {spec.name!r}: {why}" if why is not None else None
        if ctx.transcript.missing:
            return _execution_error(
                f"grader {spec.name!r}: no transcript to grade ({ctx.transcript.missing})",
                grader_target=target.name,
            )

        answer = _answer(ctx, spec)
        template_calls: list[str] = []
        template_reused = False
        if spec.prompt_command:
            from evalstore.replay.grading.graders.prompt_script import run_template

            ran = run_template(ctx, spec, answer.text)
            template_calls, template_reused = [ran.call_event_id], ran.reused
            if ran.template is None:
                failed = _execution_error(
                    f"grader {spec.name!r}: {ran.error}",
                    grader_target=target.name,
                    evidence=answer.warnings,
                    call_ids=template_calls,
                    preprocessing_event_ids=answer.preprocessing_event_ids,
                )
                # AgentV's template script that fails throws ("Prompt template execution failed"): the grader
                # scores 0 there, it is not skipped.
                failed.scored_by_agentv = True
                return failed
            source = PromptSource(ran.template, ctx.test.criteria, "script")
        else:
            try:
                source = choose_prompt(spec, ctx.test.criteria)
            except ReplayError as exc:
                return _execution_error(
                    str(exc),
                    grader_target=target.name,
                    evidence=answer.warnings,
                    preprocessing_event_ids=answer.preprocessing_event_ids,
                )
        mode = choose_mode(spec)
        conversation = ctx.question is not None  # a conversation's turn: its question, and no reference
        shown: dict[str, Any] = {  # what both the template variables and the built-in prompts' sections show
            "input_messages": [Message(role="user", content=ctx.question)] if conversation else ctx.test.input,
            "input_base_dir": str(ctx.suite.directory),
            "output": answer.text,
            "expected_output": None if conversation else ctx.test.expected_output,
            "criteria": source.criteria,
            "file_refs": ctx.options.file_references,
        }
        variables = template_variables(
            **shown,
            metadata=ctx.test.metadata,
            rubrics=spec.rubrics,
            file_changes=ctx.transcript.file_changes,
            transcript_messages=ctx.transcript.messages,
            error=ctx.transcript.error,
        )
        warnings: list[str] = []
        if source.template is not None:
            user, warnings = render(source.template, variables)
        else:
            user = mode.user_prompt(variables, spec.rubrics, sections(**shown))
        system, sent = mode.system_prompt(), js_trim(user)  # AgentV's provider sends it trimmed (question.trim())
        messages = [{"role": "system", "content": system}, {"role": "user", "content": sent}]
        # AgentV's row records the prompt as rendered (graderRawRequest), untrimmed: kept where that differs.
        recorded = None
        if sent != user:
            request = canonical_json({"userPrompt": user, "systemPrompt": system})
            recorded = ctx.recorder.put_blob(request.encode("utf-8"))

        outcome = JudgeCall(ctx, spec.name, judge, pool.client, cache_only=unavailable is not None).run(
            messages, lambda reply: mode.parse(reply, spec.rubrics)
        )
        evidence = [*answer.warnings, *warnings]
        if outcome.result is None and unavailable is not None and not outcome.cache_hit:
            return _execution_error(
                unavailable,
                evidence=evidence,
                grader_target=target.name,
                preprocessing_event_ids=answer.preprocessing_event_ids,
            )
        if outcome.result is None:
            if outcome.parse_failure:
                message = f"Grader parse failure after {PARSE_ATTEMPTS} attempts: {outcome.error}"
            else:
                message = f"Judge call failed: {outcome.error}"
            if outcome.last_reply is not None:
                reply = outcome.last_reply
                if len(reply) > EVIDENCE_REPLY_CHARS:
                    reply = reply[:EVIDENCE_REPLY_CHARS] + " … (truncated; the full reply is in the call's blob)"
                evidence.append(f"judge's last reply: {reply}")
            return _execution_error(
                message,
                evidence=evidence,
                call_ids=[*template_calls, *outcome.call_event_ids],
                grader_target=target.name,
                preprocessing_event_ids=answer.preprocessing_event_ids,
                cache_hit=outcome.cache_hit,
                rendered_prompt_sha256=recorded,
            )
        result = outcome.result
        return GraderResult(
            score=result.score,
            verdict=result.verdict,
            assertions=result.assertions,
            details=result.details,
            evidence=[*evidence, *result.evidence],
            cache_hit=outcome.cache_hit and (template_reused or not template_calls),
            preprocessing_event_ids=answer.preprocessing_event_ids,
            grader_call_event_ids=[*template_calls, *outcome.call_event_ids],
            grader_target=target.name,
            rendered_prompt_sha256=recorded,
        )
