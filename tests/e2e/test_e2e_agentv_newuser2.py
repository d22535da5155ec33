"""A new user's suites (not AgentV's examples), run by the real AgentV 4.42.4, and by evalstore.

tests/fixtures/agentv-newuser2 (its README says how it was made) holds three suites a user might write
(deterministic assertions with `required` and weights; a `file://` JSONL dataset graded by a Python
code grader, with trials; llm-graders with rubrics and a prompt file) and AgentV's runs of them against a
local OpenAI-compatible server. Two tests set their own `execution.threshold`, below the run's: AgentV
grades a test at its own threshold (its row's `execution_status`), which evalstore once ignored. A fourth
(bad-regex) has a regex JavaScript refuses beside a passing `contains`: AgentV scores the regex 0, a fail
counted in the mean (0.5), where evalstore once made the test an execution error.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

NEWUSER2 = FIXTURES_DIR / "agentv-newuser2"
SUITES = ("support", "extract", "review", "ranges", "bad-regex")
answers = fixture_module("agentv_newuser2_answers", NEWUSER2 / "answers.py")


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    index = NEWUSER2 / "runs" / suite / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text("utf-8").splitlines() if line.strip()]
    return {r["test_id"]: r for r in rows}


def agentv_requests() -> list[str]:
    """What AgentV sent the server (model and messages; AgentV streams, evalstore does not)."""
    lines = (NEWUSER2 / "logs" / "requests.jsonl").read_text("utf-8").splitlines()
    return [_request(json.loads(line)["body"]) for line in lines]


def _request(body: dict[str, Any]) -> str:
    return json.dumps({"model": body["model"], "messages": body["messages"]}, sort_keys=True)


def verdicts(db: str, run: str) -> dict[str, tuple[float, bool]]:
    """Each test's score and pass (a test run in trials: its best trial, as AgentV's pass_at_k row)."""
    out: dict[str, tuple[float, bool]] = {}
    for r in ok_json(cli(db, "show", run, "--json"))["results"]:
        best = out.get(r["test_id"])
        if best is None or r["score"] > best[0]:
            out[r["test_id"]] = (r["score"], r["passed"])
    return out


def as_agentv(suite: str) -> dict[str, tuple[float, bool]]:
    return {t: (pytest.approx(r["score"]), r["execution_status"] == "ok") for t, r in agentv_rows(suite).items()}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    """The suites copied out of the checkout, and the server AgentV ran against, in AgentV's environment."""
    environment = {
        "OPENAI_ENDPOINT": "{url}",
        "OPENAI_API_KEY": "sk-local",
        "OPENAI_MODEL": "agent-model",
        "JUDGE_MODEL": "judge-model",
    }
    with agentv_project(NEWUSER2 / "suites", tmp_path / "suites", answers, environment, monkeypatch) as served:
        yield served


@pytest.mark.parametrize("suite", SUITES)
def test_an_import_and_an_unchanged_replay_grade_as_agentv_did(
    store_url: str, suite: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = project
    monkeypatch.chdir(folder / suite)
    run = ok_json(cli(store_url, "import", str(NEWUSER2 / "runs" / suite), "--json"))["run_id"]
    assert verdicts(store_url, run) == as_agentv(suite)
    replayed = ok_json(cli(store_url, "replay", run, "--json"), 0, 1)
    # The replay gates on each test's own threshold: it fails only where AgentV's rows say quality_failure.
    failing = any(r["execution_status"] != "ok" for r in agentv_rows(suite).values())
    assert (replayed["failed"] != []) is failing, replayed["failed"]
    assert verdicts(store_url, replayed["run_id"]) == as_agentv(suite)


@pytest.mark.parametrize("suite", ["support", "review", "ranges"])
def test_run_asks_what_agentv_asked_and_grades_as_it_did(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, server = project
    monkeypatch.chdir(folder / suite)
    # support: every test passes its own threshold (opening-hours 0.5 at 0.5, under the suite's 0.7);
    # review: apology-late-delivery fails (0.58 at 0.8), password-reset passes (0.67 at its own 0.6).
    done = ok_json(cli(sqlite_url, "run", f"evals/{suite}.eval.yaml", "--workers", "1", "--json"), 0, 1)
    assert verdicts(sqlite_url, done["run_id"]) == as_agentv(suite)
    sent = [_request(r.body) for r in server.requests]
    assert sent and set(sent) <= set(agentv_requests())


def test_a_test_passes_when_any_trial_does_whatever_the_mean(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """trials-mean: a `cli` agent that answers well, then badly; `strategy: mean` over two trials. AgentV's
    row: score 0.75 (the mean), status ok, exit 0: its test passes when any trial's status is ok."""
    copy = tmp_path / "trials-mean"
    shutil.copytree(NEWUSER2 / "trials-mean", copy)
    (copy / ".git").mkdir()
    monkeypatch.chdir(copy)
    (row,) = [json.loads(line) for line in (copy / "run" / "index.jsonl").read_text("utf-8").splitlines()]
    assert (row["score"], row["execution_status"]) == (0.75, "ok")
    done = ok_json(cli(sqlite_url, "run", "evals/trials.eval.yaml", "--json"))  # exit 0, as AgentV's
    trial = done["trials"]["t1"]
    assert (trial["score"], trial["passed"], trial["trials"]) == (pytest.approx(0.75), True, 2)


def test_graders_leaves_alone_a_test_graded_by_agentvs_implicit_grader(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """review's cancel-subscription has criteria and no assertions: AgentV grades it with its implicit
    llm-grader and writes no score of that grader (the row's score is the test's). `replay --graders rubric`
    regrades the graders named rubric only: that test is carried over with AgentV's score, no judge asked
    about it, and the replay says so. Before, it was graded (a judge call, its score changed) unsaid."""
    folder, server = project
    monkeypatch.chdir(folder / "review")
    run = ok_json(cli(sqlite_url, "import", str(NEWUSER2 / "runs" / "review"), "--json"))["run_id"]
    about_it = "Cancel my subscription please."

    def asked_about_it(since: int) -> bool:
        return any(about_it in json.dumps(r.body) for r in server.requests[since:])

    before = len(server.requests)
    result = cli(sqlite_url, "replay", run, "--graders", "rubric", "--json")
    replayed = ok_json(result, 0, 1)
    assert (
        "warning: --graders names no grader of cancel-subscription (llm-grader), and the parent has no verdict of "
        "them to keep (an AgentV import has none of its implicit llm-grader): carried over with the parent's "
        "score, not graded (name llm-grader in --graders to grade them)"
    ) in result.stderr.splitlines()
    assert not asked_about_it(before)
    assert server.requests[before:]  # rubric was regraded
    assert verdicts(sqlite_url, replayed["run_id"])["cancel-subscription"] == as_agentv("review")["cancel-subscription"]
    shown = {r["test_id"]: r for r in ok_json(cli(sqlite_url, "show", replayed["run_id"], "--json"))["results"]}
    assert shown["cancel-subscription"]["graders"] == {}

    before = len(server.requests)
    named = ok_json(cli(sqlite_url, "replay", run, "--graders", "rubric,llm-grader", "--json"), 0, 1)
    assert asked_about_it(before)
    shown = {r["test_id"]: r for r in ok_json(cli(sqlite_url, "show", named["run_id"], "--json"))["results"]}
    assert set(shown["cancel-subscription"]["graders"]) == {"llm-grader"}
