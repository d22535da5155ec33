"""Parsing the graders of what the agent did as AgentV 4.42's grader-parser.ts parses them, and the pieces of
their grading that the fixture runs of tests/e2e/test_e2e_agentv_graders.py do not reach."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evalstore.replay.errors import EvalFileError
from evalstore.replay.evalfile.parser import load_eval
from evalstore.replay.grading.graders.field_accuracy import js_date, parse_json_from_text
from evalstore.replay.grading.graders.trajectory import args_match, js_deep_equal
from evalstore.replay.jsdate import iso_day


def load(tmp_path: Path, assertions: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "suite.eval.yaml"
    body = textwrap.indent(textwrap.dedent(assertions), " " * 6)
    path.write_text(f"name: s\ntests:\n  - id: t\n    input: hi\n    criteria: c\n    assertions:\n{body}")
    return load_eval(path)


@pytest.mark.parametrize(
    "assertion,reason",
    [
        ("- {type: tool-trajectory, mode: sometimes, expected: []}", "invalid mode `sometimes`"),
        ("- {type: tool-trajectory, mode: any_order}", "any_order mode requires minimums"),
        ("- {type: tool-trajectory, mode: in_order}", "in_order mode requires expected"),
        ("- {type: tool-trajectory, mode: exact, expected: {tool: x}}", "expected must be an array"),
        ("- {type: latency, threshold: -1}", "threshold must be a non-negative number"),
        ("- {type: cost}", "budget must be a non-negative number"),
        ("- {type: token-usage}", "must set at least one of max_total, max_input, max_output"),
        ("- {type: execution-metrics, exploration_tolerance: 0.1}", "must set at least one threshold"),
        ("- {type: execution-metrics, max_tool_calls: -2}", "max_tool_calls must be a non-negative finite number"),
        ("- {type: skill-trigger}", "missing skill"),
        ("- {type: field-accuracy, fields: []}", "fields array is empty"),
        ("- {type: field-accuracy, fields: [{path: a, match: fuzzy}]}", "no valid fields found"),
        ("- {type: composite, aggregator: {type: weighted_average}}", "missing assertions"),
        ("- {type: composite, assertions: [{name: a, type: contains, value: x}]}", "missing aggregator"),
        (
            "- {type: composite, aggregator: {type: threshold, threshold: 2}, assertions: [{name: a, type: contains, value: x}]}",
            "threshold must be a number between 0.0 and 1.0",
        ),
        (
            "- {type: composite, aggregator: {type: weighted_average}, assertions: [{type: contains, value: x}]}",
            "no valid member evaluators",
        ),
    ],
)
def test_a_grader_agentv_skips_is_skipped_with_its_reason(tmp_path: Path, assertion: str, reason: str) -> None:
    suite = load(tmp_path, assertion + "\n- {type: contains, value: hi}")
    assert [g.type for g in suite.tests[0].graders] == ["contains"]
    assert any(reason in w and "as AgentV skips it" in w for w in suite.warnings), suite.warnings


def test_what_agentv_drops_inside_a_grader_is_dropped(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """\
        - type: tool-trajectory
          mode: in_order
          args_match: loose
          expected:
            - {tool: a, max_duration_ms: -5, args_match: [], args: [1, 2]}
            - {nottool: b}
            - {tool: c, args: any, maxDurationMs: 20, argsMatch: subset}
        - {type: token-usage, max_total: 10, max_input: lots}
        - {type: tool-trajectory, mode: any_order, minimums: {a: 2, b: -1, c: many}}
        """,
    )
    trajectory, usage, minimums = suite.tests[0].graders
    assert trajectory.args_match is None and [e.tool for e in trajectory.expected] == ["a", "c"]
    first, last = trajectory.expected
    assert (first.args, first.max_duration_ms, first.args_match) == (None, None, None)
    assert (last.args, last.max_duration_ms, last.args_match) == ("any", 20, "subset")
    assert (usage.max_total, usage.max_input) == (10, None)
    assert minimums.minimums == {"a": 2}
    assert any("invalid args_match `loose`" in w for w in suite.warnings)


def test_inline_assert_cannot_be_named_in_yaml(tmp_path: Path) -> None:
    with pytest.raises(EvalFileError, match="inline-assert` wraps a TypeScript function"):
        load(tmp_path, "- {type: inline-assert}")


def test_composite_members_keep_their_types_and_names(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        """\
        - name: both
          type: composite
          aggregator: {type: weighted_average, weights: {fast: 2, odd: x}}
          assertions:
            - {name: fast, type: latency, threshold: 100}
            - {name: inner, type: composite, aggregator: {type: threshold, threshold: 0.5},
               assertions: [{name: q, type: contains, value: hi}]}
            - {name: custom, type: word-count}
        """,
    )
    (composite,) = suite.tests[0].graders
    assert [(m.name, m.type) for m in composite.assertions] == [("fast", "latency"), ("inner", "composite")]
    assert composite.aggregator.weights == {"fast": 2.0}


@pytest.mark.parametrize(
    "a,b,equal",
    [
        (1, 1.0, True),
        (True, 1, False),
        ({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}, True),
        ({"a": 1}, {}, False),
    ],
)
def test_deep_equality_is_javascripts(a, b, equal) -> None:  # type: ignore[no-untyped-def]
    assert js_deep_equal(a, b) is equal


def test_args_matchers() -> None:
    actual = {"q": "x", "opts": {"depth": 2, "deep": [1]}}
    assert args_match({"q": "x"}, actual, "superset") and not args_match({"q": "x"}, actual, "exact")
    assert args_match({"q": "x", "opts": {"depth": 2, "deep": [1]}, "more": 1}, actual, "subset")
    assert not args_match({"q": "y", "opts": actual["opts"]}, actual, "subset")
    assert args_match({"opts": {"depth": 2}, "q": "z"}, actual, ["opts.depth", "missing"])
    assert not args_match({"opts": {"depth": 3}}, actual, ["opts.depth"])
    assert args_match({"q": "y"}, None, "ignore") and not args_match({"q": "y"}, None, "superset")


@pytest.mark.parametrize(
    "text,formats,day",
    # JavaScript's `new Date` (node 20, UTC) and AgentV's fallbacks, as checked with node
    [
        ("15-JAN-2025", [], "2025-01-15"),
        ("2025-01-15", [], "2025-01-15"),
        ("01/15/2025", [], "2025-01-15"),
        ("2025/01/15", [], "2025-01-15"),
        ("January 15, 2025", [], "2025-01-15"),
        ("15 Jan 2025", [], "2025-01-15"),
        ("2025-01-15T23:30:00-05:00", [], "2025-01-16"),
        ("2025-1-5", [], "2025-01-05"),
        ("15/01/2025", ["DD/MM/YYYY"], "2025-01-15"),
        ("15/01/2025", [], "2025-01-15"),
        # `new Date("05/01/2025")` is 1 May, before AgentV's DD/MM fallback is consulted
        ("05/01/2025", ["DD/MM/YYYY"], "2025-05-01"),
        ("garbage", [], None),
    ],
)
def test_dates_read_as_agentv_reads_them(text: str, formats: list[str], day: str | None) -> None:
    found = js_date(text, formats)
    assert (iso_day(found) if found is not None else None) == day


def test_json_is_read_from_fenced_text_with_a_repaired_passed() -> None:
    assert parse_json_from_text('Here:\n```json\n{"a": 1, "passed": "yes"}\n```') == {"a": 1, "passed": False}


def test_the_llm_aggregator_asks_the_judge_with_the_members_results_through_the_cache(
    judge_server, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from judge_server import freeform
    from test_llm_grader import KEY_ENV, SECRET, make_pool

    from evalstore.replay.content import Message
    from evalstore.replay.evalfile.specs import AggregatorSpec, AssertionSpec, CompositeSpec, EvalSuite, EvalTest
    from evalstore.replay.grading.engine import grade_test
    from evalstore.replay.grading.graders.base import TranscriptInfo
    from evalstore.replay.recording import MemoryRecorder

    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.respond_with(lambda request: freeform(0.6, [("members weighed", True)]))
    composite = CompositeSpec(
        name="judged",
        assertions=[
            AssertionSpec(name="hi", type="contains", value="hi"),
            AssertionSpec(name="bye", type="contains", value="bye"),
        ],
        aggregator=AggregatorSpec(type="llm-grader", prompt="Weigh these:\n{{EVALUATOR_RESULTS_JSON}}"),
    )
    test = EvalTest(id="t", input=[Message(role="user", content="greet")], graders=[composite])
    suite = EvalSuite(path="/evals/s.eval.yaml", name="s", tests=[test])
    transcript = TranscriptInfo(messages=[Message(role="assistant", content="hi there")])
    recorder = MemoryRecorder()
    with make_pool(judge_server) as pool:
        ((_, verdict),) = grade_test(suite, test, transcript, recorder, judges=pool).verdicts
        assert (verdict.score, [a.text for a in verdict.assertions]) == (0.6, ["members weighed"])
        assert [c["name"] for c in verdict.details["scores"]] == ["hi", "bye"]
        (request,) = judge_server.requests
        prompt = request.body["messages"][-1]["content"]
        assert prompt.startswith("Weigh these:\n{") and '"hi": {' in prompt and '"score": 0' in prompt
        # the same composite again: the judge's reply comes from the cache
        again = grade_test(suite, test, transcript, recorder, judges=pool).verdicts[0][1]
    assert again.score == 0.6 and again.cache_hit and len(judge_server.requests) == 1


def test_a_code_aggregator_runs_as_a_code_grader_does_its_secrets_kept_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalstore.replay.content import Message
    from evalstore.replay.evalfile.specs import AggregatorSpec, AssertionSpec, CompositeSpec, EvalSuite, EvalTest
    from evalstore.replay.grading.engine import grade_test
    from evalstore.replay.grading.graders.base import TranscriptInfo
    from evalstore.replay.recording import MemoryRecorder
    from evalstore.store.events import GraderCalled

    secret = "sk-aggregator-0a9f3c2e7d41"
    monkeypatch.setenv("AGGREGATOR_API_KEY", secret)
    script = 'printf \'{"score": 0.25, "verdict": "pass", "assertions": [{"text": "key %s", "passed": 1}]}\' "$AGGREGATOR_API_KEY"'
    composite = CompositeSpec(
        name="scripted",
        assertions=[AssertionSpec(name="hi", type="contains", value="hi")],
        aggregator=AggregatorSpec(type="code-grader", path=script, cwd=str(tmp_path)),
    )
    test = EvalTest(id="t", input=[Message(role="user", content="greet")], graders=[composite])
    suite = EvalSuite(path=str(tmp_path / "s.eval.yaml"), name="s", tests=[test])
    recorder = MemoryRecorder()
    ((_, verdict),) = grade_test(
        suite, test, TranscriptInfo(messages=[Message(role="assistant", content="hi")]), recorder
    ).verdicts
    # AgentV reads score, verdict (pass/fail) and assertions with a text from the reply
    assert (verdict.score, verdict.verdict) == (0.25, "pass")
    assert [(a.text, a.passed) for a in verdict.assertions] == [("key ${{ AGGREGATOR_API_KEY }}", True)]
    (call,) = [e for _, e in recorder.events if isinstance(e, GraderCalled)]
    assert call.argv == ["sh", "-c", script] and call.cwd == str(tmp_path)
    stdin = json.loads(recorder.get_blob(call.request_sha256))
    assert stdin["results"]["hi"]["score"] == 1 and stdin["results"]["hi"]["verdict"] == "pass"
    assert secret.encode() not in recorder.get_blob(call.reply_sha256)
