"""Composites whose aggregator is an ``llm-grader``, held to the real AgentV 4.42.4 (tests/fixtures/agentv-aggregator:
its README says how the run was made).

The suite's only judge calls are its composites' aggregators: an inline prompt, a block prompt that ends in a
newline and names ``{{EVALUATOR_RESULTS_JSON}}`` twice (its members' results hold ``$&`` and ``$'``, which
JavaScript's ``replace`` expands), AgentV's default prompt, and a ``file://`` prompt, whose path AgentV sends as
the prompt. A replay once found no judge for them (nothing else in the suite asked one): every unchanged
replay scored them 0, and ``--judge-target`` was said to change nothing. And the members' results were written
``"score": 1.0`` where AgentV writes ``1``, and a ``file://`` prompt's file read where AgentV sends its path.

Now an import, its unchanged replay, ``evalstore run`` and its unchanged replay grade as AgentV did, and every
aggregator's request is AgentV's, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json, one_line_error, results_by_test
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

AGGREGATOR = FIXTURES_DIR / "agentv-aggregator"
PROJECT = AGGREGATOR / "project"
RUN = PROJECT / "runs" / "aggregate"
EVAL = "evals/aggregate.eval.yaml"
FILE_PROMPT = "its LLM aggregator's judge is sent the text `prompts/aggregate.md`, not the file's contents"
answers = fixture_module("agentv_aggregator_answers", AGGREGATOR / "answers.py")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    environment = {
        "OPENAI_ENDPOINT": "{url}",
        "OPENAI_API_KEY": "sk-local",
        "AGENT_MODEL": "agent-model",
        "JUDGE_MODEL": "judge-model",
    }
    with agentv_project(PROJECT, tmp_path / "project", answers, environment, monkeypatch) as (folder, server):
        monkeypatch.chdir(folder)
        yield folder, server


def agentv_rows() -> dict[str, dict[str, Any]]:
    lines = (RUN / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, filter(str.strip, lines))}


def as_agentv() -> dict[str, tuple[Any, ...]]:
    """Each test's score, pass and grader scores, as AgentV's rows have them."""
    return {
        t: (
            pytest.approx(r["score"]),
            r["execution_status"] == "ok",
            {s["name"]: pytest.approx(s["score"]) for s in r["scores"]},
        )
        for t, r in agentv_rows().items()
    }


def graded(db: str, run: str) -> dict[str, tuple[Any, ...]]:
    return {t: (r["score"], r["passed"], r["graders"]) for t, r in results_by_test(db, run).items()}


def judge_requests(bodies: list[Any]) -> list[list[dict[str, Any]]]:
    """The messages of each judge request, in order."""
    return [b["messages"] for b in bodies if b.get("model") == "judge-model"]


def agentv_judge_requests() -> list[list[dict[str, Any]]]:
    lines = (AGGREGATOR / "logs" / "agentv-requests.jsonl").read_text("utf-8").splitlines()
    return judge_requests([json.loads(line)["body"] for line in lines])


def sent(server: JudgeServer) -> list[list[dict[str, Any]]]:
    return judge_requests([r.body for r in server.requests])


def canonical(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, sort_keys=True)


def test_the_fixture_holds_what_agentv_sent_and_recorded() -> None:
    """AgentV asked each aggregator once; it recorded the prompt as rendered and sent it trimmed; the block
    prompt's members hold what ``$&`` and ``$'`` expanded to; the file prompt is its path."""
    requests = agentv_judge_requests()
    rows = agentv_rows()
    recorded = [rows[t]["scores"][0]["input"]["userPrompt"] for t in rows]
    assert [m[-1]["content"] for m in requests] == [p.strip() for p in recorded]
    assert recorded[1].endswith("}\n") and 'contain \\"US{{EVALUATOR_RESULTS_JSON}} or \nOnce more' in recorded[1]
    assert recorded[3] == "prompts/aggregate.md"


def test_an_import_and_its_unchanged_replay_ask_and_grade_as_agentv(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    _, server = project
    imported = ok_json(cli(sqlite_url, "import", str(RUN.relative_to(PROJECT)), "--eval", EVAL, "--json"))["run_id"]
    assert graded(sqlite_url, imported) == as_agentv()
    replay = cli(sqlite_url, "replay", imported, "--json")
    replayed = ok_json(replay, 1)["run_id"]  # no test reaches 0.8, in AgentV's run either
    assert graded(sqlite_url, replayed) == as_agentv()
    assert FILE_PROMPT in replay.stderr
    # AgentV's rows keep no judge reply: the replay asks the judge again, exactly what AgentV asked.
    assert sorted(map(canonical, sent(server))) == sorted(map(canonical, agentv_judge_requests()))
    # And an export records each prompt as AgentV's row does: as rendered (the block prompt untrimmed).
    exported = {r["test_id"]: r for r in map(json.loads, cli(sqlite_url, "export", replayed).stdout.splitlines())}
    for test_id, row in agentv_rows().items():
        assert exported[test_id]["scores"][0]["input"]["userPrompt"] == row["scores"][0]["input"]["userPrompt"]


def test_run_asks_what_agentv_asked_and_an_unchanged_replay_reproduces_it(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    _, server = project
    ran = ok_json(cli(sqlite_url, "run", EVAL, "--workers", "1", "--json"), 1)["run_id"]
    assert graded(sqlite_url, ran) == as_agentv()
    assert sent(server) == agentv_judge_requests()  # byte for byte, in AgentV's order (one worker)

    asked = len(server.requests)
    for extra in ((), ("--judge-target", "judge")):  # the run's judge, found again or named
        replay = cli(sqlite_url, "replay", ran, *extra, "--json")
        assert graded(sqlite_url, ok_json(replay, 1)["run_id"]) == as_agentv()
        assert "changes nothing" not in replay.stderr
    assert len(server.requests) == asked  # every aggregator's reply reused

    runs = len(ok_json(cli(sqlite_url, "runs", "--json")))
    line = one_line_error(cli(sqlite_url, "replay", ran, "--judge-target", "nobody"))
    assert "LLM graders " in line and "summary-judged (aggregator)" in line and "'nobody' is not defined" in line
    assert len(ok_json(cli(sqlite_url, "runs", "--json"))) == runs  # refused before anything was written


def test_validate_says_a_file_prompt_of_an_aggregator_is_sent_as_its_path(project: tuple[Path, JudgeServer]) -> None:
    checked = cli("sqlite:///unused.db", "validate", EVAL, "--json")
    (entry,) = ok_json(checked)["files"]
    (warning,) = [w for w in entry["warnings"] if FILE_PROMPT in w]
    assert "tests[3].assertions[0].aggregator.prompt" in warning and "AgentV 4.42.4" in warning
