"""A code grader's target proxy, held to AgentV's protocol by AgentV's own client (tests/fixtures/agentv-target-proxy:
its README says where each file came from).

Two node graders with `target: {max_calls}` import `@agentv/sdk` (4.42.4's `createTargetClient` and
`defineCodeGrader`): `relevance.mjs` is the example of AgentV's docs ("Target Access") word for word, reading
`response.rawText`; `protocol.mjs` calls every method of the client (`getInfo`, `invoke`, `invokeBatch`) and one
call past `max_calls`. The judge is the scripted OpenAI-compatible server on 127.0.0.1. AgentV 4.42.4 itself never
starts the proxy (its run in the fixture: both graders `Target not configured`, 0); evalstore does, and an unchanged
replay reuses every recorded call.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

from evalstore.store.events import GraderCalled

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the graders are JavaScript: needs node")

FIXTURE = FIXTURES_DIR / "agentv-target-proxy"
EVAL = "evals/proxy.eval.yaml"
answers = fixture_module("agentv_target_proxy_answers", FIXTURE / "answers.py")

RELEVANCE_REQUEST = [
    {"role": "system", "content": 'Respond with JSON: { "relevant": true/false }'},
    {"role": "user", "content": "Is this relevant to: What is the capital of France?? Response: The capital of France is Paris."},
]  # fmt: skip
"""What AgentV's docs' grader asks (its `systemPrompt` and `question`), as the judge receives it."""
INFO = {"targetName": "judge", "maxCalls": 3, "callCount": 0, "availableTargets": ["judge"]}
USAGE = {"input": 100, "output": 20}  # the server's usage, in AgentV's tokenUsage shape
REPLY_KEYS = ["output", "rawText", "tokenUsage", "raw_text", "model", "cache_hit"]
"""AgentV's answer to /invoke, then evalstore's earlier one (raw_text, model, cache_hit), kept."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    environment = {"OPENAI_ENDPOINT": "{url}", "OPENAI_API_KEY": "sk-local", "JUDGE_MODEL": "judge-model"}
    with agentv_project(FIXTURE / "project", tmp_path / "project", answers, environment, monkeypatch) as served:
        monkeypatch.chdir(served[0])
        yield served


def scores(db: str, run: str) -> dict[str, dict[str, Any]]:
    """The run's one test's grader results, by grader name, as its AgentV row (the export) gives them."""
    (row,) = map(json.loads, cli(db, "export", run).stdout.splitlines())
    return {s["name"]: s for s in row["scores"]}


def grader_calls(db: str, run: str) -> dict[str, GraderCalled]:
    """The run's recorded grader calls, by event id."""
    from evalstore.store import EventStore, make_engine

    store = EventStore(make_engine(db))
    try:
        return {s.event_id: s.event for s in store.read_stream(run, types=["grader_called"])}  # type: ignore[misc]
    finally:
        store.close()


def judge_calls(db: str, run: str) -> list[GraderCalled]:
    return [c for c in grader_calls(db, run).values() if c.call == "judge"]


def test_graders_written_from_agentvs_docs_call_the_judge_and_an_unchanged_replay_reuses_the_calls(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    _, server = project
    run = ok_json(cli(sqlite_url, "run", EVAL, "--workers", "1", "--json"))
    (result,) = run["results"]
    assert (result["score"], result["graders"]) == (1.0, {"protocol": 1.0, "relevance": 1.0})

    graded = scores(sqlite_url, run["run_id"])
    # The docs' grader read rawText (`JSON.parse(response.rawText ?? '{}').relevant`).
    assert graded["relevance"]["score"] == 1
    protocol = graded["protocol"]
    assert all(a["passed"] for a in protocol["assertions"]), protocol["assertions"]
    details = protocol["details"]
    assert details["before"] == INFO and details["after"] == {**INFO, "callCount": 3}
    assert details["invoke"] == {
        "output": [{"role": "assistant", "content": "Paris"}],
        "rawText": "Paris",
        "tokenUsage": USAGE,
    }
    assert details["invoke_keys"] == REPLY_KEYS
    assert (
        details["batch"]
        == [{"output": [{"role": "assistant", "content": "yes"}], "rawText": "yes", "tokenUsage": USAGE}] * 2
    )
    assert details["refused"] == {
        "name": "TargetInvocationError",
        "statusCode": 429,
        "message": "Max calls exceeded (limit: 3)",
    }

    # The judge got one request from the docs' grader and three from the other (invoke, the batch's two).
    assert len(server.requests) == 4
    sent = [r.messages for r in server.requests]
    assert RELEVANCE_REQUEST in sent
    assert [
        {"role": "system", "content": "Answer yes or no."},
        {"role": "user", "content": "Is Lyon in France?"},
    ] in sent
    calls = judge_calls(sqlite_url, run["run_id"])
    assert sorted(c.grader for c in calls) == ["protocol", "protocol", "protocol", "relevance"]
    assert all(c.grader_type == "code-grader" and c.model == "judge-model" and not c.cache_hit for c in calls)

    # An unchanged replay runs the graders again: every call, the batch's too, is answered from the record,
    # and the judge, which would now answer otherwise, is asked nothing.
    server.respond_with(lambda request: "a different answer")
    replay = ok_json(cli(sqlite_url, "replay", run["run_id"], "--json"))
    assert len(server.requests) == 4
    again = scores(sqlite_url, replay["run_id"])
    assert {n: (s["score"], s["assertions"], s.get("details")) for n, s in again.items()} == {
        n: (s["score"], s["assertions"], s.get("details")) for n, s in graded.items()
    }
    reused = judge_calls(sqlite_url, replay["run_id"])
    assert len(reused) == 4
    assert all(c.cache_hit for c in reused)
    originals = {i for i, c in grader_calls(sqlite_url, run["run_id"]).items() if c.call == "judge"}
    assert {c.reused_from for c in reused} == originals


def test_agentv_never_started_the_proxy_and_a_replay_of_its_run_grades_with_it(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    """AgentV 4.42.4's own run of the project: `createTargetClient()` found no AGENTV_TARGET_PROXY_URL (AgentV
    starts the proxy only for a `context.judgeProvider` nothing sets), so both graders scored 0 and the judge was
    never asked. An import keeps that; a replay runs the graders with evalstore's proxy."""
    _, server = project
    (row,) = map(json.loads, (FIXTURE / "project" / "runs" / "proxy" / "index.jsonl").read_text().splitlines())
    assert {s["name"]: (s["score"], s["assertions"]) for s in row["scores"]} == {
        "relevance": (0, [{"text": "Target not configured", "passed": False}]),
        "protocol": (0, [{"text": "Target not configured", "passed": False}]),
    }
    imported = ok_json(cli(sqlite_url, "import", "runs/proxy", "--eval", EVAL, "--json"))["run_id"]
    assert {n: s["score"] for n, s in scores(sqlite_url, imported).items()} == {"relevance": 0, "protocol": 0}
    replay = ok_json(cli(sqlite_url, "replay", imported, "--json"))
    assert {n: s["score"] for n, s in scores(sqlite_url, replay["run_id"]).items()} == {"relevance": 1, "protocol": 1}
    assert len(server.requests) == 4 and RELEVANCE_REQUEST in [r.messages for r in server.requests]
