"""What a replay's gate says about a test whose grading failed: an execution error, listed apart from the
tests below the threshold (it still exits 1: such a test cannot pass), and its grader shown as an error,
not as the 0 it recorded, in the replay's table and in ``show``'s. What ``compare`` says of a replay that
did not complete, and of a ``--cluster-by`` key the tests do not have."""

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
    (tmp_path / "run_id").write_text(run_id)
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


@pytest.fixture
def recorded_and_half(tmp_path: Path, regraded: tuple[str, Result]) -> tuple[str, str, str]:
    """The recorded run and a replay of it still ``started``: one shard of two regraded."""
    db, _ = regraded
    run_id = (tmp_path / "run_id").read_text()
    half = _run(db, "replay", run_id, "--shard", "1/2", "--targets", str(tmp_path / "targets.yaml"), "--json")
    assert half.exit_code in (0, 1) and json.loads(half.stdout)["complete"] is False, half.output
    return db, run_id, json.loads(half.stdout)["run_id"]


def test_compare_with_an_incomplete_run_says_so(recorded_and_half: tuple[str, str, str]) -> None:
    db, run_id, half = recorded_and_half
    compared = _run(db, "compare", run_id, half)
    assert compared.exit_code == 0, compared.output
    assert (
        f"run {half} (B) is incomplete (status started): only its recorded tests are compared; "
        "the others are listed as only in A"
    ) in compared.stderr.splitlines(), compared.stderr
    (done,) = [
        r["run_id"]
        for r in json.loads(_run(db, "runs", "--json").stdout)
        if r["status"] == "completed" and r["run_id"] != run_id
    ]
    assert "incomplete" not in _run(db, "compare", run_id, done).stderr


def test_cluster_by_a_key_no_test_has_is_refused_naming_the_keys(recorded_and_half: tuple[str, str, str]) -> None:
    db, run_id, _ = recorded_and_half
    for runs in ([run_id, "last"], [run_id, "last", "last"]):
        refused = _run(db, "compare", *runs, "--cluster-by", "no_such_key")
        assert refused.exit_code == 2, refused.output
        (line,) = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
        assert line.startswith("Error: --cluster-by no_such_key: no test of these runs has it; their tests have: "), (
            line
        )
        assert "clustered by" not in refused.output


def test_a_replays_json_names_the_failed_results_as_its_notes_do_with_their_attempts(tmp_path: Path) -> None:
    """Three trials of `other` below the threshold: `--json`'s `failed` lists `other`, `other#2`, `other#3`, as
    the table and the note name them (`analysis.per_test.key_label`), not `other` three times."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "targets.yaml").write_text(TARGETS)
    code = "print('{\"score\": 1}')"
    suite = EVAL.format(python=json.dumps(sys.executable), code=json.dumps(code))
    suite = suite.replace("  target: default\n", "  target: default\n  trials: {count: 3, strategy: mean}\n")
    (tmp_path / "e.eval.yaml").write_text(suite)
    targets = str(tmp_path / "targets.yaml")
    recorded = _run(db, "run", str(tmp_path / "e.eval.yaml"), "--targets", targets, "--json")
    assert recorded.exit_code == 1, recorded.output
    replayed = _run(db, "replay", json.loads(recorded.stdout)["run_id"], "--json")
    assert replayed.exit_code == 1, replayed.output
    assert json.loads(replayed.stdout)["failed"] == ["other", "other#2", "other#3"]
    assert "3 regraded tests below the threshold: other, other#2, other#3" in replayed.stderr.splitlines()
