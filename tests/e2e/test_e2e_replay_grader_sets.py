"""A replay names the parent's graders its eval does not grade, test by test (``replay/grader_sets.py``):
not a grader of a test ``--tests`` leaves alone, and one the eval dropped."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import cli, ok_json

EVAL = """\
name: sets
tests:
  - id: a
    input: say hi
    assertions:
      - {name: g-a, type: contains, value: hi}
  - id: b
    input: say bye
    assertions:
      - {name: g-b, type: contains, value: bye}
"""


def _row(test_id: str, answer: str, graders: list[str]) -> str:
    scores = [{"name": g, "type": "contains", "score": 1, "verdict": "pass"} for g in graders]
    output = [{"role": "assistant", "content": answer}]
    return json.dumps({"test_id": test_id, "target": "default", "score": 1, "output": output, "scores": scores})


def _imported(db: str, tmp_path: Path, b_graders: list[str]) -> str:
    (tmp_path / "sets.eval.yaml").write_text(EVAL, encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_row("a", "hi there", ["g-a"]) + "\n" + _row("b", "bye now", b_graders) + "\n", encoding="utf-8")
    return ok_json(cli(db, "import", str(rows), "--eval", str(tmp_path / "sets.eval.yaml"), "--json"))["run_id"]


def test_a_test_left_alone_keeps_its_graders_without_a_word(sqlite_url: str, tmp_path: Path) -> None:
    run = _imported(sqlite_url, tmp_path, ["g-b"])
    replayed = cli(sqlite_url, "replay", run, "--tests", "a", "--json")
    ok_json(replayed)
    assert "warning" not in replayed.stderr, replayed.stderr  # g-b is b's, which --tests leaves as it was


def test_a_grader_the_eval_dropped_is_named(sqlite_url: str, tmp_path: Path) -> None:
    run = _imported(sqlite_url, tmp_path, ["g-b", "tone"])
    replayed = cli(sqlite_url, "replay", run, "--json")
    new = ok_json(replayed)["run_id"]
    warnings = [line for line in replayed.stderr.splitlines() if line.startswith("warning")]
    assert warnings == [
        "warning: the parent's grader tone is not in this eval: the regraded results leave its verdicts out "
        "(add it to the eval to keep it)"
    ]
    shown = {r["test_id"]: r["graders"] for r in ok_json(cli(sqlite_url, "show", new, "--json"))["results"]}
    assert shown == {"a": {"g-a": 1.0}, "b": {"g-b": 1.0}}  # as it says: tone is not in the regrade


def test_a_test_graders_names_none_of_is_carried_over_and_gates_nothing(sqlite_url: str, tmp_path: Path) -> None:
    """`replay --graders g-a`: b has no grader g-a, so nothing of it is regraded; its parent's verdict of g-b
    (a fail) is carried over with its score, and neither counts it as regraded nor fails the gate on it.
    Before, b was counted "to regrade" and its old failure made the replay exit 1."""
    (tmp_path / "sets.eval.yaml").write_text(EVAL, encoding="utf-8")
    failing = [{"name": "g-b", "type": "contains", "score": 0, "verdict": "fail"}]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        _row("a", "hi there", ["g-a"])
        + "\n"
        + json.dumps({"test_id": "b", "target": "default", "score": 0, "output": "see you", "scores": failing})
        + "\n",
        encoding="utf-8",
    )
    run = ok_json(cli(sqlite_url, "import", str(rows), "--eval", str(tmp_path / "sets.eval.yaml"), "--json"))["run_id"]

    replayed = cli(sqlite_url, "replay", run, "--graders", "g-a", "--json")
    out = ok_json(replayed)  # exit 0: the one test regraded passes
    assert (out["failed"], out["regraded"], out["carried_over"]) == ([], 1, 1)
    said = replayed.stderr.splitlines()
    assert f"replay {out['run_id']}: 1 test to regrade" in said
    assert "1 test carried over unchanged, not regraded: --graders names none of its graders (b)" in said
    assert not [line for line in said if line.startswith("warning")], said
    shown = {r["test_id"]: r for r in ok_json(cli(sqlite_url, "show", out["run_id"], "--json"))["results"]}
    assert (shown["b"]["origin"], shown["b"]["score"], shown["b"]["passed"]) == ("carried", 0, False)
    assert shown["a"]["origin"] == "graded" and shown["a"]["passed"] is True

    text = cli(sqlite_url, "replay", run, "--graders", "g-a")
    assert text.exit_code == 0, text.stderr
    assert "below the threshold" not in text.stderr
