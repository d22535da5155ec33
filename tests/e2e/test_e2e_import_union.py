"""A plain import (no ``--eval``) grades with every test's own eval file, so an unchanged replay regrades all.

The run is AgentV's own (tests/fixtures/agentv-example-runs/runs/assert: four tests, deterministic graders),
its example folder copied without the repository-root targets file, so the replay needs no judge.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from agentv_examples import CORPUS, RUNS, expected_scores, rows
from e2e_helpers import audit, cli, ok_json

SUITE = "assert"
FOLDER = "examples/features/assert"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example as its own repository (AgentV names the eval relative to it), the run inside it; the
    import and the replay run from the example's folder, as AgentV did."""
    root = tmp_path / "repo"
    shutil.copytree(CORPUS / FOLDER, root / FOLDER)
    (root / ".git").mkdir()
    shutil.copytree(RUNS / "runs" / SUITE, root / "run")
    monkeypatch.chdir(root / FOLDER)
    return root


def replayed_scores(db: str, run: str) -> dict[str, list[tuple[str, float, str]]]:
    out = {}
    for row in rows(SUITE):
        (test,) = audit(db, run, row["test_id"])["tests"]
        out[row["test_id"]] = [(v["grader"], float(v["score"]), v["origin"]) for v in test["verdicts"]]
    return out


def test_the_eval_file_agentv_ran_is_found_from_the_repository_and_every_test_regraded(
    sqlite_url: str, project: Path
) -> None:
    out = ok_json(cli(sqlite_url, "import", str(project / "run"), "--json"))
    assert out["eval_path"] == str(project / FOLDER / "evals" / "dataset.eval.yaml")
    result = cli(sqlite_url, "replay", out["run_id"], "--json")
    new = ok_json(result, 0, 1)["run_id"]
    assert "carried over" not in result.stderr
    for row in rows(SUITE):
        got = replayed_scores(sqlite_url, new)[row["test_id"]]
        assert [(s, o) for _, s, o in got] == [(s, "graded") for _, s in expected_scores(row)], row["test_id"]


def test_without_the_eval_file_the_suite_is_the_union_of_every_tests_own_copy(sqlite_url: str, project: Path) -> None:
    (project / FOLDER / "evals" / "dataset.eval.yaml").unlink()
    out = ok_json(cli(sqlite_url, "import", str(project / "run"), "--json"))
    assert out["eval_path"].endswith("/task/EVAL.yaml")
    new = ok_json(cli(sqlite_url, "replay", out["run_id"], "--json"), 0, 1)["run_id"]
    scores = replayed_scores(sqlite_url, new)
    assert {origin for graded in scores.values() for _, _, origin in graded} == {"graded"}
    for row in rows(SUITE):
        assert [s for _, s, _ in scores[row["test_id"]]] == [s for _, s in expected_scores(row)], row["test_id"]
    # A replay of the replay loads the same union from its snapshot.
    again = ok_json(cli(sqlite_url, "replay", new, "--json"), 0, 1)["run_id"]
    assert {o for graded in replayed_scores(sqlite_url, again).values() for _, _, o in graded} == {"graded"}


def test_a_test_the_eval_lacks_is_carried_over_and_the_replay_says_which_and_why(
    sqlite_url: str, project: Path
) -> None:
    (project / FOLDER / "evals" / "dataset.eval.yaml").unlink()
    first = rows(SUITE)[0]["test_id"]
    (project / "run" / rows(SUITE)[0]["task_dir"] / "EVAL.yaml").unlink()
    out = ok_json(cli(sqlite_url, "import", str(project / "run"), "--json"))
    result = cli(sqlite_url, "replay", out["run_id"], "--json")
    new = ok_json(result, 0, 1)["run_id"]
    assert f"1 test carried over unchanged, not regraded: the eval has no test {first}" in result.stderr
    origins = {t: {o for _, _, o in graded} for t, graded in replayed_scores(sqlite_url, new).items()}
    assert origins.pop(first) == {"carried"}
    assert all(o == {"graded"} for o in origins.values()), origins
