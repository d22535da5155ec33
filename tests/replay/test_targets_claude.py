"""The ``claude-cli`` target (and ``claude``, ``cc-mirror``) against a fake Claude Code
(``tests/fake_agents/fake_claude.py``, which speaks ``--output-format stream-json``): started with AgentV
4.42.4's argv, stdin, environment and folder, its event stream read into the messages, tool calls and usage
AgentV reads from it, and its failures worded as AgentV words them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from evalstore.replay.content import FileBlock, Message, TextBlock
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import check_target, run_target
from evalstore.replay.targets.claude_cli import read_stream

FAKE = Path(__file__).parent.parent / "fake_agents" / "fake_claude.py"


@pytest.fixture
def log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "agent-log.jsonl"
    monkeypatch.setenv("FAKE_AGENT_LOG", str(path))
    return path


def started(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def a_test(*blocks: object, test_id: str = "t1") -> EvalTest:
    content = list(blocks) if len(blocks) != 1 or not isinstance(blocks[0], str) else blocks[0]
    return EvalTest(id=test_id, input=[Message(role="user", content=content)])  # type: ignore[arg-type]


def claude(**fields: object) -> dict[str, object]:
    return {"name": "claude", "provider": "claude-cli", "executable": str(FAKE), **fields}


def test_claude_is_started_as_agentv_starts_it(log, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
    workspace = tmp_path / "ws"
    outcome = run_target(
        claude(model="claude-sonnet-4", max_turns=3),
        a_test("What time is it in Tokyo?"),
        workspace=workspace,
        eval_dir=tmp_path,
    )
    assert outcome.status == "ok", outcome.error
    [entry] = started(log)
    assert entry["argv"] == [
        "-p",
        "--output-format",
        "stream-json",
        "--include-partial-messages",
        "--verbose",
        "--dangerously-skip-permissions",
        "--model",
        "claude-sonnet-4",
        "--max-turns",
        "3",
    ]
    assert entry["prompt"] == "[[ ## user_query ## ]]\n\nWhat time is it in Tokyo?"
    assert entry["nested_session_markers"] == []  # a nested Claude Code would refuse to start
    assert entry["cwd"] == str(workspace)


def test_where_claude_runs_when_the_eval_has_no_workspace(log, tmp_path, monkeypatch) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    configured = tmp_path / "configured"
    configured.mkdir()
    for fields, expected in (
        ({}, here),
        ({"cwd": str(configured)}, configured),
        ({"cwd": "../configured"}, configured),
    ):
        run_target(
            claude(**fields),
            a_test("hi"),
            workspace=tmp_path / "ws",
            eval_dir=tmp_path / "evals",
            workspace_configured=False,
        )
        assert started(log)[-1]["cwd"] == str(expected)


def test_permissions_are_kept_when_asked(log, tmp_path) -> None:
    run_target(claude(bypass_permissions="false"), a_test("hi"), workspace=tmp_path, eval_dir=tmp_path)
    assert "--dangerously-skip-permissions" not in started(log)[0]["argv"]


def test_input_files_are_named_for_the_agent_to_read(log, tmp_path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    run_target(
        claude(),
        a_test(FileBlock(path=str(data)), TextBlock(text="Summarise it."), FileBlock(path="missing.txt")),
        workspace=tmp_path / "ws",
        eval_dir=tmp_path,
    )
    assert started(log)[0]["prompt"] == (
        "Read all input files:\n"
        f"* [data.csv](file://{data}).\n"
        "If any file is missing, fail with ERROR: missing-file <filename> and stop.\n"
        "Then apply system_instructions on the user query below.\n"
        "\n[[ ## user_query ## ]]\n\n"
        f'<file: path="{data}">\n\nSummarise it.\n\n<file: path="missing.txt">'
    )


def test_the_stream_becomes_agentvs_messages_tool_calls_and_usage(log, tmp_path) -> None:
    workspace = tmp_path / "ws"
    skill = workspace / ".claude" / "skills" / "acme-deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("# Acme deploy procedure\n")
    outcome = run_target(claude(), a_test("How do I deploy payments-api?"), workspace=workspace, eval_dir=tmp_path)
    assert outcome.status == "ok", outcome.error
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == [
        {
            "role": "assistant",
            "tool_calls": [{"tool": "Skill", "input": {"skill": "acme-deploy"}, "id": "toolu_skill"}],
        },
        {"role": "assistant", "content": "Per acme-deploy: Acme deploy procedure"},
    ]
    assert outcome.output_text == "Per acme-deploy: Acme deploy procedure"
    # the result event's numbers (the fake's: a function of the prompt), not the process's
    prompt = started(log)[0]["prompt"]
    seed = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)
    assert outcome.token_usage == {"input": 10 + seed % 50 + 200 + 2000, "output": 20 + seed % 30, "cached": 2000}
    assert outcome.duration_ms == 1500 + seed % 1000
    assert outcome.cost_usd == round(0.002 + (seed % 100) / 100000, 6)


def test_the_reading_of_each_event_kind() -> None:
    lines = [
        json.dumps({"type": "system", "subtype": "init"}),
        "not json",
        json.dumps({"type": "stream_event", "event": {"type": "content_block_delta"}}),
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "text", "text": "Again."},
                        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}},
                        {"type": "tool_use", "id": "t2", "name": "Grep", "input": {"pattern": "x"}},
                    ]
                },
            }
        ),
        json.dumps(
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}}
        ),
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Here:"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    ]
                },
            }
        ),
        json.dumps(
            {
                "type": "result",
                "total_cost_usd": 0.25,
                "duration_ms": 4321,
                "usage": {
                    "input_tokens": 5,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": None,
                    "output_tokens": 7,
                },
            }
        ),
    ]
    outcome = read_stream(lines)
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == [
        {
            "role": "assistant",
            "content": "Looking.\nAgain.",
            "tool_calls": [
                {"tool": "Read", "input": {"file_path": "a.py"}, "id": "t1"},
                {"tool": "Grep", "input": {"pattern": "x"}, "id": "t2"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Here:"},
                {"type": "image", "media_type": "image/png", "source": "data:image/png;base64,AAAA"},
            ],
        },
    ]
    assert outcome.output_text == "Here:"
    assert outcome.token_usage == {"input": 5, "output": 7, "cached": 0}
    assert outcome.cost_usd == 0.25 and outcome.duration_ms == 4321


@pytest.mark.parametrize(
    ("fields", "prompt", "timeout", "status", "error"),
    [
        ({}, "FAKE_FAIL", None, "error", "Claude CLI exited with code 2: fake claude: the model refused to start"),
        ({}, "FAKE_SLEEP", 1.0, "timeout", "Claude CLI timed out after 1s"),
        (
            {"executable": "no-such-claude-binary"},
            "hi",
            None,
            "error",
            "Claude CLI executable 'no-such-claude-binary' was not found on PATH. Install claude-code or ensure it is in PATH.",
        ),
    ],
)
def test_failures_are_worded_as_agentv_words_them(fields, prompt, timeout, status, error, log, tmp_path) -> None:
    outcome = run_target(claude(**fields), a_test(prompt), workspace=tmp_path, eval_dir=tmp_path, timeout=timeout)
    assert outcome.status == status and outcome.error == f"target 'claude': {error}"
    assert outcome.messages == []


def test_cc_mirror_runs_the_variants_binary(log, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    variant = tmp_path / "home" / ".cc-mirror" / "claude-zai"
    target = {"name": "cc", "provider": "cc-mirror", "variant": "claude-zai"}
    with pytest.raises(TargetConfigError, match=r'cc-mirror variant "claude-zai": .*variant\.json not found'):
        check_target(target, eval_dir=tmp_path)
    variant.mkdir(parents=True)
    (variant / "variant.json").write_text(json.dumps({"binaryPath": ""}))
    with pytest.raises(TargetConfigError, match='missing "binaryPath" field'):
        check_target(target, eval_dir=tmp_path)
    (variant / "variant.json").write_text(json.dumps({"binaryPath": str(FAKE)}))
    outcome = run_target(target, a_test("hi"), workspace=tmp_path, eval_dir=tmp_path)
    assert outcome.status == "ok", outcome.error
    assert started(log)[0]["argv"][:2] == ["-p", "--output-format"]
    # without `variant`, the target's name is the variant
    assert check_target({"name": "claude-zai", "provider": "cc-mirror"}, eval_dir=tmp_path).provider == "cc-mirror"


def test_the_fake_needs_verbose_as_claude_does(tmp_path) -> None:
    import subprocess

    done = subprocess.run(
        [str(FAKE), "-p", "--output-format", "stream-json"],
        input="hi",
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "FAKE_AGENT_LOG": ""},
    )
    assert done.returncode == 1 and "requires --verbose" in done.stderr
