"""``evalstore replay --prompt GRADER=file://PATH`` and the options beside it: where the path is looked for,
a file that cannot be used (not UTF-8, a folder), and options that would be taken and do nothing (a grader
swapped twice, ``--graders ''``, a swap for a grader not regraded, new settings on ``--resume``): each one
line, exit 2, nothing written."""

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


def test_a_relative_prompt_path_is_the_current_folders_before_the_evals(
    suite: tuple[str, ScaleRun], judge_server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run = suite
    (run.root / "prompts" / "quality-v2.md").write_text(STRICT)
    (run.root / "evals" / "prompts").mkdir()
    (run.root / "evals" / "prompts" / "quality-v2.md").write_text(DECOY)
    replay = replayed(db, run.run_id, "--prompt", "quality=file://./prompts/quality-v2.md")
    prompts = judged_prompts(judge_server)
    assert len(prompts) == 3 and all(p.startswith("STRICT") for p in prompts), prompts
    # Recorded as found, so a replay of it from another folder grades with the same file, not the decoy.
    assert overrides(db, replay)["prompts"] == [f"quality=file://{run.root / 'prompts' / 'quality-v2.md'}"]
    monkeypatch.chdir(run.root / "evals")
    replayed(db, replay, "--graders", "quality", "--no-cache", "--targets", str(run.root / "targets.yaml"))
    assert all(p.startswith("STRICT") for p in judged_prompts(judge_server)[3:]), judged_prompts(judge_server)


def test_a_prompt_path_only_the_evals_folder_leads_to_is_still_found(
    suite: tuple[str, ScaleRun], judge_server: JudgeServer
) -> None:
    # As the eval file writes it (docs/calibration.md): ../prompts from the eval's folder, not from here.
    db, run = suite
    (run.root / "prompts" / "quality-v2.md").write_text(STRICT)
    replayed(db, run.run_id, "--prompt", "quality=file://../prompts/quality-v2.md")
    assert all(p.startswith("STRICT") for p in judged_prompts(judge_server)), judged_prompts(judge_server)


def test_a_prompt_that_is_not_utf8_is_one_line_naming_it(suite: tuple[str, ScaleRun], tmp_path: Path) -> None:
    db, run = suite
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"Grade: {{output}} \xff\xfe not UTF-8\n")
    line = refused(db, "replay", run.run_id, "--prompt", f"quality=file://{bad}")
    assert str(bad) in line and "UTF-8" in line and "--prompt quality" in line


def test_a_prompt_without_the_answer_variable_is_refused(suite: tuple[str, ScaleRun]) -> None:
    # "output" as a word is not {{output}}: the judge would never see the answer.
    db, run = suite
    (run.root / "prompts" / "blind.md").write_text("Rate the output from 0 to 1.\n")
    assert "{{output}}" in refused(db, "replay", run.run_id, "--prompt", "quality=file://prompts/blind.md")


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


def test_one_grader_swapped_twice_is_refused(suite: tuple[str, ScaleRun]) -> None:
    db, run = suite
    (run.root / "prompts" / "quality-v2.md").write_text(STRICT)
    args = ["--prompt", "quality=file://prompts/quality.md", "--prompt", "quality=file://prompts/quality-v2.md"]
    assert "--prompt quality is given more than once" in refused(db, "replay", run.run_id, *args)


@pytest.mark.parametrize("graders", ["", " , "])
def test_graders_naming_no_grader_is_refused(suite: tuple[str, ScaleRun], graders: str) -> None:
    db, run = suite
    line = refused(db, "replay", run.run_id, "--graders", graders)
    assert "--graders names no grader" in line and "quality" in line


def test_a_prompt_for_a_grader_the_replay_does_not_regrade_is_refused(suite: tuple[str, ScaleRun]) -> None:
    db, run = suite
    line = refused(db, "replay", run.run_id, "--prompt", "quality=file://prompts/quality.md", "--graders", "has-number")
    assert "--prompt quality" in line and "add quality to --graders" in line


def test_a_prompt_for_a_grader_the_parent_replay_left_out_is_refused(suite: tuple[str, ScaleRun]) -> None:
    # --graders is inherited: a replay of a replay of has-number regrades has-number only.
    db, run = suite
    narrowed = replayed(db, run.run_id, "--graders", "has-number")
    line = refused(db, "replay", narrowed, "--prompt", "quality=file://prompts/quality.md")
    assert "add quality to --graders" in line
    replayed(db, narrowed, "--prompt", "quality=file://prompts/quality.md", "--graders", "quality")


@pytest.mark.parametrize("judge", [["--judge-model", "other-model"], ["--judge-target", "judge"]])
def test_a_judge_for_a_replay_that_regrades_no_judged_grader_is_said_to_change_nothing(
    suite: tuple[str, ScaleRun], judge: list[str]
) -> None:
    db, run = suite
    warning = f"{judge[0]} changes nothing: no grader this replay regrades calls a judge"
    result = es(db, "replay", run.run_id, *judge, "--graders", "has-number")
    assert result.exit_code in (0, 1) and warning in result.stderr, result.output
    result = es(db, "replay", run.run_id, *judge, "--graders", "has-number,quality")
    assert result.exit_code in (0, 1) and warning not in result.stderr, result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--judge-model", "other-model"],
        ["--prompt", "quality=file://prompts/quality.md"],
        ["--graders", ""],
        ["--threshold", "0"],
        ["--strict", "--no-cache"],
    ],
)
def test_new_settings_on_resume_are_refused(suite: tuple[str, ScaleRun], args: list[str]) -> None:
    db, run = suite
    replay = replayed(db, run.run_id, "--graders", "has-number")
    line = refused(db, "replay", "--resume", replay, *args)
    assert "a resumed replay keeps the settings it recorded" in line
    assert all(flag in line for flag in args if flag.startswith("--")), line
