"""``evalstore compare``: the JSON shape, assertion diffs, the regression gates and the HTML report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from e2e_helpers import BASELINE, LENIENT, Q3_SCORE, STRICT_SCORE, TESTS, Recorded, cli, ok_json
from judge_server import JudgeServer
from scipy.stats import binomtest


def _strict_replay(db: str, run_id: str, root: Path) -> str:
    prompt = root / "prompts" / "quality.v2.md"
    return ok_json(cli(db, "replay", run_id, "--prompt", f"quality=file://{prompt}", "--json"), 0, 1)["run_id"]


def test_compare_json_flips_stats_and_assertion_diffs(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict
) -> None:
    a = recorded.run_id
    b = _strict_replay(recorded_db, a, recorded.suite.root)
    out = ok_json(cli(recorded_db, "compare", a, b, "--json", "--test", "q1-report"))
    assert {
        "run_a",
        "run_b",
        "overall",
        "graders",
        "tests",
        "flipped",
        "only_in_a",
        "only_in_b",
        "assertion_diffs",
    } <= set(out)
    assert (out["run_a"], out["run_b"]) == (a, b) and out["only_in_a"] == out["only_in_b"] == []

    tests = {t["test_id"]: t for t in out["tests"]}
    assert set(tests) == set(TESTS)
    # The strict prompt drops the judge to 0.1: q1 and q2 fall from (3 + 0.9) / 4 to (3 + 0.1) / 4.
    for test_id in ("q1-report", "q2-report"):
        assert tests[test_id]["flip"] == "pass->fail"
        assert tests[test_id]["delta"] == pytest.approx((STRICT_SCORE - LENIENT) / 4)
    assert tests["q3-report"]["flip"] is None
    assert {f["test_id"] for f in out["flipped"]} == {"q1-report", "q2-report"}

    quality = next(g for g in out["graders"] if g["grader"] == "quality")
    assert quality["n"] == 3
    assert quality["mean_a"] == pytest.approx((2 * LENIENT + Q3_SCORE) / 3)
    assert quality["mean_b"] == pytest.approx(STRICT_SCORE)
    workbook = next(g for g in out["graders"] if g["grader"] == "workbook")
    assert workbook["mean_diff"] == 0.0 and workbook["regressions"] == workbook["improvements"] == 0

    overall = out["overall"]
    assert overall["counts"] == {"n": 3, "both_pass": 0, "both_fail": 1, "a_only_pass": 2, "b_only_pass": 0}
    assert overall["mcnemar"]["p_value"] == pytest.approx(binomtest(0, 2, 0.5).pvalue)
    # Cohen's kappa by hand: A passes 2 of 3, B passes none; observed agreement 1/3, expected 1/3.
    assert overall["kappa"]["kappa"] == pytest.approx(0.0, abs=1e-12)
    assert overall["score"]["ci_low"] is None and "not enough pairs" in overall["score"]["note"]

    (diff,) = out["assertion_diffs"]
    assert diff["test_id"] == "q1-report"
    q = next(g for g in diff["graders"] if g["grader"] == "quality")
    assert [x["text"] for x in q["only_in_a"]] == ["workbook and summary agree"]
    assert [x["text"] for x in q["only_in_b"]] == ["strict: every figure checked"]
    assert next(g for g in diff["graders"] if g["grader"] == "workbook")["unchanged"] == 3


def test_fail_on_regression_flip(recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict) -> None:
    a = recorded.run_id
    b = _strict_replay(recorded_db, a, recorded.suite.root)
    assert cli(recorded_db, "compare", a, b, "--fail-on-regression", "flip").exit_code == 1
    assert cli(recorded_db, "compare", b, a, "--fail-on-regression", "flip").exit_code == 0  # fail->pass only
    # Three pairs are too few for a CI: the ci gate cannot call it significant.
    assert cli(recorded_db, "compare", a, b, "--fail-on-regression", "ci").exit_code == 0
    assert cli(recorded_db, "compare", a, b, "--fail-on-regression", "any").exit_code == 1


@pytest.mark.skipif(not BASELINE.exists(), reason="AgentV fixtures not found")
def test_fail_on_regression_ci_on_imported_runs(sqlite_url: str, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines()]
    worse = []
    for i, row in enumerate(rows):
        drop = 0.3 + 0.05 * i
        row = {**row, "score": max(0.0, row["score"] - drop)}
        if "scores" in row:
            row["scores"] = [{**g, "score": max(0.0, g["score"] - drop), "verdict": "fail"} for g in row["scores"]]
        worse.append(row)
    path = tmp_path / "worse.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in worse), encoding="utf-8")
    a = ok_json(cli(sqlite_url, "import", str(BASELINE), "--json"))["run_id"]
    b = ok_json(cli(sqlite_url, "import", str(path), "--json"))["run_id"]

    out = ok_json(cli(sqlite_url, "compare", a, b, "--json"))
    score = out["overall"]["score"]
    assert score["n"] == 5 and score["ci_high"] < 0
    assert score["mean_diff"] == pytest.approx(-sum(r["score"] - w["score"] for r, w in zip(rows, worse)) / 5)
    # Four tests passed before and none after: exact McNemar on 4 discordant pairs, all one way.
    assert out["overall"]["counts"]["a_only_pass"] == 4
    assert out["overall"]["mcnemar"]["p_value"] == pytest.approx(binomtest(0, 4, 0.5).pvalue)

    assert cli(sqlite_url, "compare", a, b, "--fail-on-regression", "ci").exit_code == 1
    assert cli(sqlite_url, "compare", b, a, "--fail-on-regression", "ci").exit_code == 0
    # Seeded: the same command gives the same interval.
    again = ok_json(cli(sqlite_url, "compare", a, b, "--json"))["overall"]["score"]
    assert (again["ci_low"], again["ci_high"]) == (score["ci_low"], score["ci_high"])


def test_html_report_is_self_contained(
    recorded: Recorded, recorded_db: str, judge: JudgeServer, key_env: dict, tmp_path: Path
) -> None:
    a = recorded.run_id
    b = _strict_replay(recorded_db, a, recorded.suite.root)
    report = tmp_path / "report.html"
    result = cli(recorded_db, "compare", a, b, "--html", str(report))
    assert result.exit_code == 0, result.stderr
    html = report.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith(("<!doctype html", "<html"))
    assert a in html and b in html and "q1-report" in html and "<svg" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I), "no network assets"
    assert "@import" not in html and "<link" not in html.lower()
    # The flipped test shows both verdicts side by side.
    assert "strict: every figure checked" in html and "workbook and summary agree" in html


@pytest.mark.skipif(not BASELINE.exists(), reason="AgentV fixtures not found")
def test_runs_of_two_targets_that_pair_nothing_say_how_to_pair_them(sqlite_url: str, tmp_path: Path) -> None:
    """Two agents' runs of one suite (or two models' logs of one Inspect task) hold the same tests under
    different targets: nothing pairs by (test, target, attempt), and compare says which `A@T B@T` pairs them."""
    rows = [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines()]
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({**r, "target": "other-agent"}) + "\n" for r in rows), encoding="utf-8")
    a = ok_json(cli(sqlite_url, "import", str(BASELINE), "--json"))["run_id"]
    b = ok_json(cli(sqlite_url, "import", str(other), "--json"))["run_id"]

    apart = cli(sqlite_url, "compare", a, b)
    assert apart.exit_code == 0, apart.output
    hint = f"evalstore compare {a}@default {b}@other-agent"
    assert hint in apart.stderr.replace("\n", " ")
    paired = ok_json(cli(sqlite_url, "compare", f"{a}@default", f"{b}@other-agent", "--json"))
    assert len(paired["tests"]) == len(rows)
    assert hint not in cli(sqlite_url, "compare", a, a).stderr  # same target: nothing to say


@pytest.mark.parametrize("case", ["order_status", "order_status_sorted", "order"])
def test_the_mean_delta_is_added_in_the_baseline_runs_order_as_agentv_adds_it(sqlite_url: str, case: str) -> None:
    """At a rounding boundary the mean of the differences depends on the order they are added in (a float
    sum is not associative): AgentV adds them in its baseline file's order, and its rounded mean and status
    are what ``compare`` gives, however the file's tests are ordered (tests/fixtures/agentv-compare-order)."""
    from fixture_paths import FIXTURES_DIR

    folder = FIXTURES_DIR / "agentv-compare-order" / case
    agentv = json.loads((folder / "compare.json").read_text("utf-8"))["summary"]
    a, b = (
        ok_json(cli(sqlite_url, "import", str(folder / side / "index.jsonl"), "--json"))["run_id"]
        for side in ("base", "cand")
    )
    outcomes = ok_json(cli(sqlite_url, "compare", a, b, "--json"))["outcomes"]
    assert {k: outcomes[k] for k in ("wins", "losses", "ties", "mean_delta")} == {
        k: agentv[k] for k in ("wins", "losses", "ties", "mean_delta")
    }
    regressed = (folder / "compare.exit").read_text().strip() == "exit 1"  # AgentV exits 1 on a regression
    assert (outcomes["status"] == "regressed") == regressed


def test_results_without_a_target_pair_with_a_targets_as_run_at(sqlite_url: str, tmp_path: Path) -> None:
    """AgentV pairs by test id alone, so a file whose rows name no target against one of ``default`` is
    compared; evalstore pairs by target too, says so, and ``A@`` names A's results without a target."""
    base, cand = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    base.write_text('{"test_id": "t1", "score": 0.5}\n', encoding="utf-8")
    cand.write_text('{"test_id": "t1", "target": "default", "score": 0.8}\n', encoding="utf-8")
    a, b = (ok_json(cli(sqlite_url, "import", str(p), "--json"))["run_id"] for p in (base, cand))
    apart = cli(sqlite_url, "compare", a, b)
    assert "A's are of no target, B's of target default" in apart.output
    assert f"evalstore compare {a}@ {b}@default" in apart.output
    outcomes = ok_json(cli(sqlite_url, "compare", f"{a}@", f"{b}@default", "--json"))["outcomes"]
    # agentv compare base cand: "1 win, 0 losses, 0 ties | Mean Δ: +0.300 | g: +0.600 | Status: improved"
    assert (outcomes["wins"], outcomes["losses"], outcomes["ties"], outcomes["mean_delta"]) == (1, 0, 0, 0.3)
    assert outcomes["mean_normalized_gain"] == 0.6 and outcomes["status"] == "improved"
    missing = cli(sqlite_url, "compare", f"{b}@", f"{a}@")
    assert missing.exit_code == 2 and "has no results without a target; its targets: default" in missing.output
