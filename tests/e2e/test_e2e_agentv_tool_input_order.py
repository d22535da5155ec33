"""A tool call's input keeps the key order the agent gave it, held to the real AgentV 4.42.4
(tests/fixtures/agentv-tool-input-order: its README says how the run was made).

AgentV's ``{{tool_calls}}`` shows, for a tool it knows no key field of, the call's first string input in the
input's own key order (``extractKeyDetail``): ``- search: FIRST-KEY`` for ``{"zeta": "FIRST-KEY", "alpha":
"second-key"}``. The transcript blob was once canonical JSON, its keys sorted, so an unchanged replay, of an
import or of ``evalstore run``'s own run, showed ``- search: second-key`` and ``- grep: src``: the judge was
asked what AgentV never asked (its recorded reply not reused, the score moved), and a code grader was given
every tool call's input and output, and a message's metadata, with their keys sorted.

Now the transcript keeps its keys in their own order (``content.messages_json``, the run's and every import's):
a replay asks the judge what AgentV asked, byte for byte, and gives a code grader what AgentV gave it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

from evalstore.replay.agentv import import_events
from evalstore.store.codec import canonical_json

ORDER = FIXTURES_DIR / "agentv-tool-input-order"
PROJECT = ORDER / "project"
RUN = PROJECT / "runs" / "tool-input-order"
EVAL = "tool-input-order.eval.yaml"
answers = fixture_module("agentv_tool_input_order_answers", ORDER / "answers.py")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    environment = {"OPENAI_ENDPOINT": "{url}", "OPENAI_API_KEY": "sk-local", "JUDGE_MODEL": "judge-model"}
    with agentv_project(PROJECT, tmp_path / "project", answers, environment, monkeypatch) as (folder, server):
        monkeypatch.chdir(folder)
        yield folder, server


def agentv_row() -> dict[str, Any]:
    (row,) = [json.loads(line) for line in (RUN / "index.jsonl").read_text("utf-8").splitlines() if line.strip()]
    return row


def by_grader(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in row["scores"]}


def agentv_judge_requests() -> list[list[dict[str, Any]]]:
    """The messages of each judge request AgentV sent (the agent is a cli target: every request is the judge's)."""
    lines = (ORDER / "logs" / "agentv-requests.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line)["body"]["messages"] for line in lines]


def sent(server: JudgeServer, since: int = 0) -> list[list[dict[str, Any]]]:
    return [r.body["messages"] for r in server.requests[since:]]


def user_prompt(messages: list[dict[str, Any]]) -> str:
    (text,) = [m["content"] for m in messages if m["role"] == "user"]
    return str(text)


def exported_row(db: str, run: str) -> dict[str, Any]:
    (line,) = cli(db, "export", run).stdout.splitlines()
    return dict(json.loads(line))


def as_agentv_graded(db: str, run: str) -> None:
    """The run's row says what AgentV's says: each grader's score and assertions (the code grader's name each
    key order it was given), the judge's prompt as AgentV recorded it, the test's score."""
    row, mine = agentv_row(), exported_row(db, run)
    assert mine["score"] == pytest.approx(row["score"])
    for name, score in by_grader(row).items():
        graded = by_grader(mine)[name]
        assert graded["score"] == pytest.approx(score["score"]), name
        assert graded["assertions"] == score["assertions"], name
    assert by_grader(mine)["judged"]["input"]["userPrompt"] == by_grader(row)["judged"]["input"]["userPrompt"]


def test_the_fixture_holds_what_agentv_sent_and_recorded() -> None:
    """AgentV asked the judge once, with each tool call's first string input in the input's own order, and
    recorded that prompt (untrimmed) on its row; its code grader was given every object in the agent's order."""
    (request,) = agentv_judge_requests()
    row = by_grader(agentv_row())
    prompt = user_prompt(request)
    assert prompt == row["judged"]["input"]["userPrompt"].strip()
    assert "- search: FIRST-KEY\n- grep: save(\n" in prompt and 'Metadata: {"zeta":"last","alpha":"first"}' in prompt
    assert [a["text"] for a in row["key-order"]["assertions"]] == [
        'message metadata {"zeta":"z","alpha":"a"}',
        'search input {"zeta":"FIRST-KEY","alpha":"second-key"}',
        'search output {"zeta":"first result","alpha":"second result"}',
        'grep input {"pattern":"save(","path":"src"}',
        'grep output "src/app.py:3: save(x)"',
        'test metadata {"zeta":"last","alpha":"first"}',
    ]
    # Asked with the keys sorted, the judge would have scored otherwise (the server picks by the prompt's digest).
    sorted_prompt = prompt.replace("FIRST-KEY", "second-key").replace("- grep: save(", "- grep: src")
    asked = {"model": "judge-model", "messages": [{"role": "user", "content": sorted_prompt}]}
    assert json.loads(answers.answer(asked))["score"] != row["judged"]["score"]


def test_an_import_and_its_unchanged_replay_ask_the_judge_what_agentv_asked(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    _, server = project
    imported = ok_json(cli(sqlite_url, "import", str(RUN.relative_to(PROJECT)), "--eval", EVAL, "--json"))["run_id"]
    replayed = ok_json(cli(sqlite_url, "replay", imported, "--json"))
    # AgentV's rows keep no judge reply: the replay asks the judge again, exactly what AgentV asked.
    assert sent(server) == agentv_judge_requests()
    assert replayed["reuse"]["judge_reused"] == 0
    as_agentv_graded(sqlite_url, replayed["run_id"])

    # The reply it recorded is reused by an unchanged replay of the replay: no judge call, the same grades.
    asked = len(server.requests)
    again = ok_json(cli(sqlite_url, "replay", replayed["run_id"], "--json"))
    assert len(server.requests) == asked and again["reuse"]["judge_reused"] == 1
    as_agentv_graded(sqlite_url, again["run_id"])


def test_run_and_its_unchanged_replay_ask_what_agentv_asked(sqlite_url: str, project: tuple[Path, JudgeServer]) -> None:
    _, server = project
    ran = ok_json(cli(sqlite_url, "run", EVAL, "--json"))["run_id"]
    assert sent(server) == agentv_judge_requests()
    as_agentv_graded(sqlite_url, ran)

    asked = len(server.requests)
    replayed = ok_json(cli(sqlite_url, "replay", ran, "--json"))
    assert len(server.requests) == asked  # the run's reply reused: the replay asked what the run asked
    assert replayed["reuse"]["judge_reused"] == 1
    as_agentv_graded(sqlite_url, replayed["run_id"])


def test_a_run_imported_before_the_order_was_kept_keeps_its_sorted_keys(
    sqlite_url: str, project: tuple[Path, JudgeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import made when the transcript blob was canonical JSON (its keys sorted) does not change: importing
    the folder again writes nothing, and its replays show the sorted input, as they did (docs/usage.md)."""
    _, server = project
    with monkeypatch.context() as before:
        before.setattr(import_events, "messages_json", lambda messages: canonical_json(messages).encode("utf-8"))
        old = ok_json(cli(sqlite_url, "import", str(RUN.relative_to(PROJECT)), "--eval", EVAL, "--json"))
    again = ok_json(cli(sqlite_url, "import", str(RUN.relative_to(PROJECT)), "--eval", EVAL, "--json"))
    assert again["run_id"] == old["run_id"] and again["already_imported"]
    ok_json(cli(sqlite_url, "replay", old["run_id"], "--json"), 1)  # the judge scored the sorted prompt 0.35
    (request,) = sent(server)
    assert "- search: second-key\n- grep: src\n" in user_prompt(request)
