"""An AgentV run stopped part way (tests/fixtures/agentv-interrupted: the real AgentV 4.42.4, stopped after 3
of 8 tests). AgentV writes ``benchmark.json`` with ``planned_test_count`` before its first test and reads a run
holding fewer results as resumable; the import was ``completed`` without a word, so a regression gate on it
compared 3 tests and passed."""

from __future__ import annotations

import shutil
from pathlib import Path

from e2e_helpers import cli, ok_json, show
from fixture_paths import FIXTURES_DIR

PROJECT = FIXTURES_DIR / "agentv-interrupted" / "project"
PLANNED = "the AgentV run planned 8 test runs and holds 3: it did not finish"


def test_an_interrupted_agentv_run_is_imported_as_interrupted_at_source(tmp_path: Path) -> None:
    run_dir = tmp_path / "interrupted"
    shutil.copytree(PROJECT / "runs" / "interrupted", run_dir)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    checked = cli(db, "validate", str(run_dir))
    assert PLANNED in checked.stdout + checked.stderr

    imported = cli(db, "import", str(run_dir), "--eval", str(PROJECT / "evals" / "interrupted.eval.yaml"), "--json")
    outcome = ok_json(imported)
    assert outcome["tests"] == 3
    assert any(PLANNED in w for w in outcome["warnings"]), outcome["warnings"]
    run = show(db, outcome["run_id"])["run"]
    assert run["source_status"] == "interrupted"
    listed = cli(db, "runs").stdout
    assert "completed (interrupted at source)" in listed


def test_a_finished_agentv_run_says_nothing_of_it(tmp_path: Path) -> None:
    """The same run with every planned result: AgentV's benchmark.json at the end keeps the planned count."""
    run_dir = tmp_path / "finished"
    shutil.copytree(PROJECT / "runs" / "interrupted", run_dir)
    benchmark = run_dir / "benchmark.json"
    benchmark.write_text(benchmark.read_text().replace('"planned_test_count": 8', '"planned_test_count": 3'))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    outcome = ok_json(cli(db, "import", str(run_dir), "--json"))
    assert not any("did not finish" in w for w in outcome["warnings"])
    assert show(db, outcome["run_id"])["run"].get("source_status") is None
