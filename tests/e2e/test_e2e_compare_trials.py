"""``evalstore compare A B`` of runs with several trials per test: the unit of every statistic is the test
(its paired attempts averaged), not the trial, and ``--cluster-by`` with two runs is reported and gated on."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json
from scipy.stats import binomtest

from evalstore.replay.analysis.calibration import clustered_mean_difference
from evalstore.replay.analysis.stats import bootstrap_mean_ci

TARGETS = """\
targets:
  - name: echo
    provider: cli
    command: "sh -c 'cat {PROMPT_FILE} > {OUTPUT_FILE}; echo answered >> {OUTPUT_FILE}'"
"""


def _suite(root: Path, name: str, failing: set[str], categories: list[str]) -> Path:
    """Tests t1.. (one a category), three trials each; the tests in ``failing`` look for what no answer has."""
    tests = "".join(
        f"  - id: t{i}\n"
        f"    input: question {i}\n"
        f"    metadata: {{category: {category}}}\n"
        f"    assertions: [{{type: contains, value: {'NOPE' if f't{i}' in failing else 'answered'}}}]\n"
        for i, category in enumerate(categories, 1)
    )
    path = root / name
    path.write_text(
        textwrap.dedent("""\
            name: trials-stats
            execution:
              target: echo
              trials: {count: 3, strategy: mean}
            tests:
            """)
        + tests
    )
    return path


def _runs(root: Path, db: str, failing: set[str], categories: list[str]) -> tuple[str, str]:
    """A recorded run where every trial passes, and its regrade failing ``failing``'s three trials."""
    (root / ".agentv").mkdir(parents=True)
    (root / ".agentv" / "targets.yaml").write_text(TARGETS)
    v1 = _suite(root, "v1.eval.yaml", set(), categories)
    v2 = _suite(root, "v2.eval.yaml", failing, categories)
    a = ok_json(cli(db, "run", str(v1), "--json"))["run_id"]
    b = ok_json(cli(db, "replay", a, "--eval", str(v2), "--json"), 0, 1)["run_id"]
    return a, b


@pytest.fixture
def five_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, str]:
    """The new user's runs: 5 tests x 3 trials, the regrade failing 2 tests (6 trials)."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    a, b = _runs(tmp_path, db, {"t1", "t2"}, ["c1", "c2", "c3", "c4", "c5"])
    return db, a, b


def test_two_runs_with_trials_pair_tests_not_trials(five_tests: tuple[str, str, str]) -> None:
    db, a, b = five_tests
    out = ok_json(cli(db, "compare", a, b, "--json"))
    overall = out["overall"]
    assert overall["score"]["n"] == 5
    assert overall["counts"] == {"n": 5, "both_pass": 3, "both_fail": 0, "a_only_pass": 2, "b_only_pass": 0}
    assert overall["mcnemar"]["p_value"] == pytest.approx(binomtest(0, 2, 0.5).pvalue)
    low, high, _ = bootstrap_mean_ci([-1.0, -1.0, 0.0, 0.0, 0.0], seed=0)
    assert (overall["score"]["ci_low"], overall["score"]["ci_high"]) == (low, high)
    assert (out["outcomes"]["wins"], out["outcomes"]["losses"], out["outcomes"]["ties"]) == (0, 2, 3)
    tests = {t["test_id"]: t for t in out["tests"]}
    assert set(tests) == {"t1", "t2", "t3", "t4", "t5"}
    assert tests["t1"]["attempts"] == [1, 2, 3] and tests["t1"]["attempt"] is None
    assert (tests["t1"]["outcome"], tests["t1"]["flip"], tests["t3"]["outcome"]) == ("loss", "pass->fail", "tie")
    assert len(out["results"]) == 15  # each trial, side by side
    contains = next(g for g in out["graders"] if g["grader"] == "contains-answered")
    assert contains["n"] == 3 and contains["stats"]["counts"]["n"] == 3  # t3..t5, which both runs grade so
    # t1 and t2 are graded by another grader in B: tests, as n counts them, not their 6 trials.
    assert (contains["only_in_a"], contains["only_in_b"], contains["skipped"]) == (2, 0, 0)
    nope = next(g for g in out["graders"] if g["grader"] == "contains-NOPE")
    assert (nope["n"], nope["only_in_a"], nope["only_in_b"]) == (0, 0, 2)

    # The multi-variant form counts the same tests: the same pairs, the same mean difference.
    many = ok_json(cli(db, "compare", a, b, b, "--json"))["rows"][0]
    assert (many["n"], many["mean_diff"]) == (5, overall["score"]["mean_diff"])

    text = cli(db, "compare", a, b).stdout
    assert "5 paired tests (15 paired results" in text
    assert "t1@echo (3 attempts)" in text
    # 15 trials read as independent pairs made this CI lie below 0 and the gate fail the build.
    gate = cli(db, "compare", a, b, "--fail-on-regression", "ci")
    assert gate.exit_code == 0, gate.output
    flip = cli(db, "compare", a, b, "--fail-on-regression", "flip")
    assert flip.exit_code == 1
    assert "regression: 2 test(s) flipped pass->fail: t1@echo (3 attempts), t2@echo (3 attempts)" in flip.stderr

    # Clustered by a key each test has its own value of, the tests are the clusters.
    out = ok_json(cli(db, "compare", a, b, "--cluster-by", "category", "--json"))
    expected = clustered_mean_difference([-1.0, -1.0, 0.0, 0.0, 0.0], ["c1", "c2", "c3", "c4", "c5"])
    assert (out["clustered"]["n"], out["clustered"]["clusters"]) == (5, 5)
    assert (out["clustered"]["ci_low"], out["clustered"]["ci_high"]) == (expected.low, expected.high)
    text = cli(db, "compare", a, b, "--cluster-by", "category").stdout
    assert f"clustered: 5 groups: mean diff -0.400, 95% CI [{expected.low:+.3f}, {expected.high:+.3f}]" in text


def test_html_report_counts_the_tests(five_tests: tuple[str, str, str], tmp_path: Path) -> None:
    db, a, b = five_tests
    report = tmp_path / "r.html"
    assert cli(db, "compare", a, b, "--html", str(report)).exit_code == 0
    page = report.read_text()
    assert "5 paired tests (each test's attempts averaged: 15 paired results)" in page
    assert "6 paired results changed" in page  # the trials listed below, not "6 changed" of 5 tests
    assert "2 flipped pass→fail" in page


def test_the_viewers_comparison_counts_the_tests_as_compare_does(five_tests: tuple[str, str, str]) -> None:
    """The viewer said "6 of 15 paired tests changed" (trials) beside statistics over 5 tests; compare says
    "changed tests (2 of 5)". It now counts as compare does, and lists the 6 changed trials as results."""
    from starlette.testclient import TestClient

    from evalstore.replay.analysis import browse
    from evalstore.store import EventStore, make_engine
    from evalstore.viewer import create_app

    db, a, b = five_tests
    assert "changed tests (2 of 5)" in cli(db, "compare", a, b).stdout
    store = EventStore(make_engine(db), create=False)
    try:
        html = TestClient(create_app(store), base_url="http://127.0.0.1").get(f"/compare/{a}/{b}").text
        graders = [g.to_dict() for g in browse.compare_stats(store, a, b).graders]
    finally:
        store.close()
    # The page's per-grader rows (its skipped counts among them) are compare's, tests not trials.
    assert json.loads(json.dumps(graders)) == ok_json(cli(db, "compare", a, b, "--json"))["graders"]
    count = html.split('id="changed-count">')[1].split("</p>")[0]
    assert count.startswith(
        "2 of 5 paired tests changed score or pass/fail (each test's attempts averaged, as in the table above); "
        "6 paired results below changed a score, pass/fail or a grader's verdict."
    ), count
    assert html.count('<section class="changed"') == 6


def test_cluster_by_with_two_runs_is_what_the_ci_gate_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four of six tests fail, every test in one category: over tests the bootstrap interval lies below 0;
    one cluster gives no interval, which the gate says instead of failing on the narrower one."""
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    a, b = _runs(tmp_path, db, {"t1", "t2", "t3", "t4"}, ["same"] * 6)
    plain = cli(db, "compare", a, b, "--fail-on-regression", "ci")
    assert plain.exit_code == 1, plain.output
    clustered = cli(db, "compare", a, b, "--cluster-by", "category", "--fail-on-regression", "ci")
    assert clustered.exit_code == 0, clustered.output
    assert "clustered: 1 cluster: no CI or p-value (need at least 5 clusters)" in clustered.stdout
    assert (
        json.loads(cli(db, "compare", a, b, "--cluster-by", "category", "--json").stdout)["clustered"]["clusters"] == 1
    )
