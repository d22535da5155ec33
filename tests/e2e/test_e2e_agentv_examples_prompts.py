"""AgentV's example suites: evalstore asks the judge (and the agent) exactly what AgentV asked.

The requests AgentV 4.42.4 sent the local model server while it ran each suite are committed
(tests/fixtures/agentv-example-runs/logs). Every request evalstore sends the same server, replaying the
imported run or running the suite from the example's folder, must be one of them byte for byte (the
corpus copy's folder written as the one AgentV ran in), and the scores must be AgentV's. A suite waiting
on another piece of work is marked xfail (strict) naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentv_examples import (
    RUNS,
    SUITES,
    answers,
    expected_scores,
    judge_targets,
    logged,
    messages_sent,
    rows,
    xfail,
)
from e2e_helpers import audit, cli, ok_json
from judge_server import JudgeServer

# Suites whose tests have LLM graders: their judge prompts are compared on a replay of the import.
JUDGED: dict[str, list[str]] = {
    "basic": [],
    "rubric": [],
    "weighted-graders": [],
    "multi-turn-conversation": [],
    "composite": [],
    "threshold-grader": [],
    "external-datasets": [],
    "multi-turn-conversation-live": [],
}
# Suites whose agent is the LLM target: `evalstore run` of them is compared request by request.
RUN: dict[str, list[str]] = {
    **JUDGED,
    "trials": [],
    "assert": [],
}  # evalstore run runs every trial, as AgentV


def judged_cases(named: bool) -> list[Any]:
    """Each suite, marked with what it waits for (the same whether the judge is named or found)."""
    return [pytest.param(suite, marks=[xfail(*pending)] if pending else []) for suite, pending in JUDGED.items()]


def judge_requests(bodies: list[Any]) -> list[Any]:
    return [b for b in bodies if answers.is_judge(b)]


def replay_judge_prompts(
    db: str, suite: str, corpus: Path, server: JudgeServer, monkeypatch: pytest.MonkeyPatch, *flags: str
) -> list[str]:
    folder, _ = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    run = ok_json(cli(db, "import", str(RUNS / "runs" / suite), "--json"))["run_id"]
    before = len(server.requests)
    ok_json(cli(db, "replay", run, *flags, "--json"), 0, 1)
    return messages_sent(judge_requests([r.body for r in server.requests[before:]]), corpus)


@pytest.mark.parametrize("suite", judged_cases(named=False))
def test_an_unchanged_replay_of_the_import_sends_every_judge_prompt_agentv_sent(
    sqlite_url: str, suite: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = replay_judge_prompts(sqlite_url, suite, corpus, agentv_environment, monkeypatch)
    agentv = messages_sent(judge_requests([e["body"] for e in logged(suite)]))
    assert sent and sorted(sent) == sorted(agentv)


@pytest.mark.parametrize("suite", judged_cases(named=True))
def test_with_the_judge_named_a_replay_sends_every_judge_prompt_agentv_sent(
    sqlite_url: str,
    suite: str,
    corpus: Path,
    agentv_environment: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The same, with the judge named on the command line (the repository-root targets file's `openai`
    target as written there): what the judge is shown, apart from how its target is found."""
    flags = ("--targets", str(judge_targets(tmp_path)), "--judge-target", "openai")
    sent = replay_judge_prompts(sqlite_url, suite, corpus, agentv_environment, monkeypatch, *flags)
    agentv = messages_sent(judge_requests([e["body"] for e in logged(suite)]))
    assert sent and sorted(sent) == sorted(agentv)


@pytest.mark.parametrize("suite", [pytest.param(s, marks=[xfail(*p)] if p else []) for s, p in RUN.items()])
def test_evalstore_run_from_the_examples_folder_sends_every_prompt_agentv_sent_and_scores_the_same(
    sqlite_url: str, suite: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, eval_file = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    before = len(agentv_environment.requests)
    out = ok_json(cli(sqlite_url, "run", eval_file, "--json"), 0, 1)
    sent = messages_sent([r.body for r in agentv_environment.requests[before:]], corpus)
    agentv = messages_sent([e["body"] for e in logged(suite)])
    assert sorted(sent) == sorted(agentv), "every agent and judge request AgentV sent, and no other"
    for row in rows(suite):
        # One attempt per trial: AgentV's row is the trial it kept (the best), so it is one of them.
        attempts = [
            [float(v["score"]) for v in test["verdicts"]]
            for test in audit(sqlite_url, out["run_id"], row["test_id"])["tests"]
        ]
        want = [s for _, s in expected_scores(row)]
        assert any(got == pytest.approx(want) for got in attempts), (row["test_id"], want, attempts)


def test_a_replay_of_an_imported_trials_run_regrades_the_trial_agentv_kept(
    sqlite_url: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """features/trials (`count: 2`, pass_at_k): AgentV asked the judge once per trial, but its run folder keeps
    one result per test (orchestrator.ts ``runEvalCaseWithTrials``: the best trial's answer and per-grader
    scores, the trials' aggregate as the test's score; 4.42.4's index rows carry no ``trials``). The import
    holds that one result and an unchanged replay regrades it: one judge prompt per test, AgentV's own for
    that trial, and AgentV's per-grader scores (here both trials got the same answer, so every prompt AgentV
    sent is the one sent again)."""
    sent = replay_judge_prompts(sqlite_url, "trials", corpus, agentv_environment, monkeypatch)
    agentv = messages_sent(judge_requests([e["body"] for e in logged("trials")]))
    tests = rows("trials")
    assert len(agentv) == 2 * len(tests), "AgentV judged each of the two trials"
    assert len(sent) == len(tests) and sorted(set(sent)) == sorted(set(agentv))
