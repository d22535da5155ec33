"""What a replay's gate says about a test whose grading failed: an execution error, listed apart from the
tests below the threshold (it still exits 1: such a test cannot pass), and its grader shown as an error,
not as the 0 it recorded, in the replay's table and in ``show``'s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalstore import cli

TARGETS = """\
targets:
  - name: default
    provider: mock
    response: "Paris is the capital"
"""

EVAL = """\
name: geo
execution:
  target: default
tests:
  - id: capital
    input: What is the capital of France?
    assertions:
      - name: has-paris
        type: contains
        value: Paris
      - name: check
        type: code-grader
        command: [{python}, "-c", {code}]
  - id: other
    input: Anything?
    assertions:
      - name: has-berlin
        type: contains
        value: Berlin
"""


def _run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", db, *args])


@pytest.fixture
def regraded(tmp_path: Path) -> tuple[str, Result]:
    """A run where ``capital`` passes (1.000), regraded with its code grader crashing: its score stays
    1.000 (the crashed grader is left out), above the pass mark; ``other`` is below it both times."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "targets.yaml").write_text(TARGETS)
    for name, code in (("ok", "print('{\"score\": 1}')"), ("crash", "import sys; sys.exit('boom')")):
        (tmp_path / f"{name}.eval.yaml").write_text(
            EVAL.format(python=json.dumps(sys.executable), code=json.dumps(code))
        )
    targets = str(tmp_path / "targets.yaml")
    recorded = _run(db, "run", str(tmp_path / "ok.eval.yaml"), "--targets", targets, "--json")
    assert recorded.exit_code == 1, recorded.output  # `other` fails
    run_id = json.loads(recorded.stdout)["run_id"]
    return db, _run(db, "replay", run_id, "--eval", str(tmp_path / "crash.eval.yaml"), "--targets", targets)


def test_an_execution_error_is_listed_as_such_apart_from_the_tests_below_the_threshold(
    regraded: tuple[str, Result],
) -> None:
    _, replayed = regraded
    assert replayed.exit_code == 1, replayed.output
    lines = replayed.stderr.splitlines()
    assert "1 regraded test below the threshold: other" in lines, replayed.stderr
    assert "1 regraded test with an execution error (a grader failed to run; such a test cannot pass): capital" in (
        lines
    ), replayed.stderr


def test_a_grader_that_failed_to_run_shows_as_an_error_in_replay_and_show(regraded: tuple[str, Result]) -> None:
    db, replayed = regraded
    shown = _run(db, "show", "last")
    for output in (replayed.stdout, shown.stdout):
        (row,) = [line for line in output.splitlines() if line.startswith("capital ")]
        assert "check=error, has-paris=1.000" in row and "check=0.000" not in row, output
    (result,) = [
        r for r in json.loads(_run(db, "show", "last", "--json").stdout)["results"] if r["test_id"] == "capital"
    ]
    assert result["graders"]["check"] == 0.0 and result["verdicts"]["check"] == "skip"  # --json as recorded
