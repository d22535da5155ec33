"""Comparing two runs: pairing, per-test and per-grader rows, assertion diffs, regression gates."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from scipy import stats as sps

from evalstore.replay.analysis import compare as compare_module
from evalstore.replay.analysis.compare import Comparison, Key, RunResults, compare, regression
from evalstore.replay.analysis.per_test import key_label
from evalstore.replay.analysis.stats import bootstrap_mean_ci
from evalstore.replay.errors import CompareError, ReplayError
from evalstore.store import events
from evalstore.store.events import Assertion, VerdictRecorded

Verdict = Literal["pass", "fail", "skip"]
Result = compare_module.TestResult  # not named Test* here, so pytest does not try to collect it


def verdict(
    key: Key, grader: str, score: float, v: Verdict | None = None, asserts: list[tuple[str, bool]] | None = None
) -> VerdictRecorded:
    test_id, target, attempt = key
    return VerdictRecorded(
        test_id=test_id,
        target=target,
        attempt=attempt,
        grader=grader,
        grader_type="code-grader",
        score=score,
        verdict=v or ("pass" if score >= 0.8 else "fail"),
        assertions=[Assertion(text=t, passed=p, evidence=f"why {t}") for t, p in (asserts or [])],
    )


def result(key: Key, score: float, *verdicts: VerdictRecorded, passed: bool | None = None) -> Result:
    test_id, target, attempt = key
    ok = score >= 0.8 if passed is None else passed
    scored = events.TestScored(
        test_id=test_id,
        target=target,
        attempt=attempt,
        score=score,
        passed=ok,
        status="ok" if ok else "quality_failure",
        threshold=0.8,
    )
    return Result(scored, {v.grader: v for v in verdicts})


def simple(key: Key, score: float, **grader_scores: float) -> Result:
    return result(key, score, *(verdict(key, g, s) for g, s in grader_scores.items()))


def run(run_id: str, *results: Result) -> RunResults:
    return RunResults(run_id, {(r.scored.test_id, r.scored.target, r.scored.attempt): r for r in results})


K1: Key = ("t1", "default", 1)
K2: Key = ("t2", "default", 1)
K3: Key = ("t3", "default", 1)


def test_pairs_by_test_target_and_attempt() -> None:
    a = run("A", simple(("t", "x", 1), 1.0), simple(("t", "x", 2), 0.0), simple(("t", None, 1), 0.5))
    b = run("B", simple(("t", "x", 1), 0.5), simple(("t", "x", 2), 1.0), simple(("t", "y", 1), 1.0))
    c = compare(a, b)
    assert [(r.key, r.score_a, r.score_b) for r in c.tests] == [
        (("t", "x", 1), 1.0, 0.5),
        (("t", "x", 2), 0.0, 1.0),
    ]
    assert c.only_in_a == [("t", None, 1)]
    assert c.only_in_b == [("t", "y", 1)]


def test_per_test_rows_give_scores_delta_and_flips() -> None:
    a = run("A", simple(K1, 1.0), simple(K2, 0.2), simple(K3, 0.9))
    b = run("B", simple(K1, 0.4), simple(K2, 0.9), simple(K3, 0.95))
    c = compare(a, b)
    rows = {r.key[0]: r for r in c.tests}
    assert rows["t1"].delta == pytest.approx(-0.6) and rows["t1"].flip == "pass->fail"
    assert rows["t2"].delta == pytest.approx(0.7) and rows["t2"].flip == "fail->pass"
    assert rows["t3"].delta == pytest.approx(0.05) and rows["t3"].flip is None
    assert [r.key[0] for r in c.regressions] == ["t1"]
    assert [r.key[0] for r in c.improvements] == ["t2"]
    assert c.overall.counts.a_only_pass == 1 and c.overall.counts.b_only_pass == 1
    assert c.overall.counts.both_pass == 1 and c.overall.counts.n == 3


def test_per_grader_rows_pair_verdicts_by_grader_name() -> None:
    a = run(
        "A",
        simple(K1, 1.0, exact=1.0, judge=0.9, old=1.0),
        simple(K2, 0.0, exact=0.0, judge=0.9),
        simple(K3, 0.5, exact=1.0, judge=0.5),
    )
    b = run(
        "B",
        simple(K1, 1.0, exact=1.0, judge=0.5, new=1.0),
        simple(K2, 0.0, exact=1.0, judge=0.8),
        simple(K3, 0.5, exact=1.0, judge=0.6),
    )
    c = compare(a, b)
    graders = {g.grader: g for g in c.graders}
    assert list(graders) == ["exact", "judge", "new", "old"]
    exact, judge = graders["exact"], graders["judge"]
    assert exact.stats.score.n == 3
    assert exact.stats.score.mean_a == pytest.approx(2 / 3)
    assert exact.stats.score.mean_b == pytest.approx(1.0)
    assert (exact.regressions, exact.improvements) == (0, 1)
    assert judge.stats.score.mean_diff == pytest.approx((-0.4 - 0.1 + 0.1) / 3)
    assert (judge.regressions, judge.improvements) == (1, 0)
    assert (graders["old"].only_in_a, graders["old"].only_in_b, graders["old"].stats.score.n) == (1, 0, 0)
    assert (graders["new"].only_in_a, graders["new"].only_in_b) == (0, 1)
    assert graders["new"].stats.score.note == "no pairs"


def test_skipped_verdicts_are_left_out_of_grader_stats_and_counted() -> None:
    a = run("A", result(K1, 1.0, verdict(K1, "judge", 1.0)), result(K2, 0.0, verdict(K2, "judge", 0.0, "skip")))
    b = run("B", result(K1, 0.0, verdict(K1, "judge", 0.0)), result(K2, 1.0, verdict(K2, "judge", 1.0)))
    judge = compare(a, b).graders[0]
    assert judge.skipped == 1
    assert judge.stats.counts.n == 1 and judge.stats.score.n == 1
    assert judge.regressions == 1


def test_flipped_lists_test_and_grader_flips_with_both_verdicts() -> None:
    a = run("A", simple(K1, 1.0, g=1.0), simple(K2, 0.9, g=1.0, h=0.0), simple(K3, 0.9, g=1.0))
    b = run("B", simple(K1, 0.0, g=0.0), simple(K2, 0.9, g=1.0, h=1.0), simple(K3, 0.9, g=1.0))
    c = compare(a, b)
    flipped = {f.row.key[0]: f for f in c.flipped}
    assert set(flipped) == {"t1", "t2"}  # t2: only grader h flipped; t3: nothing changed
    assert flipped["t1"].row.flip == "pass->fail"
    assert flipped["t2"].row.flip is None
    pair = {g.grader: g for g in flipped["t2"].graders}
    assert pair["h"].flip == "fail->pass" and pair["g"].flip is None
    assert pair["h"].a is not None and pair["h"].a.score == 0.0
    assert pair["h"].b is not None and pair["h"].b.score == 1.0


def test_assertion_diffs_for_a_chosen_test() -> None:
    k_other: Key = ("t1", "default", 2)
    a = run(
        "A",
        result(
            K1,
            0.5,
            verdict(K1, "rubric", 0.5, asserts=[("has title", True), ("cites", True), ("dup", True), ("dup", False)]),
            verdict(K1, "gone", 1.0, asserts=[("old check", True)]),
        ),
        result(k_other, 1.0, verdict(k_other, "rubric", 1.0, asserts=[("has title", True)])),
        simple(K2, 1.0),
    )
    b = run(
        "B",
        result(
            K1,
            0.5,
            verdict(K1, "rubric", 0.5, asserts=[("has title", False), ("new item", True), ("dup", True)]),
        ),
        simple(K2, 1.0),
    )
    c = compare(a, b, test_id="t1")
    assert c.test_id == "t1"
    assert [d.key for d in c.assertion_diffs] == [K1, k_other]
    first, second = c.assertion_diffs
    graders = {g.grader: g for g in first.graders}
    rubric = graders["rubric"]
    assert [x.text for x in rubric.only_in_a] == ["cites", "dup"]
    assert [x.passed for x in rubric.only_in_a] == [True, False]  # the second "dup" had no partner
    assert [x.text for x in rubric.only_in_b] == ["new item"]
    assert [(ch.text, ch.passed_a, ch.passed_b) for ch in rubric.changed] == [("has title", True, False)]
    assert rubric.changed[0].evidence_a == "why has title"
    assert rubric.unchanged == 1  # the first "dup"
    gone = graders["gone"]
    assert (gone.in_a, gone.in_b) == (True, False)
    assert [x.text for x in gone.only_in_a] == ["old check"]
    assert (second.in_a, second.in_b) == (True, False)
    assert [x.text for x in second.graders[0].only_in_a] == ["has title"]


def test_unknown_test_id_is_a_domain_error() -> None:
    a = run("A", simple(K1, 1.0))
    with pytest.raises(CompareError, match="'nope' is in neither run A nor run B") as info:
        compare(a, run("B", simple(K1, 1.0)), test_id="nope")
    assert isinstance(info.value, ReplayError)
    assert "\n" not in str(info.value)


def test_bad_resamples_is_a_domain_error() -> None:
    a = run("A", simple(K1, 1.0))
    with pytest.raises(CompareError, match="resamples"):
        compare(a, a, resamples=0)


def test_no_pairs() -> None:
    c = compare(run("A", simple(K1, 1.0)), run("B", simple(K2, 1.0)))
    assert c.tests == [] and c.flipped == []
    assert c.only_in_a == [K1] and c.only_in_b == [K2]
    assert c.overall.score.note == c.overall.mcnemar.note == c.overall.kappa.note == "no pairs"
    # Both runs hold results and none pairs: the gate has nothing to judge, and does not pass.
    assert regression(c, "any") == (
        True,
        "no result of the two runs pairs with the other's: the gate has nothing to judge",
    )
    only_a = compare(run("A", simple(K1, 1.0)), run("B"))  # B holds nothing (a shard given no test)
    assert regression(only_a, "any") == (False, "no confidence interval (no pairs); no test flipped pass->fail")


def test_empty_runs() -> None:
    c = compare(run("A"), run("B"))
    assert c.tests == [] and c.graders == [] and c.only_in_a == [] and c.only_in_b == []
    json.dumps(c.to_dict())


def test_one_pair() -> None:
    c = compare(run("A", simple(K1, 1.0, g=1.0)), run("B", simple(K1, 0.0, g=0.0)))
    score = c.overall.score
    assert score.n == 1 and score.mean_diff == -1.0
    assert score.ci_low is None and score.note is not None and "not enough pairs" in score.note
    assert c.overall.mcnemar.p_value == 1.0  # one discordant pair can never be significant
    assert c.overall.kappa.kappa == 0.0


def test_identical_runs() -> None:
    results = [simple((f"t{i}", None, 1), 1.0, g=1.0) for i in range(12)]
    c = compare(run("A", *results), run("B", *results))
    score = c.overall.score
    assert (score.mean_diff, score.ci_low, score.ci_high) == (0.0, 0.0, 0.0)
    assert c.overall.mcnemar.p_value == 1.0 and c.overall.mcnemar.note is not None
    assert c.overall.kappa.kappa is None and c.overall.kappa.note == "undefined (all one class)"
    assert c.flipped == []
    assert regression(c, "any")[0] is False


def test_statistics_over_many_pairs_match_scipy() -> None:
    a_results, b_results = [], []
    # 30 regressions, 12 improvements, 50 both pass, 20 both fail
    plan = [(1.0, 0.0)] * 30 + [(0.0, 1.0)] * 12 + [(1.0, 1.0)] * 50 + [(0.0, 0.0)] * 20
    for i, (sa, sb) in enumerate(plan):
        key: Key = (f"t{i:03d}", None, 1)
        a_results.append(simple(key, sa, g=sa))
        b_results.append(simple(key, sb, g=sb))
    c = compare(run("A", *a_results), run("B", *b_results), seed=11)
    for stats in (c.overall, c.graders[0].stats):
        assert stats.mcnemar.p_value == pytest.approx(sps.binomtest(12, 42).pvalue, rel=1e-9)
        assert stats.score.mean_diff == pytest.approx(-18 / 112)
        assert stats.score.ci_low is not None and stats.score.ci_high is not None
        assert stats.score.ci_low < -18 / 112 < stats.score.ci_high < 0
    ok, reason = regression(c, "ci")
    assert ok and "entirely below 0" in reason


def test_same_seed_same_comparison() -> None:
    results_a = [simple((f"t{i}", None, 1), (i % 3) / 2) for i in range(30)]
    results_b = [simple((f"t{i}", None, 1), (i % 4) / 3) for i in range(30)]
    first = compare(run("A", *results_a), run("B", *results_b), seed=5).to_dict()
    again = compare(run("A", *results_a), run("B", *results_b), seed=5).to_dict()
    other = compare(run("A", *results_a), run("B", *results_b), seed=6).to_dict()
    assert first == again
    assert first["overall"] != other["overall"]


def test_to_dict_is_json_and_carries_the_tables() -> None:
    a = run("A", simple(K1, 1.0, g=1.0), simple(K2, 0.0, g=0.0), simple(K3, 0.5))
    b = run("B", simple(K1, 0.0, g=0.0), simple(K2, 0.0, g=0.0))
    data = json.loads(json.dumps(compare(a, b, test_id="t1").to_dict()))
    assert data["run_a"] == "A" and data["run_b"] == "B"
    assert data["tests"][0] == {
        "test_id": "t1",
        "target": "default",
        "attempt": 1,
        "score_a": 1.0,
        "score_b": 0.0,
        "delta": -1.0,
        "passed_a": True,
        "passed_b": False,
        "flip": "pass->fail",
        "status_a": "ok",
        "status_b": "quality_failure",
        "outcome": "loss",
        "normalized_gain": None,
    }
    assert data["graders"][0]["grader"] == "g" and data["graders"][0]["regressions"] == 1
    assert data["overall"]["counts"]["a_only_pass"] == 1
    assert data["only_in_a"] == [{"test_id": "t3", "target": "default", "attempt": 1}]
    assert data["flipped"][0]["graders"][0]["a"]["verdict"] == "pass"
    assert data["assertion_diffs"][0]["test_id"] == "t1"


def _comparison(pairs: list[tuple[float, float]]) -> Comparison:
    a = [simple((f"t{i:02d}", None, 1), sa) for i, (sa, _) in enumerate(pairs)]
    b = [simple((f"t{i:02d}", None, 1), sb) for i, (_, sb) in enumerate(pairs)]
    return compare(run("A", *a), run("B", *b))


def test_regression_ci_mode() -> None:
    worse = _comparison([(0.9, 0.4)] * 10)
    ok, reason = regression(worse, "ci")
    assert ok and reason == "mean score difference -0.5000, 95% CI [-0.5000, -0.5000] is entirely below 0"
    better = _comparison([(0.4, 0.9)] * 10)
    assert regression(better, "ci")[0] is False
    few = _comparison([(0.9, 0.4)] * 3)
    ok, reason = regression(few, "ci")
    assert not ok and "not enough pairs" in reason


def test_regression_flip_mode() -> None:
    # Scores rise on average but one test flips pass -> fail: "flip" catches it, "ci" does not.
    c = _comparison([(0.85, 0.75)] + [(0.1, 0.5)] * 9)
    ok, reason = regression(c, "flip")
    assert ok and reason == "1 test(s) flipped pass->fail: t00"
    assert regression(c, "ci")[0] is False
    ok, reason = regression(c, "any")
    assert ok and reason == "1 test(s) flipped pass->fail: t00"
    assert regression(_comparison([(0.1, 0.5)] * 9), "flip") == (False, "no test flipped pass->fail")


def test_regression_names_at_most_five_flips() -> None:
    c = _comparison([(1.0, 0.0)] * 7)
    ok, reason = regression(c, "flip")
    assert ok and reason == "7 test(s) flipped pass->fail: t00, t01, t02, t03, t04 and 2 more"


def test_regression_any_mode_reports_both() -> None:
    ok, reason = regression(_comparison([(1.0, 0.0)] * 6), "any")
    assert ok
    assert reason.startswith("mean score difference -1.0000") and "6 test(s) flipped pass->fail" in reason


def test_regression_unknown_mode() -> None:
    with pytest.raises(CompareError, match="expected one of ci, flip, any, got 'worse'"):
        regression(_comparison([(1.0, 1.0)]), "worse")


def test_key_label() -> None:
    assert key_label(("t", None, 1)) == "t"
    assert key_label(("t", "gpt", 1)) == "t@gpt"
    assert key_label(("t", "gpt", 3)) == "t@gpt#3"


def test_wins_losses_and_ties_are_counted_as_agentv_compare_counts_them() -> None:
    """AgentV's `classifyOutcome` on the float difference (0.6 against 0.5 falls short of 0.1: a tie), both
    bounds inclusive, the means rounded half up as `Math.round` rounds (Python's round() gives 0.062 for
    0.0625), and Hake's gain only where A left room (A=1 has none)."""
    keys = [("t1", None, 1), ("t2", None, 1), ("t3", None, 1), ("t4", None, 1)]
    a = run("A", *(simple(k, s) for k, s in zip(keys, [0.5, 0.25, 1.0, 0.0])))
    b = run("B", *(simple(k, s) for k, s in zip(keys, [0.6, 0.0, 1.0, 0.0])))
    c = compare(a, b, resamples=10)
    assert [c.outcome(t) for t in c.tests] == ["tie", "loss", "tie", "tie"]
    assert c.outcomes.to_dict() == {
        "threshold": 0.1,
        "wins": 0,
        "losses": 1,
        "ties": 3,
        "mean_delta": -0.038,  # (0.09999999999999998 - 0.25) / 4, a little below -0.0375
        "mean_normalized_gain": -0.044,  # (0.2 - 1/3 + 0) / 3
        "status": "regressed",
    }
    half = run("B", *(simple(k, s) for k, s in zip(keys, [0.5, 0.5, 1.0, 0.0])))
    assert compare(a, half, resamples=10).outcomes.mean_delta == 0.063  # 0.0625 up, as Math.round goes
    assert compare(a, b, resamples=10, threshold=0.25).outcomes.losses == 1  # -0.25 <= -0.25: a loss
    assert compare(a, a, resamples=10).outcomes.status == "neutral"
    with pytest.raises(CompareError, match="threshold"):
        compare(a, b, threshold=float("nan"))


def _trials(run_id: str, scores: dict[str, list[float]], positions: dict[str, int] | None = None) -> RunResults:
    """A run whose test ``t`` has one attempt a score in ``scores[t]``, each graded by grader ``g`` alike."""
    results = [simple((t, "x", n), s, g=s) for t, ss in scores.items() for n, s in enumerate(ss, 1)]
    out = run(run_id, *results)
    if positions is not None:
        out.positions = {k: positions[k[0]] * 10 + k[2] for k in out.results}
    return out


def test_a_tests_attempts_are_one_pair_averaged_and_pass_when_any_passed() -> None:
    a = _trials("A", {f"t{i}": [1.0, 1.0, 1.0] for i in range(6)})
    b = _trials("B", {"t0": [0.0, 0.0, 0.0], "t1": [0.0, 1.0, 0.5], **{f"t{i}": [1.0, 1.0, 1.0] for i in range(2, 6)}})
    c = compare(a, b)
    assert len(c.tests) == 18 and c.averaged
    units = {u.test[0]: u for u in c.units}
    assert units["t1"].score_b == pytest.approx(0.5) and units["t1"].passed_b  # one trial passed: AgentV's hasOk
    assert units["t1"].status_b == "mixed" and units["t1"].attempts == 3
    assert c.overall.score.n == c.overall.counts.n == 6
    assert c.overall.score.mean_diff == pytest.approx(-1.5 / 6)
    low, high, _ = bootstrap_mean_ci([-1.0, -0.5, 0.0, 0.0, 0.0, 0.0], seed=0)
    assert (c.overall.score.ci_low, c.overall.score.ci_high) == (low, high)
    assert (c.overall.counts.a_only_pass, c.overall.mcnemar.p_value) == (1, 1.0)
    assert (c.outcomes.losses, c.outcomes.ties, c.outcomes.mean_delta) == (2, 4, -0.25)
    grader = c.graders[0]
    assert grader.stats.score.n == 6 and grader.regressions == 1  # the grader's verdicts count tests too
    assert [u.label for u in c.regressions] == ["t0@x (3 attempts)"]
    assert regression(c, "flip") == (True, "1 test(s) flipped pass->fail: t0@x (3 attempts)")
    data = json.loads(json.dumps(c.to_dict()))
    assert [t["test_id"] for t in data["tests"]] == [f"t{i}" for i in range(6)]
    assert data["tests"][1]["attempts"] == [1, 2, 3] and data["tests"][1]["outcome"] == "loss"
    assert len(data["results"]) == 18


def test_only_the_attempts_both_runs_hold_are_averaged() -> None:
    """pass@k stops a test's trials at its first pass, so the runs may hold different attempts of a test: the
    extra ones are only in one run, as before, and not in the test's mean."""
    a = _trials("A", {"t": [0.0, 0.0, 1.0], "u": [1.0]})
    b = _trials("B", {"t": [1.0], "u": [1.0]})
    c = compare(a, b)
    assert [(u.test[0], u.score_a, u.score_b) for u in c.units] == [("t", 0.0, 1.0), ("u", 1.0, 1.0)]
    assert c.only_in_a == [("t", "x", 2), ("t", "x", 3)]
    assert not c.averaged


def test_with_one_attempt_per_test_the_tests_are_the_results() -> None:
    a = _trials("A", {"t1": [1.0], "t2": [0.4], "t3": [0.9]})
    b = _trials("B", {"t1": [0.0], "t2": [0.9], "t3": [0.9]})
    c = compare(a, b)
    assert [u.key for u in c.units] == [r.key for r in c.tests]
    data = c.to_dict()
    assert "results" not in data
    assert data["tests"] == [{**r.to_dict(), "outcome": c.outcome(r), "normalized_gain": None} for r in c.tests[:1]] + [
        {
            **r.to_dict(),
            "outcome": c.outcome(r),
            "normalized_gain": compare_module.normalized_gain(r.score_a, r.score_b),
        }
        for r in c.tests[1:]
    ]


def test_the_mean_delta_adds_tests_where_their_first_attempt_stands_in_run_a(monkeypatch: pytest.MonkeyPatch) -> None:
    scores = {"t1": [0.1, 0.1], "t2": [0.2, 0.2], "t3": [0.3, 0.3]}
    a = _trials("A", scores, positions={"t1": 3, "t2": 1, "t3": 2})
    b = _trials("B", {t: [s + 0.05 for s in ss] for t, ss in scores.items()})
    order: list[float] = []
    original = compare_module.outcomes

    def spy(pairs, threshold):  # type: ignore[no-untyped-def]
        pairs = list(pairs)
        order.extend(a for a, _ in pairs)
        return original(pairs, threshold)

    monkeypatch.setattr(compare_module, "outcomes", spy)
    compare(a, b)
    assert order == pytest.approx([0.2, 0.3, 0.1])


def test_regression_ci_mode_reads_the_clustered_interval_when_given() -> None:
    from evalstore.replay.analysis.calibration import clustered_mean_difference

    worse = _comparison([(0.9, 0.4)] * 8 + [(0.9, 0.9)] * 2)
    assert regression(worse, "ci")[0] is True
    one = clustered_mean_difference([u.delta for u in worse.units], ["same"] * 10)
    assert regression(worse, "ci", ("category", one)) == (
        False,
        "no confidence interval (1 cluster of category; need at least 5)",
    )
    apart = clustered_mean_difference([u.delta for u in worse.units], list(range(10)))
    ok, reason = regression(worse, "ci", ("category", apart))
    assert ok and reason.startswith("mean score difference -0.4000, 95% CI clustered by category [")


def test_a_graders_skipped_and_one_sided_counts_are_tests_like_its_n() -> None:
    """A grader's ``skipped``, ``only_in_a`` and ``only_in_b`` count tests, as its ``n`` does: a test whose
    three attempts the grader skipped (or graded in one run only) is one test, not three."""
    keys = {t: [(t, "x", n) for n in (1, 2, 3)] for t in ("paired", "skipped", "only-a", "only-b")}

    def side(run_id: str, skip: bool, graders_a: bool) -> RunResults:
        results = [simple(k, 1.0, g=1.0) for k in keys["paired"]]
        results += [result(k, 1.0, verdict(k, "g", 0.0, "skip" if skip else None)) for k in keys["skipped"]]
        results += [result(k, 1.0, *([verdict(k, "g", 1.0)] if graders_a else [])) for k in keys["only-a"]]
        results += [result(k, 1.0, *([] if graders_a else [verdict(k, "g", 1.0)])) for k in keys["only-b"]]
        return run(run_id, *results)

    c = compare(side("A", True, True), side("B", False, False))
    (g,) = c.graders
    assert (g.stats.score.n, g.skipped, g.only_in_a, g.only_in_b) == (1, 1, 1, 1)
    one = compare(  # one attempt a test: the tests are the results, counted as they always were
        run("A", simple(K1, 1.0, g=1.0), result(K2, 1.0, verdict(K2, "g", 0.0, "skip")), simple(K3, 1.0, g=1.0)),
        run("B", simple(K1, 1.0, g=1.0), simple(K2, 1.0, g=1.0), result(K3, 1.0)),
    )
    assert (one.graders[0].skipped, one.graders[0].only_in_a, one.graders[0].only_in_b) == (1, 1, 0)


@pytest.mark.parametrize("mode", ["ci", "flip", "any"])
def test_runs_that_pair_nothing_fail_every_gate(mode: str) -> None:
    """Two runs of other suites pair no result: every gate passed them ("0 paired results", exit 0)."""
    apart = compare(run("A", simple(("t1", None, 1), 1.0)), run("B", simple(("u1", None, 1), 1.0)))
    assert regression(apart, mode) == (
        True,
        "no result of the two runs pairs with the other's: the gate has nothing to judge",
    )
