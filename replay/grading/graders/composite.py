"""``composite``: member graders combined by an aggregator, as AgentV 4.42 combines them
(``graders/composite.ts``). Members are graded as top-level graders are (their events recorded under the
composite's name), without their ``negate``; a member that could not run (an execution error, AgentV's
``skip``) is left out of ``weighted_average`` and ``threshold``, and when every member is, the composite is
an execution error too.

- ``weighted_average``: the members' scores averaged by ``weights`` (member name → weight, 1 by default);
- ``threshold``: the share of members whose verdict is pass, passing when it reaches ``threshold``;
- ``code-grader``: ``path`` run as a shell command in the eval file's folder with the members' results on
  stdin (``{"results": {NAME: {score, verdict, assertions, ...}}}``), its JSON reply the verdict; a failure
  scores 0;
- ``llm-grader``: the judge asked with ``prompt`` (or AgentV's default) where ``{{EVALUATOR_RESULTS_JSON}}``
  stands for the members' results, byte for byte as AgentV renders them (:func:`aggregator_prompt`); its
  freeform reply the verdict; a failure scores 0. The judge is the test's default one, chosen as an LLM
  grader's with no ``target:`` of its own.

The members' results are kept in the verdict's ``details.scores`` (AgentV's child ``scores``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from evalstore.replay.agentv.wire import MEMBER_SCORES
from evalstore.replay.errors import NoJudgeError
from evalstore.replay.evalfile.specs import CompositeSpec
from evalstore.replay.grading.graders.base import GraderResult, GraderThrew, GradingContext, score_to_verdict
from evalstore.replay.jsontext import js_number, stringify
from evalstore.replay.jstext import js_number_text, js_replace_all, js_trim
from evalstore.replay.processes.children import run_child
from evalstore.store.codec import canonical_json
from evalstore.store.events import Assertion, GraderCalled

DEFAULT_AGGREGATOR_PROMPT = """Review the following evaluation results:
{{EVALUATOR_RESULTS_JSON}}

Decide the final score and verdict based on all grader results.
Return a JSON object with: score (0.0-1.0), verdict (pass/fail), and reasoning."""
AGGREGATOR_TIMEOUT_S = 60.0


def _skipped(result: GraderResult) -> bool:
    return result.status == "execution_error" or result.verdict == "skip"


def _child(name: str, kind: str, result: GraderResult, weight: float | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": kind, "score": result.score}
    if weight is not None:
        entry["weight"] = weight
    entry["verdict"] = result.verdict
    entry["assertions"] = [a.model_dump(mode="json", exclude_none=True) for a in result.assertions]
    details = dict(result.details or {})
    if MEMBER_SCORES in details:  # a nested composite: its members as AgentV nests them
        entry["scores"] = details.pop(MEMBER_SCORES)
    if details:
        entry["details"] = details
    return entry


def _member_result(result: GraderResult) -> dict[str, Any]:
    """A member's result as an aggregator reads it (AgentV's ``EvaluationScore``, camelCase)."""
    out: dict[str, Any] = {
        "score": result.score,
        "verdict": result.verdict,
        "assertions": [a.model_dump(mode="json", exclude_none=True) for a in result.assertions],
        "expectedAspectCount": max(len(result.assertions), 1),
    }
    if result.details:
        out["details"] = result.details
    return out


class CompositeGrader:
    def __init__(self, spec: CompositeSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        from evalstore.replay.grading.engine import grade_member

        members: list[tuple[str, str, GraderResult]] = [
            (spec.name, str(spec.type), grade_member(spec, ctx)) for spec in self.spec.assertions
        ]
        aggregator = self.spec.aggregator
        if aggregator.type == "threshold":
            result = self._threshold(members, aggregator.threshold or 0.0)
        elif aggregator.type == "code-grader":
            result = self._code(ctx, members)
        elif aggregator.type == "llm-grader":
            result = self._llm(ctx, members)
        else:
            result = self._weighted(members, aggregator.weights or {})
        for _, _, member in members:
            result.preprocessing_event_ids += member.preprocessing_event_ids
            result.grader_call_event_ids[:0] = member.grader_call_event_ids
            result.evidence += member.evidence
            result.cache_hit = result.cache_hit or member.cache_hit
        return result

    def _children(
        self, members: list[tuple[str, str, GraderResult]], weights: dict[str, float] | None
    ) -> dict[str, Any]:
        return {
            MEMBER_SCORES: [
                _child(name, kind, result, None if weights is None else weights.get(name, 1.0))
                for name, kind, result in members
            ]
        }

    def _all_skipped(self, members: list[tuple[str, str, GraderResult]], details: dict[str, Any]) -> GraderResult:
        return GraderResult(
            score=0.0,
            verdict="skip",
            status="execution_error",
            assertions=[Assertion(text="All evaluators skipped (infrastructure failure)", passed=False)],
            details=details,
            # AgentV skips the composite only when every member skipped; a member it scores 0 is graded there.
            scored_by_agentv=any(result.scored_by_agentv for _, _, result in members),
        )

    def _weighted(self, members: list[tuple[str, str, GraderResult]], weights: dict[str, float]) -> GraderResult:
        details = self._children(members, weights)
        total = weighted = 0.0
        assertions: list[Assertion] = []
        counted = 0
        for name, _, result in members:
            if _skipped(result):
                continue
            weight = weights.get(name, 1.0)
            counted += 1
            total += weight
            weighted += result.score * weight
            assertions += [a.model_copy(update={"text": f"[{name}] {a.text}"}) for a in result.assertions]
        if counted == 0 and members:
            return self._all_skipped(members, details)
        score = weighted / total if total > 0 else 0.0
        return GraderResult(
            score=min(1.0, max(0.0, score)), verdict=score_to_verdict(score), assertions=assertions, details=details
        )

    def _threshold(self, members: list[tuple[str, str, GraderResult]], threshold: float) -> GraderResult:
        details = self._children(members, None)
        assertions: list[Assertion] = []
        counted = passing = 0
        for name, _, result in members:
            if _skipped(result):
                continue
            counted += 1
            passing += result.verdict == "pass"
            assertions += [a.model_copy(update={"text": f"[{name}] {a.text}"}) for a in result.assertions]
        if counted == 0 and members:
            return self._all_skipped(members, details)
        score = passing / counted if counted else 0.0
        passed = score >= threshold
        summary = f"{passing}/{counted} evaluators passed (threshold: {js_number_text(threshold)})"
        return GraderResult(
            score=min(1.0, max(0.0, score)),
            verdict="pass" if passed else "fail",
            assertions=[Assertion(text=summary, passed=passed), *assertions],
            details=details,
        )

    def _code(self, ctx: GradingContext, members: list[tuple[str, str, GraderResult]]) -> GraderResult:
        aggregator = self.spec.aggregator
        details = self._children(members, {})
        stdin = stringify(js_number({"results": {n: _member_result(r) for n, _, r in members}}), indent=True)
        from evalstore.replay.grading.graders.code import grader_environment, secret_mask

        env = grader_environment(ctx, None)
        ctx.waiting()
        child = run_child(
            ["sh", "-c", aggregator.path or ""], stdin, timeout=AGGREGATOR_TIMEOUT_S, cwd=aggregator.cwd, env=env
        )
        mask = secret_mask(ctx, env)
        if mask:  # what it prints of a secret of its environment is stored as the reference, as a code grader's
            child = dataclasses.replace(child, stdout=mask.data(child.stdout), stderr=mask.data(child.stderr))
        call = ctx.recorder.record(
            GraderCalled(
                test_id=ctx.test.id,
                target=ctx.target,
                attempt=ctx.attempt,
                grader=self.spec.name,
                grader_type=self.spec.type,
                call="process",
                request_sha256=ctx.recorder.put_blob(stdin),
                reply_sha256=ctx.recorder.put_blob(child.stdout),
                stderr_sha256=ctx.recorder.put_blob(child.stderr) if child.stderr else None,
                latency_ms=child.duration_ms,
                outcome="ok" if child.exit_code == 0 and not child.timed_out else "error",
                argv=["sh", "-c", aggregator.path or ""],
                cwd=aggregator.cwd,
                exit_code=child.exit_code,
            )
        )
        if child.exit_code != 0 or child.timed_out or child.spawn_error:
            stderr = child.stderr_text().strip()[-2000:]
            why = f"Code evaluator exited with code {child.exit_code}" + (f": {stderr}" if stderr else "")
            result = GraderResult(
                score=0.0,
                verdict="fail",
                assertions=[Assertion(text=f"Code aggregator failed: {why}", passed=False)],
                details=details,
            )
        else:
            result = _reply_verdict(child.stdout.decode("utf-8", errors="replace").strip(), details)
        result.grader_call_event_ids = [call]
        return result

    def _llm(self, ctx: GradingContext, members: list[tuple[str, str, GraderResult]]) -> GraderResult:
        from evalstore.replay.grading.judge.calls import JudgeCall
        from evalstore.replay.grading.judge.modes import Freeform

        details = self._children(members, None)
        failed = GraderResult(
            score=0.0,
            verdict="fail",
            assertions=[Assertion(text="LLM aggregator failed", passed=False)],
            details=details,
        )
        pool = ctx.judges
        if pool is None:
            return failed
        try:
            target = pool.for_grader(ctx, None)
        except NoJudgeError as exc:  # AgentV's aggregator throws (composite.ts:309)
            raise GraderThrew("No grader provider available for LLM aggregation", str(exc)) from None
        try:
            judge, why = pool.resolve_or_cache_only(target)
        except Exception:  # no judge to ask: AgentV's "LLM aggregator failed"
            return failed
        prompt = aggregator_prompt(self.spec.aggregator.prompt, {n: _member_result(r) for n, _, r in members})
        mode = Freeform()
        system, sent = mode.system_prompt(), js_trim(prompt)  # AgentV's provider sends it trimmed (question.trim())
        messages = [{"role": "system", "content": system}, {"role": "user", "content": sent}]
        outcome = JudgeCall(
            ctx, self.spec.name, judge, pool.client, cache_only=why is not None, grader_type="composite"
        ).run(messages, lambda reply: mode.parse(reply, []))
        result = failed
        if outcome.result is not None:
            score = outcome.result.score
            result = GraderResult(
                score=score, verdict=score_to_verdict(score), assertions=outcome.result.assertions, details=details
            )
        result.grader_call_event_ids = list(outcome.call_event_ids)
        result.cache_hit = outcome.cache_hit
        result.grader_target = target.name
        if sent != prompt:  # AgentV's row records the prompt as rendered, untrimmed (as an LLM grader's)
            request = canonical_json({"userPrompt": prompt, "systemPrompt": system})
            result.rendered_prompt_sha256 = ctx.recorder.put_blob(request.encode("utf-8"))
        return result


def aggregator_prompt(template: str | None, results: dict[str, Any]) -> str:
    """The LLM aggregator's prompt as AgentV 4.42.4 renders it (``runLlmAggregator``): ``template`` (else the
    default) with every ``{{EVALUATOR_RESULTS_JSON}}`` replaced by the members' results (name to result) as
    ``JSON.stringify(results, null, 2)`` writes them (``1``, not ``1.0``), through ``String.replace``."""
    text = stringify(js_number(results), indent=True).decode("utf-8")
    return js_replace_all(template or DEFAULT_AGGREGATOR_PROMPT, "{{EVALUATOR_RESULTS_JSON}}", text)


def _reply_verdict(stdout: str, details: dict[str, Any]) -> GraderResult:
    """A code aggregator's reply as AgentV reads it: ``score`` (else 0), ``assertions`` with a text,
    ``verdict`` when it is pass or fail (else from the score)."""
    try:
        reply = json.loads(stdout)
    except ValueError:
        reply = None
    reply = reply if isinstance(reply, dict) else {}
    raw = reply.get("score")
    score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 0.0
    score = min(1.0, max(0.0, score)) if score == score else 0.0
    assertions = [
        Assertion(
            text=str(a["text"]),
            passed=bool(a.get("passed")),
            evidence=a["evidence"] if isinstance(a.get("evidence"), str) else None,
        )
        for a in reply.get("assertions") or []
        if isinstance(a, dict) and isinstance(a.get("text"), str)
    ]
    verdict = str(reply["verdict"]) if reply.get("verdict") in ("pass", "fail") else score_to_verdict(score)
    return GraderResult(score=score, verdict=verdict, assertions=assertions, details=details)
