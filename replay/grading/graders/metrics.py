"""Graders of the target's metrics and the agent's calls, as AgentV 4.42 grades them, from the recorded
trace (``ctx.trace()``): ``latency`` (``graders/latency.ts``), ``cost``, ``token-usage``,
``execution-metrics`` and ``skill-trigger``. A metric the run did not record fails its check with
AgentV's words ("No duration data available in trace"), as there.
"""

from __future__ import annotations

from typing import Any

from evalstore.replay.evalfile.specs import (
    CostSpec,
    ExecutionMetricsSpec,
    LatencySpec,
    SkillTriggerSpec,
    TokenUsageSpec,
)
from evalstore.replay.grading.graders.base import GraderResult, GradingContext, score_to_verdict
from evalstore.replay.jsontext import stringify
from evalstore.replay.jstext import js_fixed, js_number_text, js_string
from evalstore.store.events import Assertion

n = js_number_text


def _usd(value: float) -> str:
    return f"${js_fixed(value, 4)}"


def _all_or_nothing(assertions: list[Assertion]) -> GraderResult:
    passed = all(a.passed for a in assertions)
    return GraderResult(score=1.0 if passed else 0.0, verdict="pass" if passed else "fail", assertions=assertions)


def _usage_number(usage: dict[str, Any], key: str) -> float | None:
    value = usage.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class LatencyGrader:
    def __init__(self, spec: LatencySpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        duration = ctx.trace().duration_ms
        if duration is None:
            return _all_or_nothing([Assertion(text="No duration data available in trace", passed=False)])
        limit, took = n(self.spec.threshold), n(duration)
        if duration <= self.spec.threshold:
            return _all_or_nothing([Assertion(text=f"Duration {took}ms <= {limit}ms threshold", passed=True)])
        return _all_or_nothing([Assertion(text=f"Duration {took}ms > {limit}ms threshold", passed=False)])


class CostGrader:
    def __init__(self, spec: CostSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        cost = ctx.trace().cost_usd
        if cost is None:
            return _all_or_nothing([Assertion(text="No cost data available in trace", passed=False)])
        budget = self.spec.budget
        if cost <= budget:
            return _all_or_nothing([Assertion(text=f"Cost {_usd(cost)} <= {_usd(budget)} budget", passed=True)])
        return _all_or_nothing([Assertion(text=f"Cost {_usd(cost)} > {_usd(budget)} budget", passed=False)])


class TokenUsageGrader:
    def __init__(self, spec: TokenUsageSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        usage = ctx.trace().token_usage
        if usage is None:
            return _all_or_nothing([Assertion(text="No token usage data available in trace", passed=False)])
        spent_in = _usage_number(usage, "input") or 0
        spent_out = _usage_number(usage, "output") or 0
        total = spent_in + spent_out + (_usage_number(usage, "cached") or 0)
        assertions = []
        for limit, label, spent in (
            (self.spec.max_input, "Input", spent_in),
            (self.spec.max_output, "Output", spent_out),
            (self.spec.max_total, "Total", total),
        ):
            if limit is None:
                continue
            if spent <= limit:
                assertions.append(Assertion(text=f"{label} tokens {n(spent)} <= {n(limit)}", passed=True))
            else:
                assertions.append(Assertion(text=f"{label} tokens {n(spent)} > {n(limit)}", passed=False))
        return _all_or_nothing(assertions)


class ExecutionMetricsGrader:
    def __init__(self, spec: ExecutionMetricsSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        spec = self.spec
        trace = ctx.trace()
        counts = (spec.max_tool_calls, spec.max_llm_calls, spec.target_exploration_ratio)
        if not trace.recorded and any(limit is not None for limit in counts):
            # AgentV's words and verdict for these limits without a trace; the other limits read the
            # metrics the source kept, which it may still have.
            return GraderResult(
                score=0.0, verdict="fail", assertions=[Assertion(text="No trace summary available", passed=False)]
            )
        summary = trace.summary()
        checks: list[Assertion] = []

        def at_most(label: str, actual: float, limit: float, unit: str = "") -> None:
            ok = actual <= limit
            text = f"{label} {n(actual)}{unit} {'<=' if ok else '>'} {n(limit)}{unit} max"
            checks.append(Assertion(text=text, passed=ok))

        if spec.max_tool_calls is not None:
            at_most("Tool calls", summary["event_count"], spec.max_tool_calls)
        if spec.max_llm_calls is not None:
            at_most("LLM calls", summary["llm_call_count"], spec.max_llm_calls)
        if spec.max_tokens is not None:
            usage = trace.token_usage
            if usage is None:
                checks.append(Assertion(text="Token usage data not available", passed=False))
            else:
                spent = (_usage_number(usage, "input") or 0) + (_usage_number(usage, "output") or 0)
                at_most("Total tokens", spent, spec.max_tokens)
        if spec.max_cost_usd is not None:
            if trace.cost_usd is None:
                checks.append(Assertion(text="Cost data not available", passed=False))
            else:
                ok = trace.cost_usd <= spec.max_cost_usd
                text = f"Cost {_usd(trace.cost_usd)} {'<=' if ok else '>'} {_usd(spec.max_cost_usd)} max"
                checks.append(Assertion(text=text, passed=ok))
        if spec.max_duration_ms is not None:
            if trace.duration_ms is None:
                checks.append(Assertion(text="Duration data not available", passed=False))
            else:
                at_most("Duration", trace.duration_ms, spec.max_duration_ms, "ms")
        if spec.target_exploration_ratio is not None:
            ratio = trace.exploration_ratio()
            target = spec.target_exploration_ratio
            tolerance = spec.exploration_tolerance if spec.exploration_tolerance is not None else 0.2
            if ratio is None:
                checks.append(Assertion(text="Exploration ratio not available (no tool calls)", passed=False))
            elif abs(ratio - target) <= tolerance:
                text = f"Exploration ratio {js_fixed(ratio, 2)} within tolerance of target {n(target)}"
                checks.append(Assertion(text=text, passed=True))
            else:
                diff = abs(ratio - target)
                text = (
                    f"Exploration ratio {js_fixed(ratio, 2)} outside tolerance of target {n(target)} "
                    f"(diff: {js_fixed(diff, 2)}, tolerance: {n(tolerance)})"
                )
                checks.append(Assertion(text=text, passed=False))
        score = sum(a.passed for a in checks) / len(checks) if checks else 0.0
        return GraderResult(score=score, verdict=score_to_verdict(score), assertions=checks)


class SkillTriggerGrader:
    """Whether the agent invoked the skill: a ``Skill`` call naming it, a ``Read`` of a file under
    ``skills/NAME/``, or any call whose result mentions such a path (AgentV's ``skill-trigger.ts``)."""

    def __init__(self, spec: SkillTriggerSpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        skill = self.spec.skill
        calls = ctx.trace().calls
        marker = f"skills/{skill}/"
        evidence = ""
        for call in calls:
            tool = call.tool or ""
            args = call.input if isinstance(call.input, dict) else {}
            if tool.lower() == "skill":
                named = js_string(args.get("skill") if args.get("skill") is not None else "")
                if skill in named:
                    evidence = f'Skill tool invoked with skill="{named}"'
                    break
            elif tool.lower() == "read":
                path = args.get("file_path") if args.get("file_path") is not None else args.get("path")
                path_text = js_string(path if path is not None else "")
                if marker in path_text:
                    evidence = f"Read tool loaded skill file: {path_text}"
                    break
            if call.output is not None:
                said = call.output if isinstance(call.output, str) else stringify(call.output).decode("utf-8")
                if marker in said:
                    evidence = f'Tool "{tool}" output referenced skill file for "{skill}"'
                    break
        triggered = bool(evidence)
        should = self.spec.should_trigger
        if triggered == should:
            text = (
                (evidence or f'Skill "{skill}" triggered as expected')
                if should
                else f'Skill "{skill}" correctly did not trigger'
            )
            return _all_or_nothing([Assertion(text=text, passed=True)])
        if should:
            text = f'Skill "{skill}" not found in {len(calls)} tool call(s)' if calls else "No tool calls recorded"
        else:
            text = evidence or f'Skill "{skill}" triggered unexpectedly'
        return _all_or_nothing([Assertion(text=text, passed=False)])
