"""An Inspect export dates each regrade score by when the replay graded it, not when it is exported: the
score's history says when the regrade happened, and two exports of one replay agree on it."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixture_paths import FIXTURES_DIR

from evalstore import cli as cli_package
from evalstore.store import EventStore, make_engine

inspect_log = pytest.importorskip("inspect_ai.log")

GRADER = 'import json, sys\njson.load(sys.stdin)\nprint(json.dumps({"score": 1.0}))\n'


def _ok(db: str, *args: str) -> dict:
    result = CliRunner().invoke(cli_package.main, ["--db", db, *args, "--json"])
    assert result.exit_code in (0, 1), result.output  # a replay exits 1 when tests are below the threshold
    return json.loads(result.stdout)


def test_a_regrade_score_is_dated_when_the_replay_graded_it(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    run_id = _ok(db, "import", str(FIXTURES_DIR / "inspect" / "logs" / "arithmetic.eval"))["run_id"]
    (tmp_path / "grader.py").write_text(GRADER, encoding="utf-8")
    (tmp_path / "regrade.eval.yaml").write_text(
        "name: regrade\nassertions:\n  - name: fresh\n    type: code-grader\n    command: [python3, grader.py]\n",
        encoding="utf-8",
    )
    replay_id = _ok(db, "replay", run_id, "--eval", str(tmp_path / "regrade.eval.yaml"))["run_id"]
    store = EventStore(make_engine(f"sqlite:///{db}"))
    try:
        graded = {s.recorded_at for s in store.read_stream(replay_id) if s.type == "verdict_recorded"}
    finally:
        store.close()
    time.sleep(1.1)  # an export dated by its own clock would now differ from the grading by a second
    stamps = []
    for name in ("a.eval", "b.json"):
        out = tmp_path / name
        assert (
            CliRunner()
            .invoke(cli_package.main, ["--db", db, "export", replay_id, "--format", "inspect", "-o", str(out)])
            .exit_code
            == 0
        )
        log = inspect_log.read_eval_log(out)
        stamps.append(
            sorted(
                (str(s.id), s.epoch, s.scores["fresh"].history[-1].provenance.timestamp)
                for s in log.samples
                if s.scores and "fresh" in s.scores
            )
        )
    assert stamps[0] and stamps[0] == stamps[1]
    assert {ts for _, _, ts in stamps[0]} <= {datetime.fromisoformat(at) for at in graded}
