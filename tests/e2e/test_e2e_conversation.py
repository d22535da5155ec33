"""Multi-turn conversations (``mode: conversation``) end to end, as AgentV 4.42.4 runs them: ``evalstore run``
asks the agent once per turn with the conversation so far, grades each answer, stops after a failed turn
with ``on_turn_failure: stop``, grades the whole conversation with the test's own graders, and aggregates;
an unchanged ``evalstore replay`` regrades every turn from the recorded conversation without the agent,
and without the judge. One scripted server on 127.0.0.1 is both the agent (an ``openai`` target) and the
judge, so what each was sent is checked as it arrived."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e_helpers import evalstore, ok_json, write_chat_targets
from judge_server import JudgeServer, Reply, Request, as_json

from evalstore.store import EventStore, make_engine

KEY_ENV = "E2E_CONVERSATION_KEY"

EVAL = """\
execution:
  target: agent
tests:
  - id: chat
    mode: conversation
    criteria: Keeps the context of the conversation
    aggregation: min
    input:
      - role: system
        content: You are terse.
    turns:
      - input: What is 2 + 2?
        assertions:
          - Answers 4
          - {type: contains, value: "2 + 2"}
      - input: Double it.
        assertions: [Says 8]
      - input: Thanks
    assertions:
      - Stays polite
  - id: stopper
    mode: conversation
    on_turn_failure: stop
    input: [{role: system, content: Be exact.}]
    turns:
      - input: Say FAIL
        assertions: [Says pass]
      - input: Never asked
        assertions: [Anything]
"""


def respond(request: Request) -> Reply:
    """The agent (model ``agent-model``) echoes the last user message; the judge satisfies every rubric
    item it is shown, unless the answer says FAIL."""
    body = request.body
    if body["model"] == "agent-model":
        return Reply(content=f"You said: {body['messages'][-1]['content']}")
    ids = re.findall(r"^- \[([a-z0-9-]+)\]", request.user, flags=re.M)
    satisfied = "You said: Say FAIL" not in request.user
    return as_json(
        {"checks": [{"id": i, "satisfied": satisfied, "reasoning": "seen"} for i in ids], "overall_reasoning": "ok"}
    )


def _project(root: Path, base_url: str) -> Path:
    write_chat_targets(root, base_url, KEY_ENV)
    eval_file = root / "evals" / "chat.eval.yaml"
    eval_file.parent.mkdir()
    eval_file.write_text(EVAL, encoding="utf-8")
    return eval_file


def test_a_conversation_is_run_turn_by_turn_graded_per_turn_and_replayed_without_agent_or_judge(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    judge_server.respond_with(respond)
    eval_file = _project(tmp_path / "proj", judge_server.base_url)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    env = {KEY_ENV: "sk-conversation"}

    out = ok_json(evalstore(db, "run", str(eval_file), "--json", "--workers", "1", cwd=tmp_path, env=env), 1)
    rows = {r["test_id"]: r for r in out["results"]}
    assert rows["chat"]["graders"] == {"turn-1": 1.0, "turn-2": 1.0, "turn-3": 1.0, "conversation": 1.0}
    assert (rows["chat"]["score"], rows["chat"]["passed"]) == (1.0, True)
    assert rows["stopper"]["graders"] == {"turn-1": 0.0, "turn-2": 0.0}
    assert (rows["stopper"]["score"], rows["stopper"]["status"]) == (0.0, "quality_failure")

    agent = [r.body["messages"] for r in judge_server.requests if r.body["model"] == "agent-model"]
    # chat's three turns, each sent the conversation so far; stopper's first turn only (it failed). (The
    # openai provider's `@[Assistant]:` prefix on a past answer is a prompt difference issue 28 owns.)
    assert [[(m["role"], m["content"].removeprefix("@[Assistant]:\n")) for m in sent] for sent in agent] == [
        [("system", "You are terse."), ("user", "What is 2 + 2?")],
        [
            ("system", "You are terse."),
            ("user", "What is 2 + 2?"),
            ("assistant", "You said: What is 2 + 2?"),
            ("user", "Double it."),
        ],
        [
            ("system", "You are terse."),
            ("user", "What is 2 + 2?"),
            ("assistant", "You said: What is 2 + 2?"),
            ("user", "Double it."),
            ("assistant", "You said: Double it."),
            ("user", "Thanks"),
        ],
        [("system", "Be exact."), ("user", "Say FAIL")],
    ]
    judged = [r.user for r in judge_server.requests if r.body["model"] == "judge-model"]
    # chat: turns 1 and 2 (turn 3 has no assertion: 1.0), then the conversation; stopper: its first turn.
    assert len(judged) == 4
    first = judged[0]
    assert "system: You are terse.\n\nuser: What is 2 + 2?\n\nassistant: You said: What is 2 + 2?" in first
    assert "- [criterion-1]: Answers 4" in first and "(REQUIRED)" not in first
    assert "You said: Thanks" in judged[2] and "- [rubric-1]" in judged[2]  # the whole conversation
    run_id = out["run_id"]

    store = EventStore(make_engine(db))
    cases = [json.loads(e.payload_json)["test_id"] for e in store.read_all() if e.type == "test_case_recorded"]
    assert sorted(cases) == ["chat", "stopper"]
    verdicts = {
        (p["test_id"], p["grader"]): p
        for e in store.read_all()
        if e.type == "verdict_recorded" and (p := json.loads(e.payload_json))
    }
    assert verdicts[("stopper", "turn-2")]["assertions"] == [
        {"text": "Skipped due to previous turn failure", "passed": False}
    ]
    turn = verdicts[("chat", "turn-1")]
    assert [(c["name"], c["type"], c["score"]) for c in turn["details"]["scores"]] == [
        ("turn-rubrics", "llm-grader", 1.0),
        ("contains-2 + 2", "contains", 1.0),
    ]
    assert turn["grader_type"] == "rubrics" and len(turn["grader_call_event_ids"]) == 1

    asked = len(judge_server.requests)
    replay = ok_json(evalstore(db, "replay", run_id, "--json", cwd=tmp_path, env=env), 1)
    assert len(judge_server.requests) == asked  # neither the agent nor the judge was asked again
    assert replay["not_regradable"] == [] and replay["reuse"]["code_ran"] == 0
    # Each judged grader's reply reused: chat's turn-1, turn-2 and conversation, stopper's turn-1.
    assert replay["reuse"]["judge_reused"] == 4
    shown = json.loads(evalstore(db, "show", replay["run_id"], "--all", "--json", cwd=tmp_path).stdout)
    again = {r["test_id"]: r for r in shown["results"]}
    for test_id in ("chat", "stopper"):
        assert (again[test_id]["score"], again[test_id]["graders"]) == (
            rows[test_id]["score"],
            rows[test_id]["graders"],
        )
        assert again[test_id]["origin"] == "graded"  # regraded from the recorded turns, not carried


def test_a_replay_counts_the_code_graders_its_turns_ran_and_reused(tmp_path: Path, judge_server: JudgeServer) -> None:
    """A conversation's verdicts are its turns', of type ``rubrics``: the replay's count of code-grader
    processes read verdicts of type ``code-grader`` only, and said ``0 run, 0 reused`` of a replay whose
    turns' code graders ran."""
    import sys

    judge_server.respond_with(respond)
    root = tmp_path / "proj"
    eval_file = _project(root, judge_server.base_url)
    grader = root / "evals" / "says_it.py"
    grader.write_text('import json, sys\njson.load(sys.stdin)\nprint(json.dumps({"score": 1.0}))\n', encoding="utf-8")
    check = f"{{type: code-grader, command: [{json.dumps(sys.executable)}, says_it.py]}}"
    eval_file.write_text(
        "execution:\n  target: agent\ntests:\n  - id: coded\n    mode: conversation\n"
        "    input: [{role: system, content: Be brief.}]\n"
        f"    turns:\n      - input: one\n        assertions: [{check}]\n"
        f"      - input: two\n        assertions: [{check}]\n",
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"
    env = {KEY_ENV: "sk-conversation"}
    run_id = ok_json(evalstore(db, "run", str(eval_file), "--json", cwd=tmp_path, env=env), 0)["run_id"]

    def reuse(*args: str) -> dict:
        return ok_json(evalstore(db, "replay", run_id, "--json", *args, cwd=tmp_path, env=env), 0)["reuse"]

    assert reuse("--no-cache") == {
        "code_ran": 2,
        "code_reused": 0,
        "code_not_run": 0,
        "code_carried": 0,
        "judge_reused": 0,
    }
    assert reuse() == {"code_ran": 0, "code_reused": 2, "code_not_run": 0, "code_carried": 0, "judge_reused": 0}
    printed = evalstore(db, "replay", run_id, cwd=tmp_path, env=env).stdout
    assert "0 run, 2 reused from recorded executions" in printed
