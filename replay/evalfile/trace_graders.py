"""The graders of what the agent did, parsed as AgentV 4.42's ``grader-parser.ts`` parses them:
``tool-trajectory``, ``latency``, ``cost``, ``token-usage``, ``execution-metrics``, ``skill-trigger``, and
``field-accuracy``.

AgentV skips such a grader with a warning when its configuration cannot be graded (a mode it does not
know, ``any_order`` without ``minimums``, a negative threshold, no field with a valid match), and drops
what it cannot read inside one (an ``args_match`` it does not know, a negative minimum, a non-numeric
limit) while grading the rest; evalstore does the same, with AgentV's reason. Keys AgentV does not read
are ignored, as there.
"""

from __future__ import annotations

import math
from typing import Any

from evalstore.replay.evalfile.fields import ParseContext
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import (
    CostSpec,
    ExecutionMetricsSpec,
    ExpectedToolCall,
    FieldAccuracySpec,
    FieldSpec,
    LatencySpec,
    SkillTriggerSpec,
    TokenUsageSpec,
    ToolTrajectorySpec,
)

MODES = ("any_order", "in_order", "exact", "subset", "superset")
ARGS_MATCH_MODES = ("exact", "superset", "subset", "ignore")
FIELD_MATCHES = ("exact", "numeric_tolerance", "date")

TraceGrader = (
    ToolTrajectorySpec | LatencySpec | CostSpec | TokenUsageSpec | ExecutionMetricsSpec | SkillTriggerSpec
) | FieldAccuracySpec


def parse_trace_grader(
    obj: dict[str, Any], kind: str, common: dict[str, Any], where: Where, ctx: ParseContext
) -> TraceGrader | None:
    """The grader, or None where AgentV skips it (a warning says why). ``common``: name, weight, required,
    min_score and negate, already read."""
    parse = _PARSERS[kind]
    return parse(obj, common, where, ctx)


def _skip(ctx: ParseContext, where: Where, kind: str, name: str, reason: str) -> None:
    ctx.warn(where, f"{kind} grader `{name}` skipped, as AgentV skips it: {reason}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _either(obj: dict[str, Any], snake: str, camel: str) -> Any:
    """AgentV reads the snake_case key, else its camelCase spelling."""
    value = obj.get(snake)
    return obj.get(camel) if value is None else value


def _args_match(raw: Any, where: Where, ctx: ParseContext, owner: str) -> Any:
    if raw is None:
        return None
    if isinstance(raw, list):
        fields = [f for f in raw if isinstance(f, str) and f]
        return fields or None
    if isinstance(raw, str):
        if raw in ARGS_MATCH_MODES:
            return raw
        ctx.warn(where, f"invalid args_match `{raw}` for {owner}: must be exact, superset, subset, ignore, or a list")
    return None


def _tool_trajectory(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    name = common["name"]
    mode = obj.get("mode")
    if mode not in MODES:
        reason = f"invalid mode `{mode}` (must be any_order, in_order, exact, subset, or superset)"
        _skip(ctx, where.key("mode") if "mode" in obj else where, "tool-trajectory", name, reason)
        return None
    minimums: dict[str, float] | None = None
    if obj.get("minimums") is not None:
        raw = obj["minimums"]
        if not isinstance(raw, dict):
            _skip(ctx, where.key("minimums"), "tool-trajectory", name, "minimums must be an object")
            return None
        minimums = {str(tool): float(n) for tool, n in raw.items() if _number(n) is not None and n >= 0}
    args_match = _args_match(
        _either(obj, "args_match", "argsMatch"), where.key("args_match"), ctx, f"tool-trajectory grader `{name}`"
    )
    expected: list[ExpectedToolCall] | None = None
    if obj.get("expected") is not None:
        raw = obj["expected"]
        if not isinstance(raw, list):
            _skip(ctx, where.key("expected"), "tool-trajectory", name, "expected must be an array")
            return None
        expected = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
                continue  # AgentV drops an item without a tool name
            args = item.get("args")
            max_duration = _number(_either(item, "max_duration_ms", "maxDurationMs"))
            expected.append(
                ExpectedToolCall(
                    tool=item["tool"],
                    args=args if args == "any" or isinstance(args, dict) else None,
                    max_duration_ms=max_duration if max_duration is not None and max_duration >= 0 else None,
                    args_match=_args_match(
                        _either(item, "args_match", "argsMatch"),
                        where.key("expected").index(i),
                        ctx,
                        f"expected item `{item['tool']}`",
                    ),
                )
            )
    if mode == "any_order" and minimums is None:
        _skip(ctx, where, "tool-trajectory", name, "any_order mode requires minimums")
        return None
    if mode != "any_order" and expected is None:
        _skip(ctx, where, "tool-trajectory", name, f"{mode} mode requires expected")
        return None
    return ToolTrajectorySpec(mode=mode, minimums=minimums, expected=expected, args_match=args_match, **common)


def _latency(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    threshold = _number(obj.get("threshold"))
    if threshold is None or threshold < 0:
        _skip(ctx, where, "latency", common["name"], "threshold must be a non-negative number")
        return None
    return LatencySpec(threshold=threshold, **common)


def _cost(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    budget = _number(obj.get("budget"))
    if budget is None or budget < 0:
        _skip(ctx, where, "cost", common["name"], "budget must be a non-negative number")
        return None
    return CostSpec(budget=budget, **common)


def _limits(
    obj: dict[str, Any], keys: tuple[tuple[str, str], ...], where: Where, ctx: ParseContext, kind: str, name: str
) -> dict[str, float] | None:
    """The numeric limits set; None (a warning given) for one that is not a non-negative number."""
    limits: dict[str, float] = {}
    for snake, camel in keys:
        raw = _either(obj, snake, camel)
        if raw is None:
            continue
        value = _number(raw)
        if value is None or value < 0:
            _skip(ctx, where.key(snake), kind, name, f"{snake} must be a non-negative finite number")
            return None
        limits[snake] = value
    return limits


def _token_usage(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    limits: dict[str, float] = {}
    for snake, camel in (("max_total", "maxTotal"), ("max_input", "maxInput"), ("max_output", "maxOutput")):
        raw = _either(obj, snake, camel)
        if raw is None:
            continue
        value = _number(raw)
        if value is None or value < 0:
            # AgentV's loop says it skips the grader, and only leaves this limit out.
            ctx.warn(where.key(snake), f"{snake} must be a non-negative finite number; left out, as AgentV does")
            continue
        limits[snake] = value
    if not limits:
        reason = "must set at least one of max_total, max_input, max_output"
        _skip(ctx, where, "token-usage", common["name"], reason)
        return None
    return TokenUsageSpec.model_validate({**limits, **common})


_METRICS = (
    ("max_tool_calls", "maxToolCalls"),
    ("max_llm_calls", "maxLlmCalls"),
    ("max_tokens", "maxTokens"),
    ("max_cost_usd", "maxCostUsd"),
    ("max_duration_ms", "maxDurationMs"),
    ("target_exploration_ratio", "targetExplorationRatio"),
    ("exploration_tolerance", "explorationTolerance"),
)


def _execution_metrics(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    limits = _limits(obj, _METRICS, where, ctx, "execution-metrics", common["name"])
    if limits is None:
        return None
    if not set(limits) - {"exploration_tolerance"}:
        reason = (
            "must set at least one threshold (max_tool_calls, max_llm_calls, max_tokens, max_cost_usd, "
            "max_duration_ms, or target_exploration_ratio)"
        )
        _skip(ctx, where, "execution-metrics", common["name"], reason)
        return None
    return ExecutionMetricsSpec.model_validate({**limits, **common})


def _skill_trigger(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    skill = obj.get("skill")
    if not isinstance(skill, str) or not skill:
        _skip(ctx, where, "skill-trigger", common["name"], "missing skill")
        return None
    should = obj.get("should_trigger")
    if not isinstance(obj.get("name"), str) and not isinstance(obj.get("metric"), str):
        common = {**common, "name": f"skill-trigger-{skill}"}  # AgentV's generated name
    return SkillTriggerSpec(skill=skill, should_trigger=should if isinstance(should, bool) else True, **common)


def _field_accuracy(obj: dict[str, Any], common: dict[str, Any], where: Where, ctx: ParseContext) -> Any:
    name = common["name"]
    raw = obj.get("fields")
    if not isinstance(raw, list) or not raw:
        reason = "missing fields array" if not isinstance(raw, list) else "fields array is empty"
        _skip(ctx, where, "field-accuracy", name, reason)
        return None
    fields: list[FieldSpec] = []
    for i, item in enumerate(raw):
        at = where.key("fields").index(i)
        if not isinstance(item, dict):
            ctx.warn(at, f"field entry of field-accuracy grader `{name}` skipped, as AgentV skips it: not an object")
            continue
        path, match = item.get("path"), item.get("match")
        if not isinstance(path, str) or not path:
            ctx.warn(at, f"field without path in field-accuracy grader `{name}` skipped, as AgentV skips it")
            continue
        if match not in FIELD_MATCHES:
            ctx.warn(
                at,
                f"field `{path}` with invalid match type `{match}` skipped, as AgentV skips it "
                "(must be exact, numeric_tolerance, or date)",
            )
            continue
        formats = item.get("formats")
        fields.append(
            FieldSpec(
                path=path,
                match=match,
                required=item["required"] if isinstance(item.get("required"), bool) else True,
                weight=w if (w := _number(item.get("weight"))) is not None else 1.0,
                tolerance=_number(item.get("tolerance")),
                relative=item["relative"] if isinstance(item.get("relative"), bool) else False,
                formats=[f for f in formats if isinstance(f, str)] if isinstance(formats, list) else None,
            )
        )
    if not fields:
        _skip(ctx, where, "field-accuracy", name, "no valid fields found")
        return None
    aggregation = obj.get("aggregation")
    aggregation = aggregation if aggregation in ("weighted_average", "all_or_nothing") else "weighted_average"
    return FieldAccuracySpec.model_validate({"fields": fields, "aggregation": aggregation, **common})


_PARSERS = {
    "tool-trajectory": _tool_trajectory,
    "latency": _latency,
    "cost": _cost,
    "token-usage": _token_usage,
    "execution-metrics": _execution_metrics,
    "skill-trigger": _skill_trigger,
    "field-accuracy": _field_accuracy,
}
TYPES = tuple(_PARSERS)
