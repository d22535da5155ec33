"""A replay's configuration (its eval, its converter swaps) is what grades its tests again: in
``evalstore assert --run REPLAY``, and in a replay of it from any folder, after its converter is gone
and after a bundle round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import EXAMPLES, evalstore, ok_json

JUDGE_VARS = ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL", "EVALSTORE_JUDGE_API_KEY_ENV")
NO_JUDGE = dict.fromkeys(JUDGE_VARS, "")


@pytest.fixture
def quickstart(tmp_path: Path) -> tuple[str, str, str]:
    """The quickstart's store, its recorded run and its replay (v2 eval, an xlsx converter swapped in)."""
    db = f"sqlite:///{tmp_path / 'qs.db'}"
    done = evalstore(db, "quickstart", cwd=tmp_path, env=NO_JUDGE)
    assert done.returncode == 0, done.stderr
    recorded, replay = ok_json(evalstore(db, "runs", "--json", cwd=tmp_path))
    return db, recorded["run_id"], replay["run_id"]


def test_assert_on_a_replay_grades_with_the_replays_eval_and_converters(
    quickstart: tuple[str, str, str], tmp_path: Path
) -> None:
    db, recorded, replay = quickstart
    shown = {r["test_id"]: r for r in ok_json(evalstore(db, "show", replay, "--json", cwd=tmp_path))["results"]}
    replay_score = shown["q3-report"]["graders"]["workbook"]
    assert replay_score == 0.75  # v2's grader on the converted workbook: 3 of 4 checks
    args = ["assert", "--run", replay, "--test", "q3-report", "--grader", "workbook"]
    done = evalstore(db, *args, cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["score"] == replay_score, done.stdout
    assert done.returncode == 0 and not result.get("evidence")  # no "configure a preprocessor" warning
    # The recorded run still grades with v1 and no xlsx converter, as a replay of it would.
    done = evalstore(db, "assert", "--run", recorded, "--test", "q3-report", "--grader", "workbook", cwd=tmp_path)
    assert done.returncode == 1 and json.loads(done.stdout)["score"] == 0.0


def test_a_replay_of_a_replay_with_a_cwd_relative_converter_runs_from_anywhere(
    quickstart: tuple[str, str, str], tmp_path: Path
) -> None:
    db, recorded, _ = quickstart
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(EXAMPLES / "preprocessors" / "scripts", here / "scripts")
    done = evalstore(db, "replay", recorded, "--preprocessor", "xlsx=python3 scripts/xlsx_to_csv.py", cwd=here)
    assert done.returncode == 0, done.stderr
    swapped = ok_json(evalstore(db, "runs", "--json", cwd=here))[-1]["run_id"]

    def scores(run: str) -> dict[str, float]:
        shown = ok_json(evalstore(db, "show", run, "--json", cwd=tmp_path))["results"]
        return {r["test_id"]: r["score"] for r in shown}

    again = evalstore(db, "replay", swapped, "--json", cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert scores(json.loads(again.stdout)["run_id"]) == scores(swapped)
    # The converter gone from disk: run from the bytes the replay recorded, and said so.
    (here / "scripts").rename(here / "moved")
    gone = evalstore(db, "replay", swapped, "--json", cwd=elsewhere)
    assert gone.returncode == 0, gone.stderr
    assert "xlsx_to_csv.py is gone: run from the bytes recorded" in gone.stderr
    assert scores(json.loads(gone.stdout)["run_id"]) == scores(swapped)
    # A bundle of the replay, imported into another store and replayed there.
    bundle = tmp_path / "bundle"
    assert evalstore(db, "export", swapped, "--format", "bundle", "-o", str(bundle), cwd=here).returncode == 0
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = evalstore(other, "import", str(bundle), cwd=elsewhere)
    assert imported.returncode == 0, imported.stderr
    moved = evalstore(other, "replay", swapped, "--json", cwd=elsewhere)
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["parent_run_id"] == swapped
