"""Rubric items of an llm-grader (AgentV v4 ``grader-parser.ts``, agentv-formats.md §5.4)."""

from __future__ import annotations

from typing import Any

from evalstore.replay.evalfile.fields import ParseContext, expect_mapping, opt_bool, opt_number, opt_str, warn_unknown
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import RubricItem

RUBRIC_KEYS = (
    "id",
    "outcome",
    "criteria",
    "expected_outcome",
    "description",
    "weight",
    "required",
    "operator",
    "min_score",
    "required_min_score",
    "score_ranges",
)
OPERATORS = ("correctness", "contradiction")
# Legacy spellings of `outcome`, in the order AgentV looked for them.
OUTCOME_ALIASES = ("criteria", "expected_outcome", "description")
SCORE_MIN, SCORE_MAX = 0, 10


def parse_rubric_items(raw: Any, where: Where, ctx: ParseContext) -> list[RubricItem]:
    """Items from a list of strings and objects (a single string counts as one item)."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise where.error("expected a list of rubric items (strings or objects with `outcome`)")
    items: list[RubricItem] = []
    for i, entry in enumerate(raw):
        item = _parse_item(entry, i + 1, where.index(i), ctx)
        if item is not None:
            items.append(item)
    ids = [item.id for item in items]
    for i, item_id in enumerate(ids):
        if item_id in ids[:i]:
            raise where.index(i).error(f"duplicate rubric id `{item_id}`; give each item its own `id`")
    return items


def _parse_item(entry: Any, number: int, where: Where, ctx: ParseContext) -> RubricItem | None:
    default_id = f"rubric-{number}"
    if isinstance(entry, str):
        if not entry.strip():
            ctx.warn(where, "empty rubric item skipped")
            return None
        return RubricItem(id=default_id, outcome=entry)
    obj = expect_mapping(entry, where, "a rubric item (a string or an object with `outcome`)")
    warn_unknown(ctx, obj, RUBRIC_KEYS, where)
    item_id = obj.get("id", default_id)
    if isinstance(item_id, (int, float)) and not isinstance(item_id, bool):
        item_id = str(item_id)
    if not isinstance(item_id, str) or not item_id.strip():
        raise where.key("id").error("expected a non-empty string")

    outcome = opt_str(obj, "outcome", where)
    for alias in OUTCOME_ALIASES:
        if outcome is None:
            outcome = opt_str(obj, alias, where)
    score_ranges = None
    if obj.get("score_ranges") is not None:
        score_ranges = _parse_score_ranges(obj["score_ranges"], where.key("score_ranges"))
    if not outcome and score_ranges is None:
        ctx.warn(where, "rubric item without `outcome` skipped; add `outcome` (or `criteria`)")
        return None

    operator = opt_str(obj, "operator", where)
    if operator is not None and operator not in OPERATORS:
        ctx.warn(where.key("operator"), f"unknown operator `{operator}` ignored; use one of {', '.join(OPERATORS)}")
        operator = None

    min_score = opt_number(obj, "min_score", where, low=0.0, high=1.0, low_open=True)
    legacy_min = opt_number(obj, "required_min_score", where, low=SCORE_MIN, high=SCORE_MAX)
    if legacy_min is not None:
        ctx.warn(where.key("required_min_score"), "deprecated; use `min_score` (0-1), read here as value/10")
        if min_score is None:
            min_score = legacy_min / 10 or None
    weight = opt_number(obj, "weight", where, low=0.0)
    required = opt_bool(obj, "required", where)
    return RubricItem(
        id=item_id,
        outcome=outcome or "",
        weight=1.0 if weight is None else weight,
        required=True if required is None else required,
        required_written=required is not None,
        operator=operator,  # type: ignore[arg-type]
        min_score=min_score,
        score_ranges=score_ranges,
    )


def _parse_score_ranges(raw: Any, where: Where) -> list[dict[str, Any]]:
    """``[{score_range: [lo, hi], outcome}]`` sorted, covering 0..10 exactly without overlap.

    The shorthand map ``{0: bad, 7: good, 10: perfect}`` gives lower bounds; each range runs to the
    next bound minus one, the last to 10.
    """
    if isinstance(raw, dict):
        ranges = _expand_shorthand(raw, where)
    elif isinstance(raw, list):
        ranges = [_parse_range(entry, where.index(i)) for i, entry in enumerate(raw)]
    else:
        raise where.error("expected a list of {score_range: [min, max], outcome} or a map {0: outcome, 7: outcome}")
    if not ranges:
        raise where.error("no score ranges; cover 0-10")
    ranges.sort(key=lambda r: r["score_range"][0])
    expected_low = SCORE_MIN
    for entry in ranges:
        low, high = entry["score_range"]
        if low < expected_low:
            raise where.error(f"score ranges overlap at {low}; make them disjoint")
        if low > expected_low:
            raise where.error(f"score ranges leave {expected_low}-{low - 1} uncovered; cover 0-10 without gaps")
        expected_low = high + 1
    if expected_low != SCORE_MAX + 1:
        raise where.error(f"score ranges end at {expected_low - 1}; the last range must reach 10")
    return ranges


def _expand_shorthand(raw: dict[Any, Any], where: Where) -> list[dict[str, Any]]:
    bounds: list[tuple[int, str]] = []
    for key, outcome in raw.items():
        bound = _score(key, where.key(key))
        if not isinstance(outcome, str) or not outcome.strip():
            raise where.key(key).error("expected the outcome text for this score")
        bounds.append((bound, outcome))
    bounds.sort()
    ranges = []
    for i, (low, outcome) in enumerate(bounds):
        high = bounds[i + 1][0] - 1 if i + 1 < len(bounds) else SCORE_MAX
        ranges.append({"score_range": [low, high], "outcome": outcome})
    return ranges


def _parse_range(entry: Any, where: Where) -> dict[str, Any]:
    obj = expect_mapping(entry, where, "{score_range: [min, max], outcome}")
    bounds = obj.get("score_range")
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise where.key("score_range").error("expected [min, max] with integers 0-10")
    low = _score(bounds[0], where.key("score_range").index(0))
    high = _score(bounds[1], where.key("score_range").index(1))
    if low > high:
        raise where.key("score_range").error(f"min {low} is above max {high}")
    outcome = obj.get("outcome", obj.get("expected_outcome"))
    if not isinstance(outcome, str) or not outcome.strip():
        raise where.error("`outcome` is required for each score range")
    return {"score_range": [low, high], "outcome": outcome}


def _score(value: Any, where: Where) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not SCORE_MIN <= value <= SCORE_MAX:
        raise where.error(f"score bound {value!r} must be an integer 0-10")
    return value
