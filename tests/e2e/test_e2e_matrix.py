"""A run of several targets (AgentV's matrix: ``execution.targets``, or ``--target`` given more than once).

AgentV 4.42.4 (apps/cli/src/commands/eval/run-eval.ts, ``prepareFileMetadata`` and the file loop) runs every
test against each target, one result per test per target (``target`` in each row), limiting a test to the
targets its own ``execution.targets`` names; ``--target`` on the command line replaces the eval's list, and
one name is a run of that target alone. evalstore records the whole matrix as one run, its results keyed by
(test, target, attempt); ``compare RUN@A RUN@B`` pairs two targets test by test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json, one_line_error

from evalstore.store import EventStore

AGENT = """\
import sys
target, prompt = sys.argv[1], sys.argv[2]
# Target `b` repeats the prompt in upper case: one of the greeting's graders passes for `a`, both for `b`.
print("answer from " + target + ": " + (prompt.upper() if target == "b" else prompt))
"""


def _project(tmp_path: Path, execution: str) -> Path:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / ".agentv").mkdir()
    targets = "".join(
        f"  - name: {name}\n    provider: cli\n"
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / 'agent.py'))}, {name}, '{{PROMPT}}']\n"
        for name in ("a", "b", "c")
    )
    (tmp_path / ".agentv" / "targets.yaml").write_text("targets:\n" + targets)
    (tmp_path / "m.eval.yaml").write_text(
        f"execution: {execution}\n"
        "tests:\n"
        "  - id: greet\n    input: hello\n"
        "    assertions: [{type: contains, value: answer}, {type: contains, value: HELLO}]\n"
        "  - id: only-b\n    input: bye\n    execution: {targets: [b]}\n"
        "    assertions: [{type: contains, value: BYE}]\n"
    )
    return tmp_path / "m.eval.yaml"


def _keys(out: dict) -> list[tuple[str, str, float]]:
    return sorted((r["test_id"], r["target"], r["score"]) for r in out["results"])


def test_execution_targets_run_every_test_against_each_target_in_one_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    eval_file = _project(tmp_path, "{targets: [a, b]}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = ok_json(cli(db, "run", str(eval_file), "--json"), 1)
    # A test limited to `b` by its own execution.targets runs against b only.
    assert _keys(out) == [("greet", "a", 0.5), ("greet", "b", 1.0), ("only-b", "b", 1.0)]
    table = cli(db, "run", str(eval_file))
    assert "greet@a" in table.output and "greet@b" in table.output and "only-b@b" in table.output
    assert "1/3 passed" not in table.output and "2/3 passed" in table.output
    store = EventStore.open(db)
    started = next(iter(store.read_stream(out["run_id"]))).event
    assert started.target_name is None and sorted(started.targets) == ["a", "b"]  # type: ignore[attr-defined]
    assert started.targets["b"]["provider"] == "cli"  # type: ignore[attr-defined]
    store.close()
    audited = cli(db, "audit", out["run_id"], "greet").output
    assert "  target a: {" in audited and "  target b: {" in audited

    # The whole matrix regrades as one run, each result against its own target's record.
    replay = ok_json(cli(db, "replay", out["run_id"], "--json"), 0, 1)
    assert _keys(ok_json(cli(db, "show", replay["run_id"], "--json"))) == _keys(out)
    # Two targets of the run, paired test by test (only tests both targets ran).
    compared = ok_json(cli(db, "compare", f"{out['run_id']}@a", f"{out['run_id']}@b", "--json"))
    assert compared["run_a"] == f"{out['run_id']}@a" and compared["run_b"] == f"{out['run_id']}@b"
    assert [(r["test_id"], r["score_a"], r["score_b"]) for r in compared["tests"]] == [("greet", 0.5, 1.0)]
    assert [r["test_id"] for r in compared["only_in_b"]] == ["only-b"]


def test_target_on_the_command_line_replaces_the_evals_list(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    eval_file = _project(tmp_path, "{targets: [a, b]}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    # One --target: that target alone, every test (a test's execution.targets limits it only in a matrix).
    assert _keys(ok_json(cli(db, "run", str(eval_file), "--target", "a", "--json"), 1)) == [
        ("greet", "a", 0.5),
        ("only-b", "a", 0.0),
    ]
    out = ok_json(cli(db, "run", str(eval_file), "--target", "c", "--target", "b", "--json"), 1)
    assert _keys(out) == [("greet", "b", 1.0), ("greet", "c", 0.5), ("only-b", "b", 1.0)]
    line = one_line_error(cli(db, "run", str(eval_file), "--target", "a", "--target", "nope"))
    assert "nope" in line
    # Two names of one target (use_target): results are keyed by the target they ran on, so it runs once.
    targets = tmp_path / ".agentv" / "targets.yaml"
    targets.write_text(targets.read_text() + "  - name: also-a\n    use_target: a\n")
    result = cli(db, "run", str(eval_file), "--target", "a", "--target", "also-a", "--target", "b", "--json")
    assert _keys(ok_json(result, 1)) == [("greet", "a", 0.5), ("greet", "b", 1.0), ("only-b", "b", 1.0)]
    assert "targets a, also-a are all target 'a' (use_target): it runs once" in result.stderr


def test_compare_refuses_a_target_a_run_does_not_hold(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    eval_file = _project(tmp_path, "{target: a}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    first = ok_json(cli(db, "run", str(eval_file), "--json"), 1)["run_id"]
    second = ok_json(cli(db, "run", str(eval_file), "--target", "b", "--json"), 0)["run_id"]
    # Runs of one target each, of different targets: paired by test once each side names its target.
    assert ok_json(cli(db, "compare", first, second, "--json"))["tests"] == []
    compared = ok_json(cli(db, "compare", f"{first}@a", f"{second}@b", "--json"))
    assert sorted(r["test_id"] for r in compared["tests"]) == ["greet", "only-b"]
    line = one_line_error(cli(db, "compare", f"{first}@b", f"{second}@b"))
    assert f"run {first} has no results for target 'b'; its targets: a" in line
    assert "give both sides one" in one_line_error(cli(db, "compare", f"{first}@a", second))


@pytest.mark.parametrize("trials", ["{count: 2, strategy: mean}"])
def test_trials_of_a_matrix_are_one_score_per_test_and_target(tmp_path: Path, monkeypatch, trials: str) -> None:  # type: ignore[no-untyped-def]
    eval_file = _project(tmp_path, f"{{targets: [a, b], trials: {trials}}}")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = ok_json(cli(db, "run", str(eval_file), "--json"), 1)
    assert sorted(out["trials"]) == ["greet@a", "greet@b", "only-b@b"]
    assert out["trials"]["greet@a"]["score"] == 0.5 and out["trials"]["greet@b"]["passed"] is True
