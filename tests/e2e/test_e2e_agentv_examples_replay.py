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
    GRADERS_COMPOSITE,
    GRADERS_METRICS,
    GRADERS_TRAJECTORY,
    LOAD_DATASETS,
    LOAD_TRIALS,
    RUNS,
    SDK_MISSING,
    SUITES,
    TARGETS_GRADER,
    TARGETS_USE,
    expected_scores,
    rows,
    xfail,
)
from e2e_helpers import audit, cli, ok_json
from judge_server import JudgeServer

PENDING: dict[str, list[str]] = {
    "basic": [TARGETS_USE],
    "rubric": [TARGETS_USE],
    "assert": [TARGETS_USE],
    "tool-trajectory-simple": [GRADERS_TRAJECTORY, TARGETS_GRADER],
    "tool-trajectory-advanced": [GRADERS_TRAJECTORY, TARGETS_GRADER],
    "composite": [GRADERS_COMPOSITE, TARGETS_USE],
    "threshold-grader": [GRADERS_COMPOSITE, TARGETS_USE],
    "weighted-graders": [TARGETS_USE],
    "execution-metrics": [GRADERS_METRICS, GRADERS_TRAJECTORY, SDK_MISSING],
    "multi-turn-conversation": [TARGETS_USE],
    "trials": [LOAD_TRIALS, TARGETS_USE],
    "file-changes": [FILE_CHANGES_LOST],
    "external-datasets": [LOAD_DATASETS, TARGETS_USE],
}


def cases() -> list[Any]:
    return [pytest.param(s, marks=[xfail(*PENDING[s])] if s in PENDING else []) for s in SUITES]


def imported(db: str, suite: str) -> dict[str, Any]:
    """``evalstore import RUN_DIR --json``, nothing else: the import finds the suite by itself."""
    out = ok_json(cli(db, "import", str(RUNS / "runs" / suite), "--json"))
    assert out["tests"] == len(rows(suite))
    return out


@pytest.mark.parametrize("suite", cases())
def test_a_plain_import_and_an_unchanged_replay_reproduce_every_per_grader_score(
    sqlite_url: str, suite: str, corpus: Path, agentv_environment: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, eval_file = SUITES[suite]
    monkeypatch.chdir(corpus / folder)
    run = imported(sqlite_url, suite)
    assert run["eval_path"] == str(corpus / folder / eval_file), "the eval file AgentV ran, found by the import"
    replayed = ok_json(cli(sqlite_url, "replay", run["run_id"], "--json"), 0, 1)
    new = replayed["run_id"]
    differences = []
    for row in rows(suite):
        (test,) = audit(sqlite_url, new, row["test_id"])["tests"]
        verdicts = test["verdicts"]
        assert {v["origin"] for v in verdicts} <= {"graded"}, f"{row['test_id']}: carried over, not regraded"
        for v in verdicts:
            assert not (v["grader_type"] == "llm-grader" and v["status"] == "execution_error"), (row["test_id"], v)
        got = [(v["grader"], float(v["score"])) for v in verdicts]
        want = expected_scores(row)
        if [s for _, s in got] != pytest.approx([s for _, s in want]) or len(got) != len(want):
            differences.append((row["test_id"], want, got))
    assert differences == [], differences
