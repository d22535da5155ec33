"""A test's ``depends_on`` and ``on_dependency_failure``, read and run in order as AgentV 4.42.4 does
(``yaml-parser.ts`` reads them; ``orchestrator.ts``'s ``validateDependencyGraph`` and ``computeWaves``
order the run).

Tests run in waves: a test starts once every test it depends on has finished. Only AgentV's execution
error of a dependency counts as its failure (``failures.agentv_execution_error``: a low score is a test that
ran, and so is one whose code grader crashed, evalstore's execution error); then the test is not run and ends
in an execution error saying which dependency failed (``skip``, the default, and ``fail`` differ only in
the word AgentV writes), or runs all the same (``run``). A replay regrades what was recorded: the order
does not matter there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.fields import ParseContext
from evalstore.replay.evalfile.source import Where
from evalstore.replay.evalfile.specs import EvalSuite, EvalTest

POLICIES = ("skip", "fail", "run")


def dependencies(obj: Mapping[str, Any], where: Where, ctx: ParseContext) -> dict[str, Any]:
    """The EvalTest fields: AgentV keeps the strings of a ``depends_on`` list and a known policy, and
    drops the rest without a word; evalstore drops them with a warning."""
    out: dict[str, Any] = {}
    raw = obj.get("depends_on")
    if raw is not None:
        if not isinstance(raw, list):
            ctx.warn(where.key("depends_on"), "ignored, as AgentV ignores it: it must be a list of test ids")
        else:
            out["depends_on"] = [dep for dep in raw if isinstance(dep, str)]
            if len(out["depends_on"]) < len(raw):
                ctx.warn(where.key("depends_on"), "entries that are not test ids (strings) ignored, as AgentV does")
    policy = obj.get("on_dependency_failure")
    if policy is not None:
        if policy in POLICIES:
            out["on_dependency_failure"] = policy
        else:
            ctx.warn(
                where.key("on_dependency_failure"),
                f"ignored, as AgentV ignores it: one of {', '.join(POLICIES)} (the default is skip)",
            )
    return out


def waves(suite: EvalSuite) -> list[list[EvalTest]]:
    """The suite's tests in the order they may run: each wave only after every earlier one; an unknown or
    own id, or a cycle, is an :class:`EvalFileError` with AgentV's words (``agentv eval`` refuses to start
    then, though ``agentv validate`` passes the file)."""
    tests = suite.tests
    if not any(t.depends_on for t in tests):
        return [list(tests)]

    def refuse(problem: str) -> EvalFileError:
        return EvalFileError(suite.path, None, "depends_on", f"{problem}; fix the test's depends_on")

    ids = {t.id for t in tests}
    for test in tests:
        for dep in test.depends_on:
            if dep not in ids:
                raise refuse(f"Test '{test.id}' depends on '{dep}', but no test with that ID exists in this suite")
            if dep == test.id:
                raise refuse(f"Test '{test.id}' depends on itself")
    done: set[str] = set()
    left = list(tests)
    out: list[list[EvalTest]] = []
    while left:
        wave = [t for t in left if all(dep in done for dep in t.depends_on)]
        if not wave:
            raise refuse(f"Circular dependency detected: {_cycle(left)}")
        out.append(wave)
        done.update(t.id for t in wave)
        left = [t for t in left if t.id not in done]
    return out


def _cycle(left: Sequence[EvalTest]) -> str:
    """One cycle among tests none of which can start, written as AgentV writes it."""
    deps = {t.id: t.depends_on for t in left}
    path: list[str] = []
    current = left[0].id
    while current not in path:
        path.append(current)
        current = next(d for d in deps[current] if d in deps)
    return " → ".join([*path[path.index(current) :], current])


def blocked_by(test: EvalTest, failed: set[str]) -> str | None:
    """The execution error a test ends in because a dependency failed, or None when it runs."""
    if test.on_dependency_failure == "run":
        return None
    broken = [dep for dep in test.depends_on if dep in failed]
    if not broken:
        return None
    prefix = "Skipped" if test.on_dependency_failure == "skip" else "Failed"
    return f"{prefix}: dependency failed ({', '.join(broken)})"
