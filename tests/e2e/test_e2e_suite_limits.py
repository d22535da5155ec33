"""A suite's ``execution.budget_usd``, ``execution.fail_on_error`` and ``execution.targets`` in ``evalstore run``,
as AgentV 4.42.4 runs them: tests not started once the agent's cost reaches the budget, or after an execution
error, end in AgentV's execution errors (per target, as AgentV's orchestrator counts them); one listed target is
the target, several are AgentV's matrix (tests/e2e/test_e2e_matrix.py)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from e2e_helpers import evalstore, ok_json, runs

PY = sys.executable
# Answers in AgentV's cli JSON with a cost of $0.40 a call; "boom" exits 1.
AGENT = """\
import json, pathlib, sys
prompt = pathlib.Path(sys.argv[1]).read_text().strip()
if prompt == "boom":
    sys.exit(1)
out = {"output": [{"role": "assistant", "content": "done"}], "cost_usd": 0.4}
pathlib.Path(sys.argv[2]).write_text(json.dumps(out))
"""


def _project(root: Path, execution: str, prompts: list[str]) -> Path:
    (root / ".agentv").mkdir(parents=True)
    (root / "agent.py").write_text(AGENT)
    command = f'["{PY}", "{root / "agent.py"}", "{{PROMPT_FILE}}", "{{OUTPUT_FILE}}"]'
    (root / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        + "".join(f"  - name: {name}\n    provider: cli\n    command: {command}\n" for name in ("a", "b", "c"))
    )
    tests = "".join(
        f"  - id: t{i}\n    criteria: c\n    input: {p}\n    assertions: [{{type: contains, value: done}}]\n"
        for i, p in enumerate(prompts, start=1)
    )
    eval_file = root / "limits.eval.yaml"
    eval_file.write_text(textwrap.dedent(execution) + "tests:\n" + tests)
    return eval_file


def _results(root: Path, tmp_path: Path, *codes: int) -> dict[str, dict]:
    db = f"sqlite:///{tmp_path / (root.name + '.db')}"
    out = ok_json(
        evalstore(db, "run", str(root / "limits.eval.yaml"), "--workers", "1", "--json", cwd=tmp_path), *codes
    )
    return {r["test_id"]: r for r in out["results"]}


def test_no_test_starts_once_the_agent_cost_reaches_the_budget(tmp_path: Path) -> None:
    root = tmp_path / "budget"
    _project(root, "execution:\n  target: a\n  budget_usd: 1.0\n", ["x", "x", "x", "x"])
    by_id = _results(root, tmp_path, 1)
    assert [by_id[t]["status"] for t in ("t1", "t2", "t3")] == ["ok", "ok", "ok"]  # $1.20 spent after t3
    assert by_id["t4"]["status"] == "execution_error"
    assert by_id["t4"]["error"] == "Suite budget exceeded ($1.2000 / $1.0000)"


def test_fail_on_error_halts_the_tests_not_started(tmp_path: Path) -> None:
    root = tmp_path / "halt"
    _project(root, "execution:\n  target: a\n  fail_on_error: true\n", ["x", "boom", "x"])
    by_id = _results(root, tmp_path, 1)
    assert by_id["t1"]["status"] == "ok"
    assert by_id["t2"]["status"] == "execution_error"
    assert by_id["t3"]["error"] == "Halted: execution error encountered with fail_on_error enabled"


def test_without_fail_on_error_the_run_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "on"
    _project(root, "execution:\n  target: a\n", ["x", "boom", "x"])
    assert _results(root, tmp_path, 1)["t3"]["status"] == "ok"


def test_one_listed_target_is_the_target_and_several_are_a_matrix(tmp_path: Path) -> None:
    one = tmp_path / "one"
    _project(one, "execution:\n  target: a\n  targets: [{name: b}]\n", ["x"])
    db = f"sqlite:///{tmp_path / 'one.db'}"
    out = ok_json(evalstore(db, "run", str(one / "limits.eval.yaml"), "--json", cwd=tmp_path))
    assert {r["target"] for r in out["results"]} == {"b"}  # targets before target, as AgentV

    matrix = tmp_path / "matrix"
    _project(matrix, "execution:\n  targets: [a, b, c]\n", ["x"])
    db = f"sqlite:///{tmp_path / 'matrix.db'}"
    out = ok_json(evalstore(db, "run", str(matrix / "limits.eval.yaml"), "--json", cwd=tmp_path))
    assert sorted(r["target"] for r in out["results"]) == ["a", "b", "c"]
    assert len(runs(db)) == 1
    out = ok_json(evalstore(db, "run", str(matrix / "limits.eval.yaml"), "--target", "c", "--json", cwd=tmp_path))
    assert {r["target"] for r in out["results"]} == {"c"}


def test_the_renamed_budget_key_is_refused_as_agentv_refuses_it(tmp_path: Path) -> None:
    root = tmp_path / "old"
    _project(root, "execution:\n  target: a\n  total_budget_usd: 3\n", ["x"])
    out = ok_json(
        evalstore(f"sqlite:///{tmp_path / 'v.db'}", "validate", str(root / "limits.eval.yaml"), "--json", cwd=tmp_path),
        1,
    )
    (checked,) = out["files"]
    assert any("renamed to execution.budget_usd" in e for e in checked["errors"]), json.dumps(checked)
