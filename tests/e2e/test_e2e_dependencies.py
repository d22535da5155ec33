"""``depends_on`` and ``on_dependency_failure``: ``evalstore run`` orders and skips tests as AgentV 4.42.4's
orchestrator does (waves; only a dependency's execution error counts; skip/fail/run), and refuses a graph
``agentv eval`` refuses before anything is stored."""

from __future__ import annotations

import sys
from pathlib import Path

from e2e_helpers import evalstore, no_store, ok_json, one_line_error, write_cli_agent

# Logs each call, then fails (exit 1) when asked to "boom", else answers "done".
AGENT = """\
import pathlib, sys, time
prompt = pathlib.Path(sys.argv[1]).read_text().strip()
log = pathlib.Path(sys.argv[3]) / "calls.log"
with log.open("a") as f:
    f.write(prompt + " start\\n")
time.sleep(0.2 if prompt == "slow" else 0)
with log.open("a") as f:
    f.write(prompt + " end\\n")
if prompt == "boom":
    sys.exit(1)
pathlib.Path(sys.argv[2]).write_text("done")
"""

TESTS = """\
  - id: slow-setup
    input: slow
  - id: after-setup
    input: after
    depends_on: [slow-setup]
  - id: broken
    input: boom
  - id: skipped
    input: skipped
    depends_on: [broken, slow-setup]
  - id: failed
    input: failed
    depends_on: [broken]
    on_dependency_failure: fail
  - id: run-anyway
    input: anyway
    depends_on: [broken]
    on_dependency_failure: run
  - id: chained
    input: chained
    depends_on: [skipped]
"""


def _project(root: Path, tests: str) -> Path:
    write_cli_agent(root, AGENT)
    eval_file = root / "deps.eval.yaml"
    head = "execution:\n  target: agent\nassertions:\n  - type: contains\n    value: done\ntests:\n"
    # Every test has criteria (AgentV skips a test with nothing of its own to grade).
    eval_file.write_text(head + tests.replace("    input:", "    criteria: c\n    input:"))
    return eval_file


def test_dependencies_run_in_waves_and_a_failed_one_skips_fails_or_runs_its_dependents(tmp_path: Path) -> None:
    root = tmp_path / "p"
    eval_file = _project(root, TESTS)
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = ok_json(evalstore(db, "run", str(eval_file), "--workers", "4", "--json", cwd=tmp_path), 1)
    by_id = {r["test_id"]: r for r in out["results"]}
    assert (by_id["slow-setup"]["status"], by_id["after-setup"]["score"]) == ("ok", 1.0)
    assert by_id["broken"]["status"] == "execution_error"
    assert by_id["run-anyway"]["score"] == 1.0
    # AgentV's words; only execution errors count, so `slow-setup` is not named.
    assert by_id["skipped"]["error"] == "Skipped: dependency failed (broken)"
    assert by_id["failed"]["error"] == "Failed: dependency failed (broken)"
    assert by_id["chained"]["error"] == "Skipped: dependency failed (skipped)"
    assert all(by_id[t]["status"] == "execution_error" for t in ("skipped", "failed", "chained"))

    calls = (root / "calls.log").read_text().splitlines()
    assert {line.split()[0] for line in calls} == {"slow", "after", "boom", "anyway"}  # the agent never saw the others
    # With four workers, `after` still waits for the slow test it depends on to end.
    assert calls.index("slow end") < calls.index("after start")


# A code grader that crashes: a message on stderr, exit 1 (evalstore's execution error, AgentV's quality failure).
CRASH = "import sys\nsys.stdin.read()\nsys.exit(\"grader crashed: KeyError: 'expected'\")\n"
CRASH_TESTS = """\
  - id: first
    input: {first}
    assertions:
      - name: crash
        type: code-grader
        command: [{py}, crash.py]
  - id: after-first
    input: after
    depends_on: [first]
  - id: later
    input: later
"""


def test_a_crashed_code_grader_neither_stops_its_dependents_nor_halts_the_run_as_an_agent_error_does(
    tmp_path: Path,
) -> None:
    """AgentV 4.42.4 scores a code grader that exits 1 with stderr 0 (its test a `quality_failure`), so the test
    depending on it runs and `fail_on_error` halts nothing; evalstore's status for that test is
    `execution_error` (the grader left out of the score, labelled `quality_failure_in_agentv`), which once did
    both. An agent that fails is AgentV's execution error: it still does both
    (tests/e2e/test_e2e_agentv_grader_error.py holds the same suites to AgentV's runs)."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    by_first = {}
    for first in ("hello", "boom"):
        root = tmp_path / first
        eval_file = _project(root, CRASH_TESTS.format(first=first, py=sys.executable))
        (root / "crash.py").write_text(CRASH)
        eval_file.write_text(eval_file.read_text().replace("execution:\n", "execution:\n  fail_on_error: true\n", 1))
        out = ok_json(evalstore(db, "run", str(eval_file), "--workers", "1", "--json", cwd=tmp_path), 1)
        by_first[first] = ({r["test_id"]: r for r in out["results"]}, (root / "calls.log").read_text().split())

    (crashed, calls) = by_first["hello"]
    assert (crashed["first"]["status"], crashed["first"]["error"]) == (
        "execution_error",
        "crash: Code grader failed: exited with code 1",
    )
    assert [crashed[t]["status"] for t in ("after-first", "later")] == ["ok", "ok"]
    assert {"after", "later"} <= set(calls)  # the agent was asked both

    (failed, calls) = by_first["boom"]
    assert failed["first"]["status"] == "execution_error"
    assert failed["after-first"]["error"] == "Skipped: dependency failed (first)"
    assert failed["later"]["error"] == "Halted: execution error encountered with fail_on_error enabled"
    assert {"after", "later"}.isdisjoint(calls)


def test_a_graph_agentv_refuses_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    cases = {
        "unknown": ("  - id: a\n    input: x\n    depends_on: [nope]\n", "Test 'a' depends on 'nope', but no test"),
        "self": ("  - id: a\n    input: x\n    depends_on: [a]\n", "Test 'a' depends on itself"),
        "cycle": (
            "  - id: a\n    input: x\n    depends_on: [b]\n  - id: b\n    input: y\n    depends_on: [a]\n",
            "Circular dependency detected: a → b → a",
        ),
    }
    for name, (tests, message) in cases.items():
        eval_file = _project(tmp_path / name, tests)
        line = one_line_error(evalstore(db, "run", str(eval_file), cwd=tmp_path))
        assert message in line and str(eval_file) in line and "depends_on" in line
    assert no_store(db)


def test_validate_warns_about_what_agentv_drops(tmp_path: Path) -> None:
    eval_file = _project(
        tmp_path / "v",
        "  - id: a\n    input: x\n  - id: b\n    input: y\n    depends_on: [a, 3]\n    on_dependency_failure: later\n",
    )
    out = ok_json(evalstore(f"sqlite:///{tmp_path / 's.db'}", "validate", str(eval_file), "--json", cwd=tmp_path))
    (checked,) = out["files"]
    assert checked["ok"] and checked["tests"] == 2
    assert any("depends_on" in w and "ignored" in w for w in checked["warnings"])
    assert any("on_dependency_failure" in w for w in checked["warnings"])
