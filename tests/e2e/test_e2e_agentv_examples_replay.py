"""AgentV's example suites as AgentV ran them: a plain import and an unchanged replay reproduce every score.

The runs (tests/fixtures/agentv-example-runs) were written by the real AgentV 4.42.4 against a local model
server whose answers are a function of the request (answers.py there). Each test imports one run as a user
would, from the example's folder with no ``--eval``, in the environment AgentV had (the repository-root
targets file's ``use_target`` chains pointed at the same server), and replays it with no options: every
test must be regraded (none carried over), every per-grader score must equal AgentV's, and no LLM verdict
may be an execution error. A suite waiting on another piece of work is marked xfail (strict) naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentv_examples import (
    FILE_CHANGES_LOST,
    RUNS,
    SUITES,
    expected_scores,
    judge_targets,
    rows,
    xfail,
)
from e2e_helpers import audit, cli, ok_json
from judge_server import JudgeServer

PENDING: dict[str, list[str]] = {
    "file-changes": [FILE_CHANGES_LOST],
}


NAMED_JUDGE_PENDING = PENDING
"""With the judge named on the command line, what is left to wait for."""


def cases(pending: dict[str, list[str]]) -> list[Any]:
    return [pytest.param(s, marks=[xfail(*pending[s])] if pending.get(s) else []) for s in SUITES]


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


def reproduced(db: str, suite: str, corpus: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> None:
    folder, eval_file = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    run = imported(db, suite)
    assert run["eval_path"] == str(corpus / folder / eval_file), "the eval file AgentV ran, found by the import"
    new = ok_json(cli(db, "replay", run["run_id"], *flags, "--json"), 0, 1)["run_id"]
    differences = []
    for row in rows(suite):
        (test,) = audit(db, new, row["test_id"])["tests"]
        verdicts = test["verdicts"]
        assert verdicts and {v["origin"] for v in verdicts} == {"graded"}, f"{row['test_id']}: not regraded"
        for v in verdicts:
            assert not (v["grader_type"] == "llm-grader" and v["status"] == "execution_error"), (row["test_id"], v)
        got = [(v["grader"], float(v["score"])) for v in verdicts]
        want = expected_scores(row)
        if len(got) != len(want) or [s for _, s in got] != pytest.approx([s for _, s in want]):
            differences.append((row["test_id"], want, got))
    assert differences == [], differences
