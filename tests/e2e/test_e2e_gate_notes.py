"""The "why" note of a test a required grader's gate set to 0, as ``show`` and ``run`` give it: which required
grader, and why (below its ``min_score``, or failed: below the threshold), whatever made the run.

tests/fixtures/agentv-required-gate (its README says how it was made) is the real AgentV 4.42.4's run of two
such tests. The note was once empty for a grader below its ``min_score`` whose own verdict is pass (every
grader passing, the test 0, nothing said); and in an import, whose rows do not say which grader is required,
it listed every grader below the threshold, one of them not required.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json
from fixture_paths import FIXTURES_DIR

GATE = FIXTURES_DIR / "agentv-required-gate"
NOTES = {
    "min-score-gate": "required grader gated scored 0.900, below its min_score 0.950: score 0",
    "required-contains": "required grader says-madrid failed (0.000, below the threshold 0.800): score 0",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "gate"
    shutil.copytree(GATE, copy)
    (copy / ".git").mkdir()  # the repository root AgentV found the targets file under
    monkeypatch.chdir(copy)
    return copy


def notes(db: str, run: str) -> dict[str, tuple[float, str]]:
    return {r["test_id"]: (r["score"], r["note"]) for r in ok_json(cli(db, "show", run, "--json"))["results"]}


def test_the_required_grader_that_zeroed_a_test_is_named_by_show_and_run(sqlite_url: str, project: Path) -> None:
    agentv = {r["test_id"]: r["score"] for r in map(json.loads, (GATE / "runs/gate/index.jsonl").open())}
    assert agentv == {"min-score-gate": 0, "required-contains": 0}
    want = {test: (0, note) for test, note in NOTES.items()}
    imported = ok_json(cli(sqlite_url, "import", "runs/gate", "--eval", "gate.eval.yaml", "--json"))["run_id"]
    assert notes(sqlite_url, imported) == want  # the eval it kept says which grader is required
    replay = ok_json(cli(sqlite_url, "replay", imported, "--json"), 1)["run_id"]
    assert notes(sqlite_url, replay) == want
    run = cli(sqlite_url, "run", "gate.eval.yaml", env={"COLUMNS": "250"})  # the why column whole
    assert run.exit_code == 1, run.output
    lines = {
        line.split()[0]: line
        for line in run.stdout.splitlines()
        if line.split()[:1] in (["min-score-gate"], ["required-contains"])
    }
    assert all(NOTES[test] in lines[test] for test in NOTES), run.stdout
    ran = ok_json(cli(sqlite_url, "run", "gate.eval.yaml", "--json"), 1)
    assert {r["test_id"]: (r["score"], r["note"]) for r in ran["results"]} == want


def test_an_import_without_its_eval_names_no_grader_as_the_required_one(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV's rows do not say which grader is required: without the eval, any of them may be, and none is
    named (not `not-required-low`, below the threshold but not required)."""
    # The rows' results only: no sidecar, no copy of the eval (task/EVAL.yaml), nothing naming the eval file.
    kept = ("timestamp", "test_id", "suite", "score", "target", "scores", "execution_status")
    rows = [{k: r[k] for k in kept} for r in map(json.loads, (GATE / "runs/gate/index.jsonl").open())]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    imported = ok_json(cli(sqlite_url, "import", str(results), "--json"))["run_id"]
    shown = notes(sqlite_url, imported)
    assert shown["required-contains"] == (
        0,
        "score 0 where its graders' mean is 0.133: set by a required grader's gate "
        "(the results do not say which grader is required)",
    )
    assert shown["min-score-gate"][1].startswith("score 0 where its graders' mean is 0.950")
