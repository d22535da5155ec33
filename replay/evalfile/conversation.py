"""A test's conversation fields (``mode: conversation``, ``turns``, ``aggregation``, ``on_turn_failure``,
``window_size``), read as AgentV 4.42.4 reads them (``yaml-parser.ts`` ``parseTurns``, the orchestrator's
``buildTurnAssertions``) and refused where ``agentv validate`` refuses them (``validateConversationMode``),
with its reasons.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from evalstore.replay.evalfile.fields import ParseContext, expect_list, expect_mapping, warn_unknown
from evalstore.replay.evalfile.graders import AnyGrader, assign_names, implicit_grader, parse_grader
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import ConverterSpec, EvalTest, GraderSpec, LlmGraderSpec, RubricItem, TurnSpec
from evalstore.replay.grading.turn_verdicts import WHOLE, turn_verdict
from evalstore.replay.jsontext import stringify

CONVERSATION_KEYS = ("mode", "turns", "aggregation", "on_turn_failure", "window_size")
TURN_KEYS = ("input", "expected_output", "assertions")
AGGREGATIONS = ("mean", "min", "max")
TURN_FAILURE_POLICIES = ("continue", "stop")


def verdict_graders(test: EvalTest) -> Iterator[tuple[str, GraderSpec]]:
    """Each grader of ``test`` with the verdict it is graded under (what ``replay --graders`` names): its
    own name, or in a conversation the turn's (``turn-N``) or the whole conversation's."""
    if test.mode != "conversation":
        for spec in test.graders:
            yield spec.name, spec
        return
    for n, turn in enumerate(test.turns, start=1):
        for spec in turn.graders:
            yield turn_verdict(n), spec
    for spec in test.graders:
        yield WHOLE, spec


def conversation_fields(
    obj: dict[str, Any], where: Where, ctx: ParseContext, converters: list[ConverterSpec]
) -> dict[str, Any]:
    """The ``EvalTest`` fields of a test's conversation keys (none for a test without them)."""
    mode = obj.get("mode")
    conversation = mode == "conversation"
    if mode is not None and not conversation:
        ctx.warn(where.key("mode"), f"`mode: {mode}` means nothing to AgentV (only `conversation` does); ignored")
    for key in ("turns", "aggregation", "on_turn_failure", "window_size"):
        if obj.get(key) is not None and not conversation:
            raise where.key(key).error(f"'{key}' requires mode: conversation")
    if not conversation:
        return {}
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise where.key("mode").error("mode: conversation requires a non-empty 'turns' array")
    if obj.get("expected_output") is not None:
        raise where.key("expected_output").error(
            "Top-level 'expected_output' is not allowed with mode: conversation (use per-turn expected_output instead)"
        )
    fields: dict[str, Any] = {
        "mode": "conversation",
        "turns": [_turn(turn, where.key("turns").index(i), ctx, converters) for i, turn in enumerate(turns)],
    }
    for key, allowed in (("aggregation", AGGREGATIONS), ("on_turn_failure", TURN_FAILURE_POLICIES)):
        value = obj.get(key)
        if value is not None:
            if value not in allowed:
                raise where.key(key).error(f"`{value}` is not one of {', '.join(allowed)}")
            fields[key] = value
    window = obj.get("window_size")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, (int, float)) or window < 1:
            raise where.key("window_size").error("expected a number of exchanges, 1 or more")
        fields["window_size"] = int(window)
    return fields


def _turn(raw: Any, where: Where, ctx: ParseContext, converters: list[ConverterSpec]) -> TurnSpec:
    if not isinstance(raw, dict):
        raise where.error("Turn must be an object")
    warn_unknown(ctx, raw, TURN_KEYS, where)
    text = raw.get("input")
    if text is None or (isinstance(text, str) and not text.strip()) or (isinstance(text, list) and not text):
        raise where.key("input").error("Each turn must have a non-empty input")
    graders: list[AnyGrader] = []
    if raw.get("assertions") is not None:
        at = where.key("assertions")
        criteria: list[str] = []
        for i, item in enumerate(expect_list(raw["assertions"], at, "a list of assertions")):
            if isinstance(item, str):
                criteria.append(item)
            else:
                # AgentV hands a turn's assertions to its grader registry as written (``buildTurnAssertions``):
                # a type it does not hold there (`rubrics`, `code_grader`, `code-judge`) scores 0.
                grader = parse_grader(expect_mapping(item, at.index(i)), at.index(i), ctx, converters, as_written=True)
                if grader is not None:
                    graders.append(grader)
        if criteria:
            rubrics = [
                RubricItem(id=f"criterion-{n}", outcome=text, required=False, required_written=True)
                for n, text in enumerate(criteria, start=1)
            ]
            graders.insert(
                0,
                LlmGraderSpec(name="turn-rubrics", declared_type="rubrics", rubrics=rubrics, preprocessors=converters),
            )
    if not graders and raw.get("expected_output") is not None:
        graders = [implicit_grader(converters)]
    return TurnSpec(
        input=text if isinstance(text, str) else stringify(text).decode("utf-8"),
        expected_output=raw.get("expected_output"),
        graders=assign_names(graders),
    )
