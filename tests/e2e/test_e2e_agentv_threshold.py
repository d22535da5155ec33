"""An eval file's ``execution.threshold``, which AgentV 4.42.4 leaves out of each result's pass or fail
(tests/fixtures/agentv-threshold: the real CLI's runs of one suite, without and with ``--threshold``).

AgentV marks each result against ``agentv eval --threshold``, else its default 0.8, and applies the suite's
``execution.threshold`` (here 0.6) only to its summary. So a result scored 0.667 is a ``quality_failure`` in
AgentV's rows, while evalstore's replay grades it against the eval file's 0.6 and passes it, its score
unchanged. The import keeps AgentV's pass and fail; the replay says why its results flip and how to keep
them (``--threshold 0.8``), and says nothing when the run was marked against the pass mark it applies.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json, results_by_test
from fixture_paths import FIXTURES_DIR

PROJECT = FIXTURES_DIR / "agentv-threshold" / "project"
PASS_MARK = "marked pass or fail against another pass mark than this replay's 0.6"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy)
    (copy / ".git").mkdir()  # the repository root AgentV ran in
    monkeypatch.chdir(copy)
    return copy


def _imported(db: str, project: Path, run: str) -> str:
    eval_file = str(project / "evals" / "trivia.eval.yaml")
    return ok_json(cli(db, "import", str(project / "runs" / run), "--eval", eval_file, "--json"))["run_id"]


def _flips(replay: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {f["test_id"]: f["flip"] for f in replay["comparison"]["flipped"]}


def test_a_replay_says_why_an_agentv_run_marked_against_its_default_flips(project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = _imported(db, project, "suite-threshold")
    # AgentV's own pass and fail, kept: hamlet scored 0.667 and failed against AgentV's default 0.8.
    hamlet = results_by_test(db, imported)["hamlet"]
    assert (round(hamlet["score"], 3), hamlet["passed"], hamlet["status"]) == (0.667, False, "quality_failure")

    replayed = cli(db, "replay", imported, "--json")
    assert _flips(ok_json(replayed, 1)) == {"hamlet": "fail->pass"}  # swallow fails both ways: exit 1
    (warning,) = [line for line in replayed.stderr.splitlines() if PASS_MARK in line]
    assert warning.startswith("warning: 1 result of run ") and "hamlet: score 0.667, failed" in warning
    assert "--threshold 0.8 keeps AgentV's pass and fail" in warning

    kept = cli(db, "replay", imported, "--threshold", "0.8", "--json")
    assert _flips(ok_json(kept, 1)) == {}
    assert "pass mark" not in kept.stderr  # the pass mark was chosen


def test_a_replay_of_an_agentv_run_marked_against_the_eval_files_pass_mark_says_nothing(
    project: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = _imported(db, project, "cli-threshold")  # `agentv eval --threshold 0.6`
    assert results_by_test(db, imported)["hamlet"]["passed"] is True
    replayed = cli(db, "replay", imported, "--json")
    assert _flips(ok_json(replayed, 1)) == {}
    assert "pass mark" not in replayed.stderr
