"""Test scores from grader verdicts: negate, weights, required gates, execution errors, AgentV rows."""

from __future__ import annotations

import json

import pytest
from fixture_paths import AGENTV_FIXTURES

from evalstore.replay import failures
from evalstore.replay.evalfile.specs import AssertionSpec
from evalstore.replay.grading.graders.base import GraderResult
from evalstore.replay.grading.graders.code import execution_error as code_grader_error
from evalstore.replay.grading.scoring import (
    apply_negate,
    effective_threshold,
    required_gate,
    score_recorded,
    score_test,
)
from evalstore.store.events import Assertion

BASELINE = AGENTV_FIXTURES / "v4" / "rubric" / "dataset.eval.baseline.jsonl"


def spec(name: str = "g", **fields) -> AssertionSpec:
    return AssertionSpec(name=name, type="contains", value="x", **fields)


def result(score: float, verdict: str | None = None, status: str = "ok", failed: str | None = None) -> GraderResult:
    assertions = [Assertion(text="ok", passed=True)]
    if failed:
        assertions.append(Assertion(text=failed, passed=False))
    return GraderResult(
        score=score, verdict=verdict or ("pass" if score >= 0.8 else "fail"), status=status, assertions=assertions
    )


# -- negate -------------------------------------------------------------------------------------------


def test_negate_flips_score_verdict_and_assertions() -> None:
    original = GraderResult(
        score=0.25,
        verdict="fail",
        assertions=[Assertion(text="has x", passed=True, evidence="found x"), Assertion(text="has y", passed=False)],
    )
    negated = apply_negate(original)
    assert (negated.score, negated.verdict) == (0.75, "pass")
    assert [(a.text, a.passed, a.evidence) for a in negated.assertions] == [
        ("has x", False, "[Negated] found x"),
        ("has y", True, None),  # AgentV's negateScore: no evidence stays none
    ]
    assert original.score == 0.25, "the input is not mutated"


def test_negate_leaves_an_execution_error_alone() -> None:
    error = result(0.0, "skip", "execution_error", failed="Code grader failed")
    assert apply_negate(error) is error


# -- score_test ---------------------------------------------------------------------------------------


def test_weighted_mean_and_threshold() -> None:
    outcome = score_test([(spec("a", weight=3), result(1.0)), (spec("b", weight=1), result(0.2))], 0.8)
    assert outcome.score == pytest.approx(0.8)
    assert (outcome.passed, outcome.status, outcome.error) == (True, "ok", None)
    outcome = score_test([(spec("a"), result(1.0)), (spec("b"), result(0.2))], 0.8)
    assert outcome.score == pytest.approx(0.6)
    assert (outcome.passed, outcome.status) == (False, "quality_failure")


def test_a_graders_own_fail_does_not_change_the_test_score() -> None:
    outcome = score_test([(spec("rubric"), result(0.5, "fail")), (spec("code"), result(1.0))], 0.7)
    assert outcome.score == 0.75 and outcome.passed


def test_zero_total_weight_scores_zero() -> None:
    assert score_test([(spec(weight=0), result(1.0))], 0.8).score == 0.0


def test_no_graders_scores_zero() -> None:
    outcome = score_test([], 0.8)
    assert (outcome.score, outcome.passed, outcome.status) == (0.0, False, "quality_failure")


@pytest.mark.parametrize(
    ("fields", "score", "forced"),
    [
        ({"required": True}, 0.7, True),  # below the run threshold (0.8)
        ({"required": True}, 0.8, False),
        ({"required": True, "min_score": 0.5}, 0.6, False),  # min_score replaces the threshold
        ({"required": True, "min_score": 0.9}, 0.85, True),
        ({"required": 0.6}, 0.65, False),  # numeric required (v4) is the gate
        ({"required": 0.6}, 0.55, True),
        ({"required": 0.6, "min_score": 0.7}, 0.65, True),  # min_score wins over the number
        ({"required": False, "min_score": 0.9}, 0.1, False),  # min_score alone does nothing
    ],
)
def test_required_gate(fields: dict, score: float, forced: bool) -> None:
    outcome = score_test([(spec("gate", **fields), result(score)), (spec("other"), result(1.0))], 0.8)
    if forced:
        assert (outcome.score, outcome.passed, outcome.status) == (0.0, False, "quality_failure")
    else:
        assert outcome.score == pytest.approx((score + 1.0) / 2)


def test_required_gate_values() -> None:
    assert required_gate(False, 0.5, 0.8) is None
    assert required_gate(0, None, 0.8) is None
    assert required_gate(True, None, 0.8) == 0.8
    assert required_gate(0.4, None, 0.8) == 0.4


def test_execution_errors_drop_out_of_the_mean_and_the_test_cannot_pass() -> None:
    outcome = score_test(
        [
            (spec("fine"), result(1.0)),
            (spec("script"), result(0.0, "skip", "execution_error", failed="Code grader failed: exited with code 2")),
            (spec("later"), result(0.0, "skip", "execution_error", failed="other")),
        ],
        0.8,
    )
    # The rule: the mean runs over graders that did not error (here only "fine").
    assert (outcome.score, outcome.passed, outcome.status) == (1.0, False, "execution_error")
    assert outcome.error == "script: Code grader failed: exited with code 2"


def test_an_execution_error_is_left_out_and_a_skip_that_is_none_counts() -> None:
    """The status says it: a grader that failed to run (``skip``, ``execution_error``) is left out of the
    mean; a ``skip`` with status ``ok`` (a conversation's turn AgentV skipped after a failed one) is a 0."""
    errored = GraderResult(score=0.0, verdict="skip", status="execution_error")
    outcome = score_test([(spec("judge"), errored), (spec("exact"), GraderResult(score=1.0, verdict="pass"))], 0.8)
    assert (outcome.score, outcome.status, outcome.error) == (1.0, "execution_error", "judge: execution error")
    skipped = GraderResult(score=0.0, verdict="skip")
    outcome = score_test([(spec("turn-3"), skipped), (spec("exact"), GraderResult(score=1.0, verdict="pass"))], 0.8)
    assert (outcome.score, outcome.status) == (0.5, "quality_failure")


def test_the_labels_say_whether_agentv_would_call_the_test_an_execution_error_too() -> None:
    """A test whose errored graders are all ones AgentV scores 0 (a crashed code grader) is evalstore's execution
    error but AgentV's quality failure: labelled so, it stops no dependent and counts for no ``fail_on_error``.
    One grader AgentV skips (a judge that failed) makes it AgentV's execution error, whatever else failed."""
    crashed = code_grader_error("Code grader failed: exited with code 1")
    judge = GraderResult(score=0.0, verdict="skip", status="execution_error")
    fine = GraderResult(score=1.0, verdict="pass")

    outcome = score_test([(spec("crash"), crashed), (spec("exact"), fine)], 0.8)
    assert (outcome.score, outcome.passed, outcome.status) == (1.0, False, "execution_error")
    assert outcome.labels == failures.GRADER_SCORED
    assert not failures.agentv_execution_error(outcome.status, outcome.labels)

    outcome = score_test([(spec("crash"), crashed), (spec("judge"), judge), (spec("exact"), fine)], 0.8)
    assert (outcome.status, outcome.labels) == ("execution_error", failures.GRADER)
    assert failures.agentv_execution_error(outcome.status, outcome.labels)

    assert score_test([(spec("exact"), fine)], 0.8).labels == {}


def test_agentv_counts_every_execution_error_but_one_it_scores_as_a_quality_failure() -> None:
    counted = [failures.AGENT, failures.GRADER, failures.HOOK, failures.REPOS, failures.DEPENDENCY, failures.HALTED]
    assert all(failures.agentv_execution_error("execution_error", labels) for labels in [*counted, {}])
    assert not failures.agentv_execution_error("execution_error", failures.GRADER_SCORED)
    for status in ("ok", "quality_failure", "not_regradable"):
        assert not failures.agentv_execution_error(status, failures.AGENT)


# -- recomputing AgentV rows ---------------------------------------------------------------------------


def test_recomputed_scores_match_every_row_of_the_v4_baseline() -> None:
    rows = [json.loads(line) for line in BASELINE.read_text().splitlines() if line.strip()]
    assert len(rows) == 5
    checked = 0
    for row in rows:
        outcome = score_recorded(row.get("scores") or [], 0.8)
        if outcome is None:
            # A v4 row without scores[] (implicit grader): there is nothing to recompute from.
            assert "scores" not in row and row["test_id"] == "summary-task"
            continue
        assert outcome.score == pytest.approx(row["score"], abs=1e-12), row["test_id"]
        checked += 1
    assert checked == 4


def test_score_recorded_rules() -> None:
    scores = [
        {"name": "a", "type": "llm-grader", "score": 0.5, "weight": 2, "verdict": "fail"},
        {"name": "b", "type": "code-grader", "score": 1, "weight": 1, "verdict": "pass"},
    ]
    outcome = score_recorded(scores, 0.8)
    assert outcome is not None and outcome.score == pytest.approx(2 / 3) and outcome.status == "quality_failure"
    skipped = [
        *scores,
        {
            "name": "c",
            "type": "llm-grader",
            "score": 0,
            "verdict": "skip",
            "assertions": [{"text": "Grader parse failure after 3 attempts", "passed": False}],
        },
    ]
    outcome = score_recorded(skipped, 0.8)
    assert outcome is not None
    assert (outcome.score, outcome.status) == (pytest.approx(2 / 3), "execution_error")
    assert outcome.passed is False
    assert outcome.error == "c: Grader parse failure after 3 attempts"
    assert score_recorded([], 0.8) is None


# -- explain_score: why a test scored what it did (shown by run, replay and show) -------------------


def _verdict(grader: str, score: float, **kw):  # type: ignore[no-untyped-def]
    from evalstore.store.events import VerdictRecorded

    verdict = "pass" if score >= 0.8 else "fail"
    return VerdictRecorded(test_id="t", grader=grader, grader_type="code", score=score, verdict=verdict, **kw)


def test_the_required_grader_whose_gate_zeroed_the_score_is_named() -> None:
    from evalstore.replay.grading.scoring import explain_score

    verdicts = [_verdict("a", 1.0), _verdict("b", 1.0), _verdict("wb", 0.75, required=True)]
    assert explain_score(verdicts, 0.8) == "required grader wb failed (0.750, below the threshold 0.800): score 0"
    # Above its gate (its own min_score), or not required: the score is the mean, nothing to explain.
    assert explain_score([_verdict("wb", 0.75, required=True, min_score=0.7)], 0.8) == ""
    assert explain_score([_verdict("a", 1.0), _verdict("wb", 0.75)], 0.8) == ""
    # The deprecated numeric `required` is its gate when there is no min_score.
    assert explain_score([_verdict("a", 1.0), _verdict("wb", 0.4, required=0.5)], 0.8, 0.0) == (
        "required grader wb scored 0.400, below its required 0.500: score 0"
    )


def test_a_required_grader_that_passed_below_its_min_score_is_named() -> None:
    """AgentV 4.42.4 (formats §5.5): a required grader below its min_score zeroes the test, whatever its own
    verdict; 0.9 passes (0.8) yet falls below min_score 0.95. Every verdict is pass: the note says why."""
    from evalstore.replay.grading.scoring import explain_score

    verdicts = [_verdict("gated", 0.9, required=True, min_score=0.95), _verdict("other", 1.0)]
    assert {v.verdict for v in verdicts} == {"pass"}
    assert explain_score(verdicts, 0.8, 0.0) == "required grader gated scored 0.900, below its min_score 0.950: score 0"


class _Spec:
    def __init__(self, name: str, required: bool | float = False, min_score: float | None = None) -> None:
        self.name, self.weight, self.required, self.min_score = name, 1.0, required, min_score


def test_a_zero_no_recorded_gate_explains_names_only_the_evals_required_grader() -> None:
    """An import's verdicts do not say which grader is required (AgentV's results do not): a test AgentV
    scored 0 whose graders' mean is not 0 is a gate's doing. The test's graders as its eval has them (the
    run's eval snapshot) say which required grader it was, and why; a grader that is not required is never
    named, even one below the threshold. Not for a conversation, whose 0 may be its worst turn's."""
    from evalstore.replay.grading.scoring import explain_score

    verdicts = [_verdict("says-madrid", 0.0), _verdict("not-required-low", 0.2, weight=2.0)]
    specs = [_Spec("says-madrid", required=True), _Spec("not-required-low")]
    assert explain_score(verdicts, 0.8, 0.0, lambda: specs) == (
        "required grader says-madrid failed (0.000, below the threshold 0.800): score 0"
    )
    gated = [_verdict("gated", 0.9), _verdict("other", 1.0)]
    specs = [_Spec("gated", required=True, min_score=0.95), _Spec("other")]
    assert explain_score(gated, 0.8, 0.0, lambda: specs) == (
        "required grader gated scored 0.900, below its min_score 0.950: score 0"
    )
    # Without the eval, no grader is named: any of them may be the required one.
    for unknown in (None, lambda: None):
        assert explain_score(verdicts, 0.8, 0.0, unknown) == (
            "score 0 where its graders' mean is 0.133: set by a required grader's gate "
            "(the results do not say which grader is required)"
        )
    asked: list[int] = []
    assert explain_score(verdicts, 0.8, 0.4, lambda: asked.append(1)) == ""  # the score is the mean
    assert explain_score([_verdict("a", 0.0)], 0.8, 0.0, lambda: asked.append(1)) == ""  # the mean is 0 too
    assert not asked  # the eval is read only for a 0 its verdicts cannot explain
    turns = [_verdict("turn-1", 1.0), _verdict("turn-2", 0.0), _verdict("conversation", 1.0)]
    assert explain_score(turns, 0.8, 0.0) == ""  # aggregation: min


def test_a_grader_that_failed_to_run_is_named_as_left_out_of_the_score() -> None:
    from evalstore.replay.grading.scoring import explain_score

    verdicts = [_verdict("a", 1.0), _verdict("broken", 0.0, status="execution_error")]
    assert explain_score(verdicts, 0.8) == "broken failed to run (execution error): left out of the score"


def test_a_tests_own_threshold_wins_over_the_runs_and_the_suites():
    """AgentV 4.42.4: ``effectiveThreshold = evalCase.threshold ?? caseThreshold`` (a test's own
    ``execution.threshold``, even over ``--threshold``); 0 is a threshold, not a missing one."""
    assert effective_threshold(0.5, 0.9, 0.7) == 0.5
    assert effective_threshold(0.0, 0.9, 0.7) == 0.0
    assert effective_threshold(None, 0.9, 0.7) == 0.9
    assert effective_threshold(None, None, 0.7) == 0.7
    # The required gate of a grader with no min_score is the test's threshold, so it moves with it.
    spec = AssertionSpec(type="contains", name="c", value="x", required=True)
    result = GraderResult(score=0.6, verdict="fail", assertions=[])
    assert score_test([(spec, result)], effective_threshold(0.5, None, 0.8)).score == 0.6
    assert score_test([(spec, result)], effective_threshold(None, None, 0.8)).score == 0.0
