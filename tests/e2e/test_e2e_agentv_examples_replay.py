"""AgentV's example suites as AgentV ran them: a plain import and an unchanged replay reproduce every score.

The runs (tests/fixtures/agentv-example-runs) were written by the real AgentV 4.42.4 against a local model
server whose answers are a function of the request (answers.py there). Each test imports one run as a user
would, from the example's folder with no ``--eval``, in the environment AgentV had (the repository-root
targets file's ``use_target`` chains pointed at the same server), and replays it with no options: every
test must be regraded (none carried over but what AgentV's run folder cut, saying so), every per-grader score
must equal AgentV's, and no LLM verdict may be an execution error. A suite waiting on another piece of work is marked xfail (strict) naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentv_examples import (
    RUNS,
    SUITES,
    expected_scores,
    judge_targets,
    rows,
    xfail,
)
from e2e_helpers import audit, cli, ok_json, one_line_error
from judge_server import JudgeServer

PENDING: dict[str, list[str]] = {}


NAMED_JUDGE_PENDING = PENDING
"""With the judge named on the command line, what is left to wait for."""


NO_JUDGE = ("local-cli",)
"""Suites AgentV could not judge: their targets file names a `grader_target` it does not define, so AgentV
recorded "No grader provider available for LLM grading" (tests below hold evalstore to saying so first)."""


def cases(pending: dict[str, list[str]]) -> list[Any]:
    return [pytest.param(s, marks=[xfail(*pending[s])] if pending.get(s) else []) for s in SUITES if s not in NO_JUDGE]


def imported(db: str, suite: str) -> dict[str, Any]:
    """``evalstore import RUN_DIR --json``, nothing else: the import finds the suite by itself."""
    out = ok_json(cli(db, "import", str(RUNS / "runs" / suite), "--json"))
    assert out["tests"] == len(rows(suite))
    return out


@pytest.mark.parametrize("suite", cases(PENDING))
def test_a_plain_import_and_an_unchanged_replay_reproduce_every_per_grader_score(
    sqlite_url: str, suite: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reproduced(sqlite_url, suite, corpus, monkeypatch)


@pytest.mark.parametrize("suite", cases(NAMED_JUDGE_PENDING))
def test_with_the_judge_named_a_replay_of_a_plain_import_reproduces_every_per_grader_score(
    sqlite_url: str,
    suite: str,
    corpus: Path,
    agentv_environment: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The same, the judge named on the command line (the root targets file's `openai` target as written
    there): what evalstore grades, apart from how the judge's target is found."""
    reproduced(
        sqlite_url, suite, corpus, monkeypatch, "--targets", str(judge_targets(tmp_path)), "--judge-target", "openai"
    )


def _cut_input(verdict: dict) -> bool:
    return verdict["origin"] == "carried" and any(
        e.startswith("carried: the source kept only the first lines of this test's file_changes")
        for e in verdict.get("evidence") or []
    )


def reproduced(db: str, suite: str, corpus: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> None:
    folder, eval_file = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    run = imported(db, suite)
    assert run["eval_path"] == str(corpus / folder / eval_file), "the eval file AgentV ran, found by the import"
    replayed = cli(db, "replay", run["run_id"], *flags, "--json")
    new = ok_json(replayed, 0, 1)["run_id"]
    # The eval AgentV ran grades what its rows hold: no grader of the run is left out.
    assert "not in this eval" not in replayed.stderr, replayed.stderr
    differences = []
    for row in rows(suite):
        (test,) = audit(db, new, row["test_id"])["tests"]
        verdicts = test["verdicts"]
        # Every verdict regraded, but for those whose input AgentV's run folder cut (file_changes: its first
        # 20 lines kept), which are carried over saying so.
        assert verdicts and all(v["origin"] == "graded" or _cut_input(v) for v in verdicts), f"{row['test_id']}"
        for v in verdicts:
            assert not (v["grader_type"] == "llm-grader" and v["status"] == "execution_error"), (row["test_id"], v)
        got = [(v["grader"], float(v["score"])) for v in verdicts]
        want = expected_scores(row)
        if len(got) != len(want) or [s for _, s in got] != pytest.approx([s for _, s in want]):
            differences.append((row["test_id"], want, got))
    assert differences == [], differences
    # A code grader's recorded command as AgentV writes it: the eval file's, not the script's resolved path.
    exported = {r["test_id"]: r for r in map(json.loads, cli(db, "export", new).stdout.splitlines())}
    for row in rows(suite):
        theirs, ours = (_commands(r.get("scores") or []) for r in (row, exported[row["test_id"]]))
        assert {name: ours.get(name) for name in theirs} == theirs, row["test_id"]


def _commands(scores: list[dict[str, Any]]) -> dict[str, Any]:
    return {s["name"]: s["input"]["command"] for s in scores if "command" in (s.get("input") or {})}


def test_a_replay_that_finds_no_judge_says_so_and_stops_before_grading(
    sqlite_url: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """features/local-cli's target names `grader_target: grader`, which its targets file (the one found from
    the example's folder) does not define: AgentV's run recorded the grader's error. An unchanged replay of
    the import names the missing judge and exits 2 with nothing written and no judge asked."""
    folder, _ = SUITES["local-cli"]
    monkeypatch.chdir(corpus / folder)
    assert "No grader provider available for LLM grading" in (RUNS / "logs" / "local-cli.out").read_text("utf-8")
    run = imported(sqlite_url, "local-cli")
    before = len(agentv_environment.requests)
    line = one_line_error(cli(sqlite_url, "replay", run["run_id"], "--json"))
    assert "judge target 'grader' is not defined" in line, line
    assert [r["run_id"] for r in ok_json(cli(sqlite_url, "runs", "--json"))] == [run["run_id"]]
    assert len(agentv_environment.requests) == before


def test_local_cli_runs_its_agent_with_every_input_file_once_a_judge_is_named(
    sqlite_url: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalstore run` of features/local-cli from its folder: with no judge it runs the agent, as AgentV did,
    and records the test as AgentV's run did (an evaluator execution error, "No grader provider available
    for LLM grading", score 0), warning once first; with one named, the agent (`uv run ./mock_cli.py ...
    {FILES}`, after its healthcheck, which has no `type:`) is given both input files, the system message's
    and the user message's, as AgentV gives them."""
    folder, eval_file = SUITES["local-cli"]
    monkeypatch.chdir(corpus / folder)
    result = cli(sqlite_url, "run", eval_file, "--workdir", str(corpus / "ws"), "--json")
    out = ok_json(result, 1)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "judge target 'grader' is not defined" in warnings[0], result.stderr
    (theirs,) = rows("local-cli")
    (row,) = out["results"]
    assert (row["score"], row["status"]) == (theirs["score"], theirs["execution_status"])
    assert row["error"] == f"llm-grader: {theirs['error']}"
    exported = [json.loads(line) for line in cli(sqlite_url, "export", out["run_id"]).stdout.splitlines()]
    assert [r["output"] for r in exported] == ["Attachments detected (2): example.txt, python.instructions.md."]
    monkeypatch.setenv("EVALSTORE_JUDGE_BASE_URL", agentv_environment.base_url)
    monkeypatch.setenv("EVALSTORE_JUDGE_MODEL", "fixture-model")
    out = ok_json(cli(sqlite_url, "run", eval_file, "--judge-target", "judge", "--json"), 0, 1)
    exported = [json.loads(line) for line in cli(sqlite_url, "export", out["run_id"]).stdout.splitlines()]
    assert [r["output"] for r in exported] == ["Attachments detected (2): example.txt, python.instructions.md."]


def test_file_changes_graders_runs_its_agent_and_records_agentv_s_failure_of_graders_with_no_judge(
    sqlite_url: str, corpus: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """features/file-changes-graders names `grader_target: grader`, which its targets file does not define, and
    a third grader on a Copilot CLI target (AgentV's delegate mode, which evalstore does not have): `agentv
    eval` starts it, and so does `evalstore run`. The mock agent edits the workspace; the two graders with no
    judge score 0 as AgentV's grader that threw; the Copilot one is an execution error, said up front."""
    monkeypatch.chdir(corpus / "examples" / "features" / "file-changes-graders")
    result = cli(sqlite_url, "run", "evals/dataset.eval.yaml", "--workdir", str(tmp_path / "ws"), "--json")
    out = ok_json(result, 1)
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert all(name in warning for name in ("llm-grader-rubrics", "llm-grader-builtin", "llm-grader-copilot"))
    (exported,) = [json.loads(line) for line in cli(sqlite_url, "export", out["run_id"]).stdout.splitlines()]
    assert exported["output"] == "Added subtract function to calculator.ts"  # the agent ran
    (test,) = audit(sqlite_url, out["run_id"], "verify-file-changes-graders")["tests"]
    got = {
        v["grader"]: (v["score"], v["verdict"], v["status"], [a["text"] for a in v["assertions"]])
        for v in test["verdicts"]
    }
    for name in ("llm-grader-rubrics", "llm-grader-builtin"):
        assert got[name] == (
            0.0,
            "fail",
            "ok",
            [f"Grader '{name}' failed: No grader provider available for LLM grading"],
        )
    assert got["llm-grader-copilot"][2] == "execution_error" and "copilot-cli" in got["llm-grader-copilot"][3][0]


def test_the_root_targets_file_is_found_above_an_eval_named_by_import_eval(
    sqlite_url: str,
    corpus: Path,
    agentv_environment: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Imported from elsewhere with ``--eval``: the replay finds the judge (`llm` -> ${{ LLM_TARGET }}) in the
    repository-root targets file above the eval, as `agentv eval` would, and reproduces AgentV's scores."""
    folder, eval_file = SUITES["rubric"]
    monkeypatch.chdir(tmp_path)
    run = ok_json(
        cli(sqlite_url, "import", str(RUNS / "runs" / "rubric"), "--eval", str(corpus / folder / eval_file), "--json")
    )
    new = ok_json(cli(sqlite_url, "replay", run["run_id"], "--json"), 0, 1)["run_id"]
    for row in rows("rubric"):
        (test,) = audit(sqlite_url, new, row["test_id"])["tests"]
        assert [float(v["score"]) for v in test["verdicts"]] == pytest.approx([s for _, s in expected_scores(row)])


def test_a_grader_whose_diff_was_cut_is_regraded_on_the_lines_kept_when_the_replay_changes_it(
    sqlite_url: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file-changes run's verify-edits-and-creates lost 18 of its diff's 38 lines; naming the eval file
    (a change) regrades its code grader instead of carrying its verdict over."""
    folder, eval_file = SUITES["file-changes"]
    monkeypatch.chdir(corpus / folder)
    run = imported(sqlite_url, "file-changes")
    result = cli(sqlite_url, "replay", run["run_id"], "--eval", eval_file, "--json")
    new = ok_json(result, 0, 1)
    warning = next(line for line in result.stderr.splitlines() if "kept only the first lines of file_changes" in line)
    assert "verify-edits-and-creates" in warning
    (test,) = audit(sqlite_url, new["run_id"], "verify-edits-and-creates")["tests"]
    (verdict,) = test["verdicts"]
    # Graded anew (here it cannot run at all: an import holds no snapshot of the workspace the eval sets up).
    assert verdict["origin"] == "graded" and not _cut_input(verdict)
