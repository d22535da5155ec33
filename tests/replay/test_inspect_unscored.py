"""An Inspect score Inspect's metrics leave out (NaN) and a dict score with a key outside [0, 1], imported
from a real log (tests/fixtures/inspect-unscored, made by inspect-ai 0.3.285)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package

pytest.importorskip("inspect_ai.log")

LOG = FIXTURES_DIR / "inspect-unscored" / "logs" / "unscored.eval"


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args])


def _results(db: str) -> dict[str, dict]:
    imported = _cli(db, "import", str(LOG), "--json")
    assert imported.exit_code == 0, imported.output
    shown = _cli(db, "show", json.loads(imported.stdout)["run_id"], "--json")
    return {r["test_id"]: r for r in json.loads(shown.stdout)["results"]}


def test_a_nan_score_is_unscored_and_the_test_follows_its_other_scores(sqlite_url: str) -> None:
    # Sample b's sometimes_nan is NaN: Inspect leaves it out of its metrics. It is a skipped verdict left
    # out of the test's score, and no execution error: b answered right and passes, as a does.
    b = _results(sqlite_url)["b"]
    assert (b["status"], b["passed"], b["error"]) == ("ok", True, None), b
    assert b["graders"]["sometimes_nan"] == 0.0 and b["verdicts"]["sometimes_nan"] == "skip"
    shown = _cli(sqlite_url, "show", "last")
    assert "sometimes_nan=unscored" in shown.stdout and "sometimes_nan unscored: left out of the score" in shown.stdout
    assert "passed=2  errors=0" in shown.stdout


def test_a_score_outside_0_1_counts_clamped_in_the_tests_score(sqlite_url: str) -> None:
    # shape/len is 2 for b (the answer "13"): the verdict keeps the value Inspect reads, the test's score
    # counts it as 1, so the test scores 1 (match 1, shape/digits 1, shape/len 1), never past 1.
    results = _results(sqlite_url)
    assert results["b"]["graders"]["shape/len"] == 2.0
    assert {k: r["score"] for k, r in results.items()} == {"a": 1.0, "b": 1.0}
