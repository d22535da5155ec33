"""Which failures stop a test's dependents and halt a suite under `fail_on_error`, held to the real AgentV 4.42.4
(tests/fixtures/agentv-grader-error: its README says how the runs were made).

AgentV counts its execution errors for both (orchestrator.ts: `executionStatus === 'execution_error'`): an agent
that failed, a judge that never answered JSON or answered HTTP 400 (the LLM grader's `skip`), a test not run.
A code grader that exits 1 with stderr is not one to AgentV (its code grader scores the failure 0: the test is a
`quality_failure`), while evalstore calls that test an execution error (docs/usage.md, where evalstore differs):
it once stopped the test depending on it and halted the one after it, where AgentV ran both. With trials,
AgentV's test is an execution error only when every trial is. `failures.agentv_execution_error` is the one rule,
read from what a result's row says (status and labels): evalstore's run, its export read back, and an import of
AgentV's own run answer alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json, results_by_test
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

from evalstore.replay.failures import agentv_execution_error

GRADER_ERROR = FIXTURES_DIR / "agentv-grader-error"
PROJECT = GRADER_ERROR / "project"
SUITES = {  # each suite and evalstore's exit code
    "grader-error": 1,  # the test whose grader crashed does not pass
    "agent-error": 1,
    "judge-error": 1,
    "judge-http-error": 1,
    "trials-error": 0,  # flaky passes: one of its trials did (AgentV's `hasOk`)
    "judge-error-mean": 1,
}
NOT_RUN = ("Skipped: ", "Failed: ", "Halted: ")
LABELS = ("execution_status", "error", "failure_stage", "failure_reason_code")
answers = fixture_module("agentv_grader_error_answers", GRADER_ERROR / "answers.py")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    environment = {
        "OPENAI_ENDPOINT": "{url}",
        "OPENAI_API_KEY": "sk-local",
        "JUDGE_MODEL": "judge-model",
        "JUDGE_B_MODEL": "judge-b-model",
    }
    with agentv_project(PROJECT, tmp_path / "project", answers, environment, monkeypatch) as served:
        yield served


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    lines = (PROJECT / "runs" / suite / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, filter(str.strip, lines))}


def exported(db: str, run: str) -> dict[str, list[dict[str, Any]]]:
    """The run's AgentV rows by test id, in order (a test with trials has one, as AgentV's: its trials' row)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in map(json.loads, cli(db, "export", run).stdout.splitlines()):
        rows.setdefault(row["test_id"], []).append(row)
    return rows


def counted(rows: list[dict[str, Any]]) -> bool:
    """Whether AgentV counts the test (its rows) as an execution error (with trials, its row says: every trial is one)."""
    return all(agentv_execution_error(r.get("execution_status", ""), r) for r in rows)


@pytest.mark.parametrize("suite", list(SUITES))
def test_a_run_stops_and_halts_the_tests_agentv_stopped_and_halted(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = project
    monkeypatch.chdir(folder)
    run = ok_json(cli(sqlite_url, "run", f"evals/{suite}.eval.yaml", "--workers", "1", "--json"), SUITES[suite])
    rows = exported(sqlite_url, run["run_id"])
    agentv = agentv_rows(suite)
    assert set(rows) == set(agentv)
    # The same tests counted as execution errors, and the same ones not run, with AgentV's words and labels.
    assert {t: counted(r) for t, r in rows.items()} == {
        t: r["execution_status"] == "execution_error" for t, r in agentv.items()
    }
    for test, row in agentv.items():
        if str(row.get("error", "")).startswith(NOT_RUN):
            assert [rows[test][0].get(k) for k in LABELS] == [row.get(k) for k in LABELS]
        else:
            assert not str(rows[test][0].get("error", "")).startswith(NOT_RUN), test
        if row["execution_status"] == "ok" and len(rows[test]) == 1:
            assert (rows[test][0]["execution_status"], rows[test][0]["score"]) == ("ok", row["score"])


def test_a_crashed_code_grader_is_evalstores_execution_error_and_agentvs_quality_failure(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented difference, as each writes it: AgentV scores the crash 0 (`fail`) and the test 0.5, a
    `quality_failure`; evalstore leaves the grader out (the test scores 1 but cannot pass) and says why its
    status is not AgentV's. An export read back, and an import of AgentV's run, count what the run counted."""
    folder, _ = project
    monkeypatch.chdir(folder)
    run = ok_json(cli(sqlite_url, "run", "evals/grader-error.eval.yaml", "--workers", "1", "--json"), 1)["run_id"]
    (row,) = exported(sqlite_url, run)["grader-crashes"]
    (agentv,) = [agentv_rows("grader-error")["grader-crashes"]]
    assert (agentv["score"], agentv["execution_status"], agentv.get("failure_reason_code")) == (
        0.5,
        "quality_failure",
        None,
    )
    assert {s["name"]: s["verdict"] for s in agentv["scores"]} == {"crash": "fail", "contains-done": "pass"}
    assert [row[k] for k in ("score", *LABELS)] == [
        1,
        "execution_error",
        "crash: Code grader failed: exited with code 1",
        "evaluator",
        "quality_failure_in_agentv",
    ]
    assert {s["name"]: s["verdict"] for s in row["scores"]} == {"crash": "skip", "contains-done": "pass"}

    export = folder / "grader-error.jsonl"
    export.write_text(cli(sqlite_url, "export", run).stdout)
    for source in (export, folder / "runs" / "grader-error"):
        read_back = exported(sqlite_url, ok_json(cli(sqlite_url, "import", str(source), "--json"))["run_id"])
        assert {t: counted(r) for t, r in read_back.items()} == {
            "grader-crashes": False,
            "after-crash": False,
            "later": False,
        }


def test_an_agentv_test_scored_0_for_a_skipped_grader_is_explained_and_its_regrade_warned(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV scored `two-graders` 0 for its skipped LLM grader, its `contains` 1: `show` said "set by a
    required grader's gate" (it has none), and the replay, which scores the mean (evalstore's documented
    rule), turned it into a win in `compare` without a word."""
    folder, _ = project
    monkeypatch.chdir(folder)
    imported = ok_json(cli(sqlite_url, "import", "runs/judge-error-mean", "--json"))["run_id"]
    shown = cli(sqlite_url, "show", imported, "--all").stdout
    (line,) = [row for row in shown.splitlines() if row.startswith("two-graders")]
    assert "score 0 where its graders' mean is 1.000: AgentV 4.x scores a test 0 when one of its graders" in line
    assert "required grader" not in shown

    replayed = cli(sqlite_url, "replay", imported, "--json")
    outcome = ok_json(replayed, 1)
    warnings = [w for w in replayed.stderr.splitlines() if "AgentV scored 0 because a grader failed to run" in w]
    assert warnings == [
        f"warning: 1 result of run {imported} AgentV scored 0 because a grader failed to run (e.g. two-graders, "
        "whose other graders' mean is 1): AgentV 4.42.4 sets such a test's score to 0, evalstore leaves the grader "
        "out of the mean (docs/usage.md, Execution errors), so graded as before it scores that mean here and "
        "compare counts it as changed with no grader changed"
    ]
    scores = {t: (r["score"], r["status"]) for t, r in results_by_test(sqlite_url, outcome["run_id"]).items()}
    assert scores == {"two-graders": (1.0, "execution_error"), "one-grader": (1.0, "ok")}
