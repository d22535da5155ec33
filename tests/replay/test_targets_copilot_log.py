"""The ``copilot-log`` target: Copilot CLI sessions on disk read into the messages, tool calls, usage,
duration and start time AgentV 4.42.4's own provider made of them (tests/fixtures/agentv-copilot-log)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import check_target, run_target

FIXTURE = Path(__file__).parent.parent / "fixtures" / "agentv-copilot-log"
AGENTV = json.loads((FIXTURE / "agentv-responses.json").read_text("utf-8"))
OLDER, NEWER = "0f6c1d7e-0000-4222-8333-944455556666", "0f6c1d7e-1111-4222-8333-944455556666"


@pytest.fixture
def state(tmp_path) -> Path:
    """The sessions copied, their events' times set as when AgentV read them (a checkout does not keep them)."""
    folder = tmp_path / "session-state"
    shutil.copytree(FIXTURE / "session-state", folder)
    for session, day in ((OLDER, 19), (NEWER, 20)):
        stamp = datetime(2026, 11, day, 9, 0).timestamp()
        os.utime(folder / session / "events.jsonl", (stamp, stamp))
    return folder


def wire(messages: list[Message]) -> list[dict]:
    """evalstore's messages in AgentV's spelling (``toolCalls``), to compare with its output."""
    out = []
    for message in messages:
        data = message.model_dump(exclude_none=True)
        if "tool_calls" in data:
            data["toolCalls"] = data.pop("tool_calls")
        out.append(data)
    return out


@pytest.mark.parametrize("name", sorted(AGENTV))
def test_sessions_read_as_agentv_reads_them(name, state, tmp_path) -> None:
    expected = AGENTV[name]
    fields = {**expected["fields"], "session_state_dir": str(state)}
    outcome = run_target(
        {"name": name, "provider": "copilot-log", **fields},
        EvalTest(id="t", input=[Message(role="user", content="ignored")]),
        workspace=tmp_path / "ws",
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    assert wire(outcome.messages) == expected["output"]
    assert outcome.token_usage == expected.get("tokenUsage")
    if "durationMs" in expected:  # else AgentV has none; evalstore records how long the read took
        assert outcome.duration_ms == expected["durationMs"]
    if expected.get("startTime"):
        assert outcome.start_time == expected["startTime"]
    # The session's ``files/`` as AgentV's synthetic new-file diffs (names sorted, .git and node_modules
    # skipped, a file with a NUL left out); the older session has none.
    assert outcome.file_changes == expected.get("fileChanges")


def test_a_session_dir_and_the_errors(state, tmp_path) -> None:
    target = {"name": "log", "provider": "copilot-log", "session_dir": str(state / NEWER)}
    outcome = run_target(target, EvalTest(id="t", input=[]), workspace=tmp_path, eval_dir=tmp_path)
    assert outcome.output_text == "Top months: Feb (250), Jan (100)."
    missing = run_target(
        {**target, "session_dir": str(tmp_path / "nowhere")},
        EvalTest(id="t", input=[]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert missing.status == "error" and "Failed to read Copilot session transcript at" in (missing.error or "")
    none = run_target(
        {"name": "log", "provider": "copilot-log", "discover": "latest", "session_state_dir": str(tmp_path / "empty")},
        EvalTest(id="t", input=[]),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert (
        none.error == f"target 'log': No Copilot CLI sessions found. Check that sessions exist in {tmp_path / 'empty'}"
    )
    for fields, reason in (
        ({}, 'requires one of: sessionDir, sessionId, or discover="latest"'),
        ({"discover": "first"}, 'discover must be "latest" (got "first")'),
    ):
        with pytest.raises(TargetConfigError) as info:
            check_target({"name": "log", "provider": "copilot-log", **fields}, eval_dir=tmp_path)
        assert reason in str(info.value)


def test_a_run_grades_the_session_files_as_file_changes(state, tmp_path) -> None:
    """``evalstore run`` appends what the provider reports to the workspace's file_changes (AgentV's
    orchestrator.ts:2004): a code grader reading ``file_changes`` sees the session's ``report.csv``."""
    import sys

    from evalstore import RunOptions, record_run
    from evalstore.store import EventStore

    project = tmp_path / "project"
    (project / ".agentv").mkdir(parents=True)
    targets = {"targets": [{"name": "log", "provider": "copilot-log", "session_dir": str(state / NEWER)}]}
    (project / ".agentv" / "targets.yaml").write_text(json.dumps(targets), encoding="utf-8")
    (project / "check.py").write_text(
        "import json, sys\n"
        "changes = json.load(sys.stdin).get('file_changes') or ''\n"
        "print(json.dumps({'score': 1.0 if '+++ b/report.csv' in changes and '+++ b/B.md' in changes else 0.0}))\n",
        encoding="utf-8",
    )
    eval_file = project / "session.eval.yaml"
    eval_file.write_text(
        "name: session-files\nexecution:\n  target: log\ntests:\n  - id: t\n    input: ignored\n    assertions:\n"
        f"      - name: saw-report\n        type: code-grader\n        command: [{json.dumps(sys.executable)}, check.py]\n",
        encoding="utf-8",
    )
    store = EventStore.open(f"sqlite:///{tmp_path / 'store.db'}")
    outcome = record_run(store, eval_file, RunOptions(workdir=tmp_path / "ws"))
    (scored,) = outcome.results
    assert (scored.status, scored.score) == ("ok", 1.0), scored.error
