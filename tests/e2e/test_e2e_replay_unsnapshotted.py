"""An AgentV run whose tests ran in a workspace, imported and replayed (the real AgentV 4.42.4 run of
tests/fixtures/agentv-real's ``hooks-per-test``: per-test workspaces, a code grader in each; both pass).

AgentV's results keep no snapshot of a workspace, so its code graders cannot run again. The import says so
in one line; an unchanged replay reproduces the run by carrying their recorded verdicts over (marked, with
why), and counts none of them as run; a replay that changes them cannot grade them and says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import audit, cli, ok_json

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "agentv-real"
EVAL = REAL / "project" / "evals" / "hooks-per-test.eval.yaml"
TESTS = ("p1", "p2")


@pytest.fixture
def imported(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """The run imported from an unrelated folder: its id, and the import's warnings."""
    monkeypatch.chdir(tmp_path)
    out = ok_json(cli(sqlite_url, "import", str(REAL / "runs" / "hooks-per-test"), "--eval", str(EVAL), "--json"))
    assert out["tests"] == 2
    return str(out["run_id"]), list(out["warnings"])


def _verdict(db: str, run: str, test_id: str) -> dict[str, Any]:
    (test,) = audit(db, run, test_id)["tests"]
    (verdict,) = test["verdicts"]
    return verdict


def test_the_import_says_in_one_line_that_a_replay_cannot_run_the_workspace_graders(
    imported: tuple[str, list[str]],
) -> None:
    _, warnings = imported
    (said,) = [w for w in warnings if "ran in a workspace" in w]
    assert said == (
        "2 tests (p1, p2) ran in a workspace, of which AgentV's results keep no snapshot: a replay of this run "
        "cannot run their graders that work in it (code-grader), which takes a run recorded with `evalstore run` "
        "(it snapshots each test's workspace); a replay that leaves such a grader unchanged carries its recorded "
        "verdict over, one that changes it records an execution error"
    )
    assert "\n" not in said


def test_an_unchanged_replay_carries_the_workspace_graders_verdicts_over(
    sqlite_url: str, imported: tuple[str, list[str]]
) -> None:
    """Before, each code grader was an execution error ("Code grader cannot run: the run stored no workspace
    snapshot"): pass -> error, exit 1, and the summary counted them as run."""
    run, _ = imported
    replayed = cli(sqlite_url, "replay", run, "--json")
    out = ok_json(replayed)  # exit 0: the run's verdicts, both passing
    assert out["failed"] == [] and (out["regraded"], out["carried_over"]) == (2, 0)
    assert out["reuse"] == {"code_ran": 0, "code_reused": 0, "code_not_run": 0, "code_carried": 2, "judge_reused": 0}
    assert out["comparison"]["overall"]["counts"]["both_pass"] == 2
    assert (
        "warning: 2 tests (p1, p2) ran in a workspace the run holds no snapshot of (AgentV's results keep none), "
        "so their graders that work in it cannot run again: their recorded verdicts are carried over (code-grader)"
    ) in replayed.stderr.splitlines()
    for test_id in TESTS:
        verdict = _verdict(sqlite_url, out["run_id"], test_id)
        assert (verdict["score"], verdict["verdict"], verdict["status"]) == (1, "pass", "ok"), verdict
        assert verdict["origin"] == "carried" and not verdict["grader_calls"]
        assert (
            "carried: the run holds no snapshot of this test's workspace (AgentV's results keep none, and evalstore "
            "runs took none before snapshots), so a grader working in it cannot run again"
        ) in verdict["evidence"]

    text = cli(sqlite_url, "replay", run)
    assert text.exit_code == 0, text.stderr
    assert ": 0 run, 0 reused from recorded executions, 2 verdicts carried over; judge replies reused: 0" in text.stdout


def test_a_replay_that_changes_a_workspace_grader_fails_it_saying_why(
    sqlite_url: str, imported: tuple[str, list[str]]
) -> None:
    run, _ = imported
    replayed = cli(sqlite_url, "replay", run, "--eval", str(EVAL), "--json")
    out = ok_json(replayed, 1)  # the gate: a regraded test with an execution error cannot pass
    assert out["reuse"] == {"code_ran": 0, "code_reused": 0, "code_not_run": 2, "code_carried": 0, "judge_reused": 0}
    assert (
        "warning: 2 tests (p1, p2) ran in a workspace the run holds no snapshot of (AgentV's results keep none), "
        "so their graders that work in it cannot run again: this replay changes code-grader (--eval), so it is "
        "graded without the workspace: an execution error (an unchanged replay carries the recorded verdict)"
    ) in replayed.stderr.splitlines()
    for test_id in TESTS:
        verdict = _verdict(sqlite_url, out["run_id"], test_id)
        assert (verdict["status"], verdict["origin"]) == ("execution_error", "graded"), verdict
        assert verdict["assertions"][0]["text"].startswith(
            "Code grader cannot run: the run stored no workspace snapshot for this test (imported from AgentV"
        )
    text = cli(sqlite_url, "replay", run, "--eval", str(EVAL))
    assert ": 0 run, 0 reused from recorded executions, 2 could not run; judge replies reused: 0" in text.stdout


def test_a_replay_of_the_replay_carries_them_again(sqlite_url: str, imported: tuple[str, list[str]]) -> None:
    """A replay of the replay regrades the same transcripts, of which the import holds no workspace either: the
    verdicts its parent carried are carried on, once more saying why, once."""
    run, _ = imported
    first = ok_json(cli(sqlite_url, "replay", run, "--json"))
    again = ok_json(cli(sqlite_url, "replay", first["run_id"], "--json"))
    assert again["reuse"]["code_carried"] == 2 and again["failed"] == []
    for test_id in TESTS:
        verdict = _verdict(sqlite_url, again["run_id"], test_id)
        assert (verdict["verdict"], verdict["origin"]) == ("pass", "carried")
        assert verdict["evidence"] == _verdict(sqlite_url, first["run_id"], test_id)["evidence"]
