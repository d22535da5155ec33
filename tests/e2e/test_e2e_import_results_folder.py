"""``evalstore import`` of AgentV's results folder: every run in it, each a run of its own.

`agentv eval run` without `--output` writes each run to `.agentv/results/runs/<experiment>/<timestamp>/`; a user
who knows AgentV's folder (its `results` and `compare` commands read it) names it, not one timestamp. Once that
was refused as "not an AgentV result directory". Now each run there is imported as if named alone, oldest
first, and importing the folder again writes nothing but the runs AgentV has added since. The runs are the real
AgentV 4.42.4's (tests/fixtures/agentv-results-folder); each command the installed console script in a real
subprocess.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import evalstore
from fixture_paths import FIXTURES_DIR

PROJECT = FIXTURES_DIR / "agentv-results-folder" / "project"
RUNS = sorted(p.name for p in (PROJECT / ".agentv" / "results" / "runs" / "default").iterdir())


@pytest.mark.parametrize("folder", [".agentv/results/runs/default", ".agentv/results"])
def test_every_run_of_agentvs_results_folder_is_imported_once(tmp_path: Path, folder: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    first = evalstore(db, "import", folder, cwd=project)
    assert first.returncode == 0, first.stderr
    assert f"{folder} holds 2 AgentV runs: each is imported as a run of its own, oldest first" in first.stderr
    imported = [line for line in first.stdout.splitlines() if line.startswith("imported ")]
    assert [line.split(" from ")[1].split(" as run ")[0] for line in imported] == [
        f".agentv/results/runs/default/{run}" for run in RUNS
    ]
    # Each is the run importing its folder alone makes; the folder again writes nothing.
    alone = json.loads(evalstore(db, "import", f".agentv/results/runs/default/{RUNS[0]}", "--json", cwd=project).stdout)
    again = json.loads(evalstore(db, "import", folder, "--json", cwd=project).stdout)
    assert [r["already_imported"] for r in again] == [True, True]
    assert again[0]["run_id"] == alone["run_id"] and alone["already_imported"]
    assert len({r["run_id"] for r in again}) == 2
    listed = json.loads(evalstore(db, "runs", "--json", cwd=project).stdout)
    assert len(listed) == 2


def test_a_folder_with_no_run_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "empty" / "runs" / "default").mkdir(parents=True)
    refused = evalstore(f"sqlite:///{tmp_path / 'store.db'}", "import", "empty", cwd=tmp_path)
    assert refused.returncode == 2
    assert "not an AgentV result directory" in refused.stderr
