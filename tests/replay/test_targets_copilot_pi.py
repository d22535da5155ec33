"""The ``copilot-cli`` and ``pi-cli`` targets against fakes of Copilot (Agent Client Protocol over stdio) and
pi (``--mode json``) in tests/fake_agents: the conversation and argv AgentV 4.42.4 has with them, their
environment, and their failures as AgentV words them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import check_target, run_target
from evalstore.replay.targets.pi_cli import messages_of, token_usage

FAKES = Path(__file__).parent.parent / "fake_agents"


@pytest.fixture
def log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "agent-log.jsonl"
    monkeypatch.setenv("FAKE_AGENT_LOG", str(path))
    return path


def started(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def a_test(*content: object) -> EvalTest:
    body = content[0] if len(content) == 1 and isinstance(content[0], str) else list(content)
    return EvalTest(id="t1", input=[Message(role="user", content=body)])  # type: ignore[arg-type]


def copilot(**fields: object) -> dict[str, object]:
    return {"name": "copilot", "provider": "copilot-cli", "executable": str(FAKES / "fake_copilot.py"), **fields}


def pi(**fields: object) -> dict[str, object]:
    return {"name": "pi", "provider": "pi-cli", "executable": str(FAKES / "fake_pi.py"), **fields}


def test_copilot_is_spoken_with_as_agentv_does(log, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_COPILOT_KEY", "sk-copilot-test")
    workspace = tmp_path / "ws"
    outcome = run_target(
        copilot(
            model="gpt-5",
            args=["--no-color"],
            system_prompt="  Be terse.  ",
            base_url="https://models.example/v1",
            subprovider="openai",
            api_key="${{ EVALSTORE_TEST_COPILOT_KEY }}",
            api_format="responses",
        ),
        a_test("What time is it?"),
        workspace=workspace,
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    [entry] = started(log)
    assert entry["argv"] == ["--acp", "--stdio", "--allow-all-tools", "--yolo", "--model", "gpt-5", "--no-color"]
    assert entry["initialize"] == {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
    }
    assert entry["cwd"] == entry["session_cwd"] == str(workspace)
    assert entry["prompt"] == ["Be terse.", "[[ ## user_query ## ]]\n\nWhat time is it?"]
    assert entry["provider_env"] == {
        "COPILOT_PROVIDER_API_KEY": "sk-copilot-test",
        "COPILOT_PROVIDER_BASE_URL": "https://models.example/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_WIRE_API": "responses",
    }
    # the shell command asked permission (allowed), ran for a measured time, and its output was kept
    [message] = outcome.messages
    [call] = message.tool_calls or []
    assert (call.tool, call.input, call.output) == (
        "Run date",
        {"command": "date"},
        {"content": "Sat Nov 28 10:00:00 UTC 2026"},
    )
    assert call.duration_ms is not None and call.duration_ms >= 15 and call.start_time and call.end_time
    assert message.content == outcome.output_text and outcome.output_text.startswith("I cannot know that reliably")
    assert outcome.token_usage is not None and set(outcome.token_usage) == {"input", "output", "cached"}
    assert outcome.cost_usd == 0.01


def test_what_copilot_saves_in_its_session_files_is_a_file_change(log, tmp_path, monkeypatch) -> None:
    """AgentV reads ``~/.copilot/session-state/<ACP session id>/files`` after the prompt (copilot-cli.ts:353)
    and reports each text file as a synthetic new-file diff (``generateNewFileDiff``)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    kept = run_target(copilot(), a_test("Hi"), workspace=tmp_path / "ws", eval_dir=tmp_path)
    assert kept.status == "ok" and kept.file_changes is None  # no session files: none
    outcome = run_target(copilot(), a_test("Save FAKE_SESSION_FILE"), workspace=tmp_path / "ws", eval_dir=tmp_path)
    assert outcome.status == "ok", outcome.error
    assert outcome.file_changes == (
        "diff --git a/report.md b/report.md\nnew file mode 100644\n--- /dev/null\n+++ b/report.md\n"
        "@@ -0,0 +1,2 @@\n+# Report\n+done"
    )


def test_a_skill_copilot_reports_completed_takes_no_time(log, tmp_path) -> None:
    skill = tmp_path / "ws" / ".claude" / "skills" / "acme-deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# Acme deploy\n")
    outcome = run_target(copilot(), a_test("How do I deploy?"), workspace=tmp_path / "ws", eval_dir=tmp_path)
    [call] = outcome.messages[0].tool_calls or []
    assert (call.tool, call.input, call.duration_ms) == ("Skill", {"skill": "acme-deploy"}, 0)


@pytest.mark.parametrize(
    ("fields", "prompt", "timeout", "status", "error"),
    [
        (
            {},
            "FAKE_FAIL",
            None,
            "error",
            "Copilot CLI exited before answering session/prompt (exit code 2): fake copilot: the model refused to start",
        ),
        ({}, "FAKE_SLEEP", 1.0, "timeout", "Copilot CLI timed out after 1s"),
        (
            {"executable": "no-such-copilot-binary"},
            "hi",
            None,
            "error",
            "Failed to start Copilot CLI executable 'no-such-copilot-binary' for target 'copilot'. spawn no-such-copilot-binary ENOENT",
        ),
    ],
)
def test_copilot_failures(fields, prompt, timeout, status, error, log, tmp_path) -> None:
    outcome = run_target(copilot(**fields), a_test(prompt), workspace=tmp_path, eval_dir=tmp_path, timeout=timeout)
    assert (outcome.status, outcome.error) == (status, f"target 'copilot': {error}")


def test_a_copilot_key_written_into_the_targets_file_is_refused(tmp_path) -> None:
    with pytest.raises(TargetConfigError, match="copilot api key must use"):
        check_target(copilot(base_url="https://x", api_key="sk-literal"), eval_dir=tmp_path)


def test_pi_is_started_as_agentv_starts_it(log, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALSTORE_TEST_PI_KEY", "sk-or-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ambient")
    monkeypatch.setenv("OPENROUTER_BASE_URL", "kept")
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    test = EvalTest(
        id="t1",
        input=[
            Message(role="system", content="sys"),
            Message(role="user", content=[FileBlock(path=str(data)), TextBlock(text="Sum it.")]),
        ],
    )
    workspace = tmp_path / "ws"
    outcome = run_target(
        pi(
            subprovider="openrouter",
            model="m/1",
            api_key="${{ EVALSTORE_TEST_PI_KEY }}",
            tools="read,bash",
            thinking="low",
            system_prompt="Be brief.",
        ),
        test,
        workspace=workspace,
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    [entry] = started(log)
    question = f'@[System]:\nsys\n\n@[User]:\n<file: path="{data}">\nSum it.'
    escaped = question.replace("@[System]:", "[[System]]:").replace("@[User]:", "[[User]]:")
    assert entry["argv"] == [
        *("--provider", "openrouter", "--model", "m/1", "--api-key", "sk-or-test"),
        *("--mode", "json", "--print", "--no-session", "--tools", "read,bash", "--thinking", "low"),
        f"@{data}",
        f"Be brief.\n\n{escaped}",
    ]
    assert entry["prompt_md"] == question and entry["cwd"] == str(workspace)
    assert "ANTHROPIC_API_KEY" not in entry["provider_env"] and "OPENROUTER_BASE_URL" in entry["provider_env"]
    # agent_end's messages, pi's tool results among them; usage summed over the assistant turns
    assert [m.role for m in outcome.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert outcome.messages[0].start_time == "2026-11-18T11:06:40.137Z"
    assert outcome.messages[1].tool_calls and outcome.messages[1].tool_calls[0].tool == "Bash"
    assert outcome.token_usage is not None and outcome.token_usage["output"] == 31 + 32
    assert set(outcome.token_usage) == {"input", "output"}
    assert outcome.cost_usd is None


def test_pi_runs_in_a_folder_of_its_own_without_a_workspace(log, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = run_target(pi(), a_test("hi"), workspace=tmp_path / "ws", eval_dir=tmp_path, workspace_configured=False)
    assert outcome.status == "ok", outcome.error
    folder = Path(started(log)[0]["cwd"])
    assert folder.name.startswith("agentv-pi-") and not folder.exists()


@pytest.mark.parametrize(
    ("fields", "prompt", "timeout", "status", "error"),
    [
        ({}, "FAKE_FAIL", None, "error", "Pi CLI exited with code 2: fake pi: no API key for the provider"),
        ({}, "FAKE_SLEEP", 1.0, "timeout", "Pi CLI timed out after 1s"),
        (
            {"executable": "no-such-pi-binary"},
            "hi",
            None,
            "error",
            "Pi CLI executable 'no-such-pi-binary' was not found. Update the target executable or add it to PATH.",
        ),
        ({"executable": "true"}, "hi", None, "error", "Pi CLI produced no output"),
        ({"executable": "echo not json"}, "hi", None, "error", "Pi CLI produced no valid JSON output"),
    ],
)
def test_pi_failures(fields, prompt, timeout, status, error, log, tmp_path) -> None:
    outcome = run_target(pi(**fields), a_test(prompt), workspace=tmp_path, eval_dir=tmp_path, timeout=timeout)
    assert (outcome.status, outcome.error) == (status, f"target 'pi': {error}")


def test_pi_events_read_as_agentv_reads_them() -> None:
    assistant = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}}],
        "usage": {"input": 10, "output": 2, "cacheRead": 0},
        "provider": "p",
        "timestamp": "2026-01-01T00:00:00Z",
    }
    events = [
        {"type": "turn_end", "message": assistant},
        {"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "final words"}]}},
        {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "read", "args": {"path": "a.py"}},
        {"type": "tool_execution_start", "toolCallId": "c2", "toolName": "bash", "args": {"command": "ls"}},
        {"type": "tool_execution_end", "toolCallId": "c2", "result": {"content": "x"}},
    ]
    messages = [m.model_dump(exclude_none=True) for m in messages_of(events)]
    assert messages == [
        {
            "role": "assistant",
            "content": "final words",
            "start_time": "2026-01-01T00:00:00Z",
            "tool_calls": [
                {"tool": "Read", "input": {"path": "a.py", "file_path": "a.py"}, "id": "c1"},
                {"tool": "Bash", "input": {"command": "ls"}, "output": {"content": "x"}, "id": "c2"},
            ],
            "metadata": {"provider": "p", "usage": {"input": 10, "output": 2, "cacheRead": 0}},
        }
    ]
    assert token_usage(events) is None  # no agent_end
    summed = token_usage(
        [{"type": "agent_end", "messages": [assistant, {**assistant, "usage": {"inputTokens": 5, "cached": 3}}]}]
    )
    assert summed == {"input": 15, "output": 2, "cached": 3}
    given = token_usage([{"type": "agent_end", "usage": {"input_tokens": 7, "reasoning": 1}, "messages": []}])
    assert given == {"input": 7, "output": 0, "reasoning": 1}
