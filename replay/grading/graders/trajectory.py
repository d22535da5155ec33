"""``tool-trajectory``: the agent's tool calls against what was expected, as AgentV 4.42 grades them
(``graders/tool-trajectory.ts``), from the recorded trace (``ctx.trace()``), so a stored run's trajectory
is regraded without the agent.

Modes: ``any_order`` (each tool called at least its minimum; the score is the share of tools that reach
it), ``in_order`` (the expected calls appear in order, others between them allowed), ``exact`` (the calls
are the expected ones, position by position), ``superset`` (each expected call is found, greedily, each
actual call used once), ``subset`` (every actual call matches some expected item). Arguments are compared
by the item's ``args_match``, else the grader's, else ``exact``: deep equality, ``superset`` (the
expected keys present and equal), ``subset`` (no key beyond the expected, those equal), ``ignore``, or a
list of dot paths compared alone. ``args: any`` (or none) matches any arguments. ``max_duration_ms`` on an
item is a latency assertion on the matched call (``in_order``, ``exact``), left out of the score when the
call has no duration.
"""

from __future__ import annotations

from typing import Any

from evalstore.replay.evalfile.specs import ExpectedToolCall, ToolTrajectorySpec
from evalstore.replay.grading.graders.base import GraderResult, GradingContext, score_to_verdict
from evalstore.replay.jstext import js_number_text
from evalstore.replay.trace import Trace
from evalstore.store.events import Assertion


def js_deep_equal(a: Any, b: Any) -> bool:
    """AgentV's ``deepEqual``: JSON values equal by type and value (``1`` equals ``1.0``, not ``true``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(js_deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(k in b and js_deep_equal(v, b[k]) for k, v in a.items())
    if type(a) is not type(b):
        return False
    return bool(a == b)


_MISSING = object()


def _nested(value: Any, path: str) -> Any:
    """``getNestedValue``: a dot path into objects (and arrays, by index), or missing."""
    current = value
    for part in path.split("."):
        if isinstance(current, dict):
            current = current.get(part, _MISSING)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
        if current is _MISSING:
            return _MISSING
    return current


def args_match(expected: Any, actual: Any, mode: Any) -> bool:
    """AgentV's ``argsMatch``: whether a call's arguments satisfy an expected item's ``args``."""
    if expected is None or expected == "any" or mode == "ignore":
        return True
    if actual is None:
        return False
    if isinstance(mode, list):
        for field in mode:
            want = _nested(expected, field)
            if want is _MISSING:
                continue
            got = _nested(actual, field)
            if got is _MISSING or not js_deep_equal(want, got):
                return False
        return True
    keys = actual if isinstance(actual, dict) else {}
    if mode == "superset":
        return all(k in keys and js_deep_equal(v, keys[k]) for k, v in expected.items())
    if mode == "subset":
        return all(k in expected and js_deep_equal(v, expected[k]) for k, v in keys.items())
    return js_deep_equal(expected, actual)


def _mode(item: ExpectedToolCall, spec: ToolTrajectorySpec) -> Any:
    return item.args_match if item.args_match is not None else (spec.args_match or "exact")


NO_TRACE = "No trace available for evaluation"
"""AgentV's verdict on a response graded without a trace (its ``tool-trajectory`` given no output either)."""


def _result(score: float, assertions: list[Assertion]) -> GraderResult:
    return GraderResult(score=score, verdict=score_to_verdict(score), assertions=assertions)


def _fixed(passed: bool, text: str) -> GraderResult:
    return GraderResult(
        score=1.0 if passed else 0.0,
        verdict="pass" if passed else "fail",
        assertions=[Assertion(text=text, passed=passed)],
    )


class ToolTrajectoryGrader:
    def __init__(self, spec: ToolTrajectorySpec) -> None:
        self.spec = spec

    def grade(self, ctx: GradingContext) -> GraderResult:
        trace = ctx.trace()
        if not trace.recorded:
            return _fixed(False, NO_TRACE)
        mode = self.spec.mode
        if mode == "any_order":
            return self._any_order(trace)
        calls = trace.calls
        if mode in ("in_order", "exact"):
            return self._sequence(calls, exact=mode == "exact")
        if mode == "superset":
            return self._superset(calls)
        return self._subset(calls)

    def _any_order(self, trace: Trace) -> GraderResult:
        minimums = self.spec.minimums or {}
        if not minimums:
            return _fixed(True, "No tool requirements specified")
        counts = trace.summary()["tool_calls"]
        assertions = []
        for tool, required in minimums.items():
            actual = counts.get(tool, 0)
            text = f"{tool}: called {actual} times (required >={js_number_text(required)})"
            assertions.append(Assertion(text=text, passed=actual >= required))
        return _result(sum(a.passed for a in assertions) / len(minimums), assertions)

    def _sequence(self, calls: list[Any], *, exact: bool) -> GraderResult:
        expected = self.spec.expected or []
        if not expected:
            return _fixed(True, "No tool sequence specified")
        assertions: list[Assertion] = []
        hits = latency_hits = latency_skips = 0
        latency_count = sum(1 for item in expected if item.max_duration_ms is not None)
        if exact and len(calls) != len(expected):
            assertions.append(Assertion(text=f"Expected {len(expected)} tool calls, got {len(calls)}", passed=False))
        position = 0
        for i, item in enumerate(expected):
            matched = None
            if exact:
                if i >= len(calls):
                    continue
                call = calls[i]
                if call.tool != item.tool:
                    assertions.append(
                        Assertion(text=f"Position {i}: expected {item.tool}, got {call.tool}", passed=False)
                    )
                elif args_match(item.args, call.input, _mode(item, self.spec)):
                    assertions.append(Assertion(text=f"Position {i}: {item.tool}", passed=True))
                    matched = call
                else:
                    assertions.append(Assertion(text=f"Position {i}: {item.tool} args mismatch", passed=False))
            else:
                found = mismatch = False
                while position < len(calls):
                    call = calls[position]
                    if call.tool == item.tool:
                        if args_match(item.args, call.input, _mode(item, self.spec)):
                            assertions.append(Assertion(text=f"Found {item.tool} at position {position}", passed=True))
                            matched, found = call, True
                        else:
                            text = f"Expected {item.tool} at position {i}: tool found at {position} but args mismatch"
                            assertions.append(Assertion(text=text, passed=False))
                            mismatch = True
                        position += 1
                        break
                    position += 1
                if not found and not mismatch:
                    text = f"Expected {item.tool} at position {i}, not found in remaining trace"
                    assertions.append(Assertion(text=text, passed=False))
            if matched is None:
                continue
            hits += 1
            if item.max_duration_ms is None:
                continue
            duration = matched.duration_ms
            limit = js_number_text(item.max_duration_ms)
            if duration is None:
                latency_skips += 1  # AgentV only warns on its console: no duration, no assertion
            elif duration <= item.max_duration_ms:
                text = f"{item.tool} completed in {js_number_text(duration)}ms (max: {limit}ms)"
                assertions.append(Assertion(text=text, passed=True))
                latency_hits += 1
            else:
                assertions.append(
                    Assertion(text=f"{item.tool} took {js_number_text(duration)}ms (max: {limit}ms)", passed=False)
                )
        if exact:
            for i in range(len(calls), len(expected)):
                assertions.append(
                    Assertion(text=f"Position {i}: expected {expected[i].tool}, got nothing", passed=False)
                )
        total = len(expected) + latency_count - latency_skips
        return _result((hits + latency_hits) / total if total > 0 else 1.0, assertions)

    def _superset(self, calls: list[Any]) -> GraderResult:
        expected = self.spec.expected or []
        if not expected:
            return _fixed(True, "No expected tools specified")
        used: set[int] = set()
        assertions = []
        for item in expected:
            for j, call in enumerate(calls):
                if (
                    j not in used
                    and call.tool == item.tool
                    and args_match(item.args, call.input, _mode(item, self.spec))
                ):
                    assertions.append(Assertion(text=f"Found {item.tool} at position {j}", passed=True))
                    used.add(j)
                    break
            else:
                assertions.append(Assertion(text=f"Expected {item.tool} not found in actual trajectory", passed=False))
        return _result(sum(a.passed for a in assertions) / len(expected), assertions)

    def _subset(self, calls: list[Any]) -> GraderResult:
        expected = self.spec.expected or []
        if not expected:
            if not calls:
                return _fixed(True, "No tool calls and no expected tools")
            return _fixed(False, f"{len(calls)} unexpected tool call(s) with empty allowed list")
        if not calls:
            return _fixed(True, "No actual tool calls (trivially a subset)")
        assertions = []
        for i, call in enumerate(calls):
            allowed = any(
                call.tool == item.tool and args_match(item.args, call.input, _mode(item, self.spec))
                for item in expected
            )
            verb = "is" if allowed else "is not"
            assertions.append(Assertion(text=f"Position {i}: {call.tool} {verb} in allowed set", passed=allowed))
        return _result(sum(a.passed for a in assertions) / len(calls), assertions)
