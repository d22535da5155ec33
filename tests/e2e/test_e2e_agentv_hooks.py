"""Workspace hooks, isolation, the agent's cwd and ``file_changes``: evalstore against the real AgentV 4.42.4.

tests/fixtures/agentv-real/hook-logs/<suite>.jsonl is what the hooks, the agent and a code grader of the
``hooks-*`` suites logged while the real AgentV CLI ran them (regenerate.py there); ``<suite>.out`` is its
console output, runs/<suite>/ its run directory. Each test runs the same suite with ``evalstore run`` and
compares the logs entry by entry: order, cwd, stdin payload, placeholders in arguments, the files each saw,
and ``file_changes`` byte for byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import evalstore
from hook_logs import comparable, read_log

from evalstore.store import EventStore

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "agentv-real"
PROJECT = REAL / "project"
HOOK_SUITES = (
    "hooks-shared", "hooks-per-test", "hooks-fail", "hooks-fail-all",
    # a test-level `workspace` merged into the suite's, and the first test's deciding the shared one
    "hooks-test-workspace", "hooks-test-first", "hooks-only",
)  # fmt: skip


def agentv_log(suite: str) -> list[dict[str, Any]]:
    """AgentV's log, labelled with the project folder it ran in (named in its console output)."""
    out = (REAL / "hook-logs" / f"{suite}.out").read_text("utf-8")
    match = re.search(r"--output (\S+)/runs/", out)
    assert match, out[:300]
    return read_log(REAL / "hook-logs" / f"{suite}.jsonl", Path(match.group(1)) / "project")


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    lines = (REAL / "runs" / suite / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, lines)}


def run_evalstore(suite: str, tmp_path: Path) -> tuple[Any, list[dict[str, Any]], str]:
    log = tmp_path / f"{suite}.jsonl"
    db = f"sqlite:///{tmp_path / 's.db'}"
    env = {
        "HOOKS_AGENT": str(PROJECT / "hooks" / "agent.py"),
        "HOOK_LOG": str(log),
        "JUDGE_BASE_URL": "http://127.0.0.1:9",
        "JUDGE_API_KEY": "unused",
        "JUDGE_MODEL": "unused",
    }
    eval_file = PROJECT / "evals" / f"{suite}.eval.yaml"
    done = evalstore(db, "run", str(eval_file), "--workers", "1", cwd=tmp_path, env=env)
    return done, read_log(log, PROJECT), db


@pytest.mark.parametrize("suite", HOOK_SUITES)
def test_hooks_agent_and_graders_see_what_they_see_under_agentv(suite: str, tmp_path: Path) -> None:
    theirs = agentv_log(suite)
    assert theirs, "the committed AgentV log is empty"
    done, ours, _ = run_evalstore(suite, tmp_path)
    assert done.returncode in (0, 1, 2), done.stderr
    for i, (a, b) in enumerate(zip(comparable(theirs), comparable(ours), strict=False)):
        assert b == a, f"entry {i} ({a.get('role')}) differs"
    assert len(ours) == len(theirs), [e["role"] for e in ours]


def test_the_order_is_agentvs(tmp_path: Path) -> None:
    """Spelled out (the comparison above checks it too): after_each runs after the agent and before the
    graders; a shared workspace's suite hooks get `__before_all__`/`__after_all__` and no input."""
    _, ours, _ = run_evalstore("hooks-shared", tmp_path)
    roles = [(e["role"], (e.get("stdin") or {}).get("test_id") or e.get("test_id")) for e in ours]
    assert roles == [
        ("before_all", "__before_all__"),
        ("before_each", "t1"),
        ("agent", "t1"),
        ("after_each", "t1"),
        ("grader", None),
        ("before_each", "t2"),
        ("agent", "t2"),
        ("after_each", "t2"),
        ("grader", None),
        ("after_all", "__after_all__"),
    ]
    assert roles == [
        (e["role"], (e.get("stdin") or {}).get("test_id") or e.get("test_id")) for e in agentv_log("hooks-shared")
    ]
    by_role = {e["role"]: e for e in ours}
    assert by_role["before_all"]["args"] == ["<ws:shared>"], "{{workspace_path}} is filled in"
    assert by_role["after_all"]["args"] == ["__after_all__"], "a string command is split, {{test_id}} filled in"
    assert by_role["after_each"]["cwd"] == "<project>", "cwd: .. is the eval file's folder's parent"
    assert by_role["agent"]["cwd"] == "<ws:shared>", "a cli target without cwd runs in the workspace"


def test_file_changes_equal_agentvs_byte_for_byte(tmp_path: Path) -> None:
    _, ours, db = run_evalstore("hooks-per-test", tmp_path)
    theirs = [e["file_changes"] for e in agentv_log("hooks-per-test") if e["role"] == "grader"]
    mine = [e["file_changes"] for e in ours if e["role"] == "grader"]
    assert len(theirs) == 2 and mine == theirs
    for wanted in (
        "new file mode 100644\nindex 0000000..e69de29",
        "deleted file mode 100644\nindex ",
        "@@ import math",
    ):
        assert wanted in theirs[0]
    # ...and the diff stored with the transcript is the one the graders got.
    store = EventStore.open(db)
    (run,) = store.run_ids()
    stored = [e.event.file_changes for e in store.read_stream(run) if e.type == "transcript_recorded"]
    store.close()
    assert stored == theirs


def test_after_each_reset_runs_before_the_graders(tmp_path: Path) -> None:
    """hooks-per-test's after_each has `reset: fast`: the hook and the graders see the template again (AgentV
    resets to the test's baseline before the hook), while file_changes was taken before the reset."""
    _, ours, _ = run_evalstore("hooks-per-test", tmp_path)
    after_each = [e["files"] for e in ours if e["role"] == "after_each"]
    assert after_each == [["README.md", "old.txt", "src/calc.py"]] * 2
    assert after_each == [e["files"] for e in agentv_log("hooks-per-test") if e["role"] == "after_each"]


def test_failing_and_slow_setup_hooks_fail_the_same_tests(tmp_path: Path) -> None:
    done, _, db = run_evalstore("hooks-fail", tmp_path)
    assert done.returncode == 1, done.stderr
    rows = agentv_rows("hooks-fail")
    assert {t: r["execution_status"] for t, r in rows.items()} == {
        "ok": "ok",
        "broken": "execution_error",
        "slow": "execution_error",
    }
    assert rows["broken"]["failure_stage"] == "setup" and "hook refused broken" in rows["broken"]["error"]
    assert "timed out after 1500ms" in rows["slow"]["error"]
    store = EventStore.open(db)
    (run,) = store.run_ids()
    events = [e.event for e in store.read_stream(run)]
    store.close()
    scored = {e.test_id: e for e in events if e.type == "test_scored"}
    assert {t: s.status for t, s in scored.items()} == {
        "ok": "ok",
        "broken": "execution_error",
        "slow": "execution_error",
    }
    assert "before_each hook" in scored["broken"].error and "hook refused broken" in scored["broken"].error
    assert "timed out after 1500 ms" in scored["slow"].error
    # after_each failing for `ok` is a warning in AgentV (stderr "Script warning") and a recorded hook here.
    assert "Script warning: hook refused ok" in (REAL / "hook-logs" / "hooks-fail.out").read_text("utf-8")
    ran = [e for e in events if e.type == "workspace_hook_ran" and e.hook == "after_each"]
    assert [(e.test_id, e.outcome, e.exit_code) for e in ran] == [("ok", "error", 3)]
    assert scored["ok"].score == 1.0


def test_a_failing_shared_before_all_stops_the_run(tmp_path: Path) -> None:
    done, ours, _ = run_evalstore("hooks-fail-all", tmp_path)
    out = (REAL / "hook-logs" / "hooks-fail-all.out").read_text("utf-8")
    assert "exit code 2" in out and "before_all script failed: Script failed: hook refused __before_all__" in out
    assert done.returncode == 2
    assert "before_all hook" in done.stderr and "hook refused __before_all__" in done.stderr
    assert [e["role"] for e in ours] == ["before_all"], "no agent, no after_all, as under AgentV"


def test_evalstore_also_gives_hooks_the_workspace_in_their_environment(tmp_path: Path) -> None:
    """A documented difference: AgentV exports AGENTV_WORKSPACE_PATH to code graders only; evalstore to
    hooks and the agent as well (the stdin payload is the same)."""
    _, ours, _ = run_evalstore("hooks-per-test", tmp_path)
    assert {e["env_workspace"] for e in agentv_log("hooks-per-test") if e["role"] != "grader"} == {None}
    assert all(e["env_workspace"] == f"<ws:{e['stdin']['test_id']}>" for e in ours if "stdin" in e)


def test_code_grader_payload_has_every_key_agentv_sends(tmp_path: Path) -> None:
    _, ours, _ = run_evalstore("hooks-shared", tmp_path)
    theirs = {k for e in agentv_log("hooks-shared") if e["role"] == "grader" for k in e["keys"]}
    mine = {k for e in ours if e["role"] == "grader" for k in e["keys"]}
    assert "workspace_path" in theirs and "file_changes" in theirs
    assert theirs <= mine, sorted(theirs - mine)
