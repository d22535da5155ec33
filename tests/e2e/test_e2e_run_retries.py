"""``evalstore run`` tries a failed target call again as ``agentv eval`` 4.42.4 does (orchestrator.ts
``runEvalCase``: ``attemptBudget = maxRetries + 1``, ``--max-retries`` default 2, waiting 1 s then 2 s): an
endpoint that refuses twice then answers, one that always refuses (AgentV: three requests, then the
execution error: tests/fixtures/agentv-newuser4's `outage`), a cli agent that exits non-zero on its first
call (``{ATTEMPT}`` counts the calls), and ``--max-retries 0``. Each failed call is recorded
(``target_call_failed``) and shown by ``audit``.

Every run is the installed console script in a real subprocess against the scripted server; the waits are
AgentV's, so the tests keep the retries few and run the two endpoint tests at once.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path

from e2e_helpers import audit, evalstore, ok_json
from judge_server import JudgeServer, Reply, Request
from test_e2e_run_targets import write_project

from evalstore.store import EventStore, make_engine

REFUSAL = Reply(status=400, body=b'{"error": {"message": "This model is resting"}}')


KEY = {"RETRIES_KEY": "sk-local"}


def events(db_file: Path, kind: str) -> list[dict]:
    store = EventStore(make_engine(f"sqlite:///{db_file}"))
    return [json.loads(e.payload_json) for e in store.read_all() if e.type == kind]


def chat_project(root: Path, base_url: str) -> Path:
    targets = textwrap.dedent(f"""\
        targets:
          - name: chat
            provider: openai
            base_url: {base_url}
            model: chat-model-1
            api_key: ${{{{ RETRIES_KEY }}}}
        """)
    return write_project(
        root, targets, [("flaky", "What is 6 x 7?", "42"), ("broken", "Is the status page up?", "up")], "chat"
    )


class Flaky:
    """The endpoint: ``flaky``'s question refused (HTTP 400, which pi-ai's own retry does not retry) twice,
    then answered; ``broken``'s refused always. When each request came, per question."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply | str:
        with self.lock:
            seen = self.times.setdefault(request.user, [])
            seen.append(time.monotonic())
            if "6 x 7" in request.user and len(seen) > 2:
                return "The answer is 42."
        return REFUSAL


def test_a_failed_call_is_tried_twice_more_as_agentv_tries_it(tmp_path: Path, judge_server: JudgeServer) -> None:
    flaky = Flaky()
    judge_server.respond_with(flaky)
    eval_file = chat_project(tmp_path / "proj", judge_server.base_url)
    db_file = tmp_path / "store.db"
    out = ok_json(evalstore(f"sqlite:///{db_file}", "run", str(eval_file), "--json", cwd=tmp_path, env=KEY), 1)

    rows = {r["test_id"]: r for r in out["results"]}
    assert (rows["flaky"]["status"], rows["flaky"]["passed"]) == ("ok", True)
    assert rows["broken"]["status"] == "execution_error"
    assert "pi-ai call failed: HTTP 400" in rows["broken"]["error"]
    # Three requests each, as AgentV's `outage` run made for the question its endpoint refused; AgentV's
    # waits between them (1 s, then 2 s), real ones.
    times = {("flaky" if "6 x 7" in q else "broken"): t for q, t in flaky.times.items()}
    for sent in times.values():
        assert len(sent) == 3
        assert sent[1] - sent[0] >= 1.0 and sent[2] - sent[1] >= 2.0
    failed = events(db_file, "target_call_failed")
    assert sorted((f["test_id"], f["provider_attempt"], f["wait_ms"]) for f in failed) == [
        ("broken", 0, 1000.0),
        ("broken", 1, 2000.0),
        ("flaky", 0, 1000.0),
        ("flaky", 1, 2000.0),
    ]
    assert all(f["status"] == "error" and "HTTP 400" in f["error"] for f in failed)
    transcripts = {t["test_id"]: t for t in events(db_file, "transcript_recorded")}
    assert transcripts["flaky"]["output_text"] == "The answer is 42." and transcripts["flaky"]["provider_attempt"] == 2
    assert transcripts["broken"]["status"] == "error" and transcripts["broken"]["provider_attempt"] == 2
    # Each call is there for an audit of the test.
    report = audit(f"sqlite:///{db_file}", out["run_id"], "broken")
    (test,) = report["tests"]
    assert [c["provider_attempt"] for c in test["transcript"]["failed_calls"]] == [0, 1]
    assert report["run"]["overrides"]["max_retries"] == 2


def test_max_retries_0_calls_once(tmp_path: Path, judge_server: JudgeServer) -> None:
    flaky = Flaky()
    judge_server.respond_with(flaky)
    eval_file = chat_project(tmp_path / "proj", judge_server.base_url)
    db_file = tmp_path / "store.db"
    out = ok_json(
        evalstore(f"sqlite:///{db_file}", "run", str(eval_file), "--max-retries", "0", "--json", cwd=tmp_path, env=KEY),
        1,
    )
    rows = {r["test_id"]: r for r in out["results"]}
    assert rows["flaky"]["status"] == rows["broken"]["status"] == "execution_error"
    assert sorted(len(t) for t in flaky.times.values()) == [1, 1]
    assert events(db_file, "target_call_failed") == []


AGENT = textwrap.dedent("""\
    import sys
    attempt = sys.argv[1]
    if attempt == "0":
        print("the agent's first call crashed", file=sys.stderr)
        sys.exit(3)
    print("answered on call " + attempt + ": 42")
""")


def test_a_cli_agent_exiting_non_zero_is_called_again_with_the_next_attempt(tmp_path: Path) -> None:
    """AgentV's cli provider throws on a non-zero exit, so the call is retried; ``{ATTEMPT}`` is the call's."""
    root = tmp_path / "proj"
    (root / "agent.py").parent.mkdir(parents=True)
    (root / "agent.py").write_text(AGENT, encoding="utf-8")
    targets = textwrap.dedent(f"""\
        targets:
          - name: agent
            provider: cli
            command: [{json.dumps(sys.executable)}, {json.dumps(str(root / "agent.py"))}, "{{ATTEMPT}}"]
        """)
    eval_file = write_project(root, targets, [("crash-once", "What is 6 x 7?", "42")], "agent")
    db_file = tmp_path / "store.db"
    started = time.monotonic()
    out = ok_json(
        evalstore(f"sqlite:///{db_file}", "run", str(eval_file), "--max-retries", "1", "--json", cwd=tmp_path)
    )
    assert time.monotonic() - started >= 1.0
    (row,) = out["results"]
    assert row["status"] == "ok"
    (failed,) = events(db_file, "target_call_failed")
    assert (failed["provider_attempt"], failed["exit_code"], failed["wait_ms"]) == (0, 3, 1000.0)
    assert "first call crashed" in failed["stderr_tail"]
    (transcript,) = events(db_file, "transcript_recorded")
    assert transcript["output_text"] == "answered on call 1: 42" and transcript["provider_attempt"] == 1


def test_a_negative_max_retries_is_refused(tmp_path: Path) -> None:
    result = evalstore(f"sqlite:///{tmp_path / 'store.db'}", "run", "x.eval.yaml", "--max-retries", "-1", cwd=tmp_path)
    assert result.returncode == 2 and "--max-retries" in result.stderr
