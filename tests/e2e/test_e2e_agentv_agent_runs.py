"""AgentV's coding-agent examples run by the real AgentV 4.42.4 through fake agents
(tests/fixtures/agentv-agent-runs), and by evalstore the same way: the agent is started with the same argv
and prompt, its stream gives the same transcript numbers (usage, cost, duration) and answer, and every
per-grader score equals AgentV's. An import of AgentV's run, replayed, grades the trace AgentV recorded to
the same scores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from e2e_helpers import fixture_module
from fixture_paths import FIXTURES_DIR

from evalstore.cli import main
from evalstore.replay.material import load_run
from evalstore.store import EventStore

RUNS_DIR = FIXTURES_DIR / "agentv-agent-runs"
CORPUS = FIXTURES_DIR / "agentv-examples-4.42.4"

regenerate = fixture_module("agentv_agent_runs_regenerate", RUNS_DIR / "regenerate.py")


def agentv_rows(name: str) -> dict[str, dict[str, Any]]:
    index = RUNS_DIR / "runs" / name / "index.jsonl"
    return {row["test_id"]: row for row in map(json.loads, index.read_text("utf-8").splitlines())}


def name_of(test: Any) -> str:
    return test.transcript[1].test_id


def agentv_messages(test_id: str, run: str) -> list[dict[str, Any]]:
    """The messages of AgentV's trace of a test (the transcript events of its root span)."""
    row = agentv_rows(run)[test_id]
    trace = json.loads((RUNS_DIR / "runs" / run / Path(row["answer_path"]).parent / "trace.json").read_text("utf-8"))
    events = trace["trace"]["spans"][0]["events"]
    return [e["attributes"]["agentv.transcript.message"] for e in events if e["name"] == "agentv.transcript.message"]


def tool_calls(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (call["tool"], json.dumps(call.get("input"), sort_keys=True), json.dumps(call.get("output"), sort_keys=True))
        for message in messages
        for call in message.get("tool_calls") or []
    ]


def agent_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def cli(db: str, *args: str) -> Any:
    result = CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> Path:
    """The example corpus copied out of the checkout, the fake agents first on PATH."""
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    bin_dir = regenerate.fake_bin(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    for key, value in regenerate.environment(bin_dir).items():
        monkeypatch.setenv(key, value)
    return work


@pytest.mark.parametrize("name", sorted(regenerate.RUNS))
def test_evalstore_runs_the_agent_as_agentv_did(name, corpus, tmp_path, monkeypatch) -> None:
    run = regenerate.RUNS[name]
    log = tmp_path / "agent.jsonl"
    monkeypatch.setenv("FAKE_AGENT_LOG", str(log))
    monkeypatch.chdir(corpus / run["folder"])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    targets = str(RUNS_DIR / "targets.yaml")
    cli(db, "run", run["eval"], "--target", run["target"], "--targets", targets, "--workers", "1")
    exported = cli(db, "export", "last").stdout
    ours = {row["test_id"]: row for row in map(json.loads, exported.splitlines())}
    theirs = agentv_rows(name)
    assert sorted(ours) == sorted(theirs)
    for test_id, row in theirs.items():
        mine = ours[test_id]

        def graded(scores: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
            return [(s["name"], s["type"], s["score"], s["verdict"], s["assertions"]) for s in scores]

        assert graded(mine["scores"]) == graded(row["scores"]), test_id
        assert mine["score"] == row["score"]
        compared = ("token_usage", "cost_usd", "execution_status")
        compared += ("duration_ms",) if run["duration"] == "reported" else ()
        for key in compared:
            assert mine.get(key) == row.get(key), (test_id, key)
        answer = RUNS_DIR / "runs" / name / row["answer_path"]
        assert mine["output"] == answer.read_text("utf-8"), test_id
    # the transcript's tool calls (names, arguments, results) are the ones AgentV's trace recorded
    store = EventStore.open(db)
    run_id = json.loads(cli(db, "runs", "--json").stdout)[0]["run_id"]
    material = load_run(store, run_id)
    for test in material.tests.values():
        assert test.transcript is not None
        messages = json.loads(store.get_blob(test.transcript[1].messages_sha256))
        assert tool_calls(messages) == tool_calls(agentv_messages(name_of(test), name)), name_of(test)
    # the agent was started as AgentV started it: same arguments, same prompt for each test
    expected = agent_log(RUNS_DIR / "logs" / f"{name}.agent.jsonl")
    started = agent_log(log)

    def launches(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        kept = ("argv", "prompt", "nested_session_markers", "initialize", "provider_env")
        return sorted(json.dumps({k: e[k] for k in kept if k in e}, sort_keys=True) for e in entries)

    assert launches(started) == launches(expected)


@pytest.mark.parametrize("name", sorted(regenerate.RUNS))
def test_the_repository_targets_file_starts_the_agent_alike(name, corpus, tmp_path, monkeypatch) -> None:
    """As AgentV's README runs the example: no --target and no --targets; the repository-root targets file's
    `default` chain (``use_target: ${{ AGENT_TARGET }}``) reaches the same agent target, which starts the
    agent with the same argv and prompts and grades to the same scores."""
    run = regenerate.RUNS[name]
    log = tmp_path / "agent.jsonl"
    monkeypatch.setenv("FAKE_AGENT_LOG", str(log))
    monkeypatch.setenv("AGENT_TARGET", run["target"])
    monkeypatch.setenv("GRADER_TARGET", "openai")
    for key, value in {"OPENAI_ENDPOINT": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("COPILOT_EXE", raising=False)  # the root file's copilot target names no executable
    (corpus / ".git").mkdir()  # the corpus is a repository, as AgentV's checkout is
    monkeypatch.chdir(corpus / run["folder"])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    cli(db, "run", run["eval"], "--workers", "1")
    ours = {row["test_id"]: row for row in map(json.loads, cli(db, "export", "last").stdout.splitlines())}
    for test_id, row in agentv_rows(name).items():
        assert [(s["name"], s["score"]) for s in ours[test_id]["scores"]] == [
            (s["name"], s["score"]) for s in row["scores"]
        ]

    def prompts(entries: list[dict[str, Any]]) -> list[str]:
        return sorted(json.dumps([e["argv"], e["prompt"]]) for e in entries)

    assert prompts(agent_log(log)) == prompts(agent_log(RUNS_DIR / "logs" / f"{name}.agent.jsonl"))


@pytest.mark.parametrize("name", sorted(regenerate.RUNS))
def test_a_replay_of_agentvs_run_grades_its_recorded_trace_alike(name, corpus, tmp_path, monkeypatch) -> None:
    run = regenerate.RUNS[name]
    monkeypatch.chdir(corpus / run["folder"])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    targets = str(RUNS_DIR / "targets.yaml")
    cli(db, "import", str(RUNS_DIR / "runs" / name), "--eval", run["eval"], "--targets", targets)
    cli(db, "replay", "last")
    replayed = {row["test_id"]: row for row in map(json.loads, cli(db, "export", "last").stdout.splitlines())}
    for test_id, row in agentv_rows(name).items():
        assert [(s["name"], s["score"]) for s in replayed[test_id]["scores"]] == [
            (s["name"], s["score"]) for s in row["scores"]
        ], test_id
