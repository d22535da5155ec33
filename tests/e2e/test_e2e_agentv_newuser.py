"""A new user's check on more of AgentV's example suites: a plain import and an unchanged replay of each
reproduce every per-grader score AgentV recorded.

tests/fixtures/agentv-newuser-runs holds real AgentV 4.42.4 runs of example suites not among
agentv-example-runs (its regenerate.py: the same server, answers and environment), among them AgentV's
matrix (features/matrix-evaluation run with two ``--target`` s): once with two names of the root targets
file that both resolve to its ``openai`` target (AgentV then writes both targets' rows as ``target:
openai``), once with two targets of their own (``alpha``, ``beta``), whose rows keep their targets while
every test folder holds only the last target's files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentv_examples import expected_scores
from e2e_helpers import audit, cli, fixture_module, ok_json, one_line_error
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

NEWUSER = FIXTURES_DIR / "agentv-newuser-runs"
regenerate = fixture_module("agentv_newuser_regenerate", NEWUSER / "regenerate.py")
SUITES: dict[str, tuple[str, str, tuple[str, ...]]] = regenerate.SUITES
OWN_TARGETS = "matrix-evaluation-targets"
"""Run with `--targets targets-matrix.yaml`: its targets are in no targets file the eval finds."""


def rows(suite: str) -> list[dict[str, Any]]:
    index = NEWUSER / "runs" / suite / "index.jsonl"
    return [json.loads(line) for line in index.read_text("utf-8").splitlines() if line.strip()]


def imported(db: str, suite: str) -> dict[str, Any]:
    return ok_json(cli(db, "import", str(NEWUSER / "runs" / suite), "--json"))


def regraded(db: str, run: str, test_id: str) -> dict[str | None, dict[str, Any]]:
    """The replay's results of a test by target."""
    return {t["target"]: t for t in audit(db, run, test_id)["tests"]}


@pytest.mark.parametrize("suite", [s for s in SUITES if s != OWN_TARGETS])
def test_a_plain_import_and_an_unchanged_replay_reproduce_every_per_grader_score(
    sqlite_url: str, suite: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _, _ = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    run = imported(sqlite_url, suite)
    replayed = cli(sqlite_url, "replay", run["run_id"], "--json")
    new = ok_json(replayed, 0, 1)["run_id"]
    assert "not in this eval" not in replayed.stderr, replayed.stderr  # the eval AgentV ran grades every verdict
    # A test and target AgentV wrote twice (matrix-evaluation: both targets resolve to `openai`) is its last row.
    want = {(r["test_id"], r["target"]): expected_scores(r) for r in rows(suite)}
    assert run["tests"] == len(want)
    for (test_id, target), scores in want.items():
        test = regraded(sqlite_url, new, test_id)[target]
        assert all(v["origin"] == "graded" for v in test["verdicts"]), (test_id, target)
        got = [float(v["score"]) for v in test["verdicts"]]
        assert got == pytest.approx([s for _, s in scores]), (test_id, target, scores, got)


def test_a_matrix_run_imports_one_result_per_test_and_target(
    sqlite_url: str,
    corpus: Path,
    agentv_environment: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AgentV's matrix with targets of their own: six rows, two targets, one folder per test holding the
    second target's files. The import keeps every row's result under its target, and says which results
    lost their files; a replay finds the targets where AgentV did (`--targets`), regrades the results whose
    answer is kept with AgentV's scores, and calls the others not regradable."""
    folder, _, _ = SUITES[OWN_TARGETS]
    monkeypatch.chdir(corpus / folder)
    run = imported(sqlite_url, OWN_TARGETS)
    assert run["tests"] == 6
    shown = ok_json(cli(sqlite_url, "show", run["run_id"], "--json"))["results"]
    assert sorted((r["test_id"], r["target"], r["score"]) for r in shown) == sorted(
        (r["test_id"], r["target"], r["score"]) for r in rows(OWN_TARGETS)
    )
    lost = [w for w in run["warnings"] if "holds target beta's transcript, not alpha's" in w]
    assert len(lost) == 3

    # The targets AgentV was given with --targets are in no file the eval finds: said before anything is written.
    line = one_line_error(cli(sqlite_url, "replay", run["run_id"]))
    assert "no judge target chosen" in line
    targets = str(NEWUSER / "targets-matrix.yaml")
    new = ok_json(cli(sqlite_url, "replay", run["run_id"], "--targets", targets, "--json"), 0, 1)["run_id"]
    for row in rows(OWN_TARGETS):
        test = regraded(sqlite_url, new, row["test_id"])[row["target"]]
        if row["target"] == "alpha":
            assert test["status"] == "not_regradable", test
            continue
        assert [float(v["score"]) for v in test["verdicts"]] == pytest.approx([s for _, s in expected_scores(row)])
