"""A prompt file that cannot be used (not UTF-8, a folder), named by an eval file or by
``evalstore replay --prompt GRADER=file://PATH``: one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from judge_server import JudgeServer
from scale_runs import JUDGE_KEY_ENV, ScaleRun, build

from evalstore import cli
from evalstore.store import EventStore

STRICT = "STRICT grading. Answer:\n{{output}}\n"
DECOY = "DECOY prompt beside the eval. Answer:\n{{output}}\n"


@pytest.fixture
def suite(tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ScaleRun]:
    """A run of three tests graded by an LLM grader ``quality`` (prompt in ``suite/prompts``, eval in
    ``suite/evals``), imported; the current folder is ``suite``."""
    monkeypatch.setenv(JUDGE_KEY_ENV, "k")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = EventStore.open(db)
    try:
        run = build(tmp_path / "suite", store, 3, judge_url=judge_server.base_url)
    finally:
        store.close()
    monkeypatch.chdir(run.root)
    return db, run


def es(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", db, *args])


def run_ids(db: str) -> list[str]:
    result = es(db, "runs", "--json")
    assert result.exit_code == 0, result.output
    return [r["run_id"] for r in json.loads(result.stdout)]


def refused(db: str, *args: str) -> str:
    """The one error line of a replay refused before it wrote anything."""
    before = run_ids(db)
    result = es(db, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert run_ids(db) == before
    return lines[0]


def judged_prompts(judge: JudgeServer) -> list[str]:
    return [r.user for r in judge.requests]


def replayed(db: str, *args: str) -> str:
    result = es(db, "replay", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["run_id"]


def overrides(db: str, run_id: str) -> dict:
    store = EventStore.open(db)
    try:
        from evalstore.replay.analysis.views import run_started

        return run_started(store, run_id).overrides or {}
    finally:
        store.close()


def test_a_prompt_naming_a_folder_says_it_is_a_folder(suite: tuple[str, ScaleRun]) -> None:
    db, run = suite
    line = refused(db, "replay", run.run_id, "--prompt", "quality=file://prompts")
    assert "is a folder, not a file" in line and str(run.root / "prompts") in line


def test_an_eval_whose_prompt_names_a_folder_says_it_is_a_folder(suite: tuple[str, ScaleRun]) -> None:
    db, run = suite
    folder_eval = run.root / "evals" / "folder.eval.yaml"
    folder_eval.write_text(run.v1.read_text().replace("file://../prompts/quality.md", "file://../prompts"))
    line = refused(db, "replay", run.run_id, "--eval", str(folder_eval))
    assert str(folder_eval) in line and "is a folder, not a file" in line and str(run.root / "prompts") in line


def test_an_eval_whose_prompt_is_not_utf8_says_to_save_it_as_utf8(suite: tuple[str, ScaleRun]) -> None:
    db, run = suite
    (run.root / "prompts" / "quality.md").write_bytes(b"Grade: {{output}} \xff\n")
    line = refused(db, "replay", run.run_id, "--eval", str(run.v1))
    assert str(run.root / "prompts" / "quality.md") in line and "save it as UTF-8" in line
