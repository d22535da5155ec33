"""Canary keys: a cli agent, an openai target and a judge that all echo the credentials they were given,
and not one byte of any key in the store: not in the raw SQLite file, not in its WAL, not in any decoded
blob (the one redaction rule, ``targetsfile.redaction.SecretMask``).

Every run is the installed console script in a real subprocess against a real SQLite store, with the
scripted HTTP server standing in for both the chat endpoint and the judge.
"""

from __future__ import annotations

import base64
import json
import sys
import textwrap
from pathlib import Path

import canaries
from canaries import judge_target, raw_store_bytes, run_suite
from e2e_helpers import ok_json
from judge_server import JudgeServer, Reply, Request

PY = sys.executable
CLI_KEY_ENV, CLI_KEY = "CANARY_AGENT_API_KEY", "canary-AGENT-4f0e2b71c9"
URL_PASS_ENV, URL_PASS = "CANARY_SERVICE_PASS", "canary-URLPASS-77d3a1"
CHAT_KEY_ENV, CHAT_KEY = "CANARY_CHAT_API_KEY", "canary-CHAT-9b2c55e0a8"
JUDGE_KEY_ENV, JUDGE_KEY = "CANARY_JUDGE_API_KEY", "canary-JUDGE-1d7f3e6b42"
SERVICE_USER = "svc-bot"
BASIC = base64.b64encode(f"{SERVICE_USER}:{URL_PASS}".encode()).decode()
CANARIES = [CLI_KEY, URL_PASS, CHAT_KEY, JUDGE_KEY, BASIC]

# The agent tells everything it was given: in its answer, on stderr, and in a file it names.
AGENT = textwrap.dedent("""\
    import base64, os, sys
    from urllib.parse import urlsplit
    key, url = os.environ["AGENT_KEY"], urlsplit(os.environ["SERVICE_URL"])
    basic = base64.b64encode(f"{url.username}:{url.password}".encode()).decode()
    sys.stderr.write(f"debug: key={key} url={url.geturl()} basic={basic}\\n")
    print(f"My key is {key}; the service said 'Authorization: Basic {basic}' for {url.password}.")
""")


def echoing_server(request: Request) -> Reply | str:
    """The chat target answers with the Authorization header it got; the judge puts it in its verdict,
    and says it again in a 401 when the question is the one marked for refusal."""
    auth = request.headers.get("authorization", "")
    if request.body.get("model") == "chat-model":
        return Reply(content=f"You sent me '{auth}'. The answer is 42.")
    if "REFUSE" in json.dumps(request.body):
        return Reply(status=401, body=json.dumps({"error": f"bad credentials: {auth}"}).encode())
    verdict = {"score": 1.0, "assertions": [{"text": f"request carried {auth}", "passed": True, "evidence": auth}]}
    return json.dumps(verdict)


def write_project(root: Path, server: JudgeServer) -> Path:
    root.mkdir(parents=True)
    (root / "agent.py").write_text(AGENT, encoding="utf-8")
    service_url = f"https://{SERVICE_USER}:${{{{ {URL_PASS_ENV} }}}}@service.example/api"
    targets = textwrap.dedent(f"""\
        - name: agent
          provider: cli
          command: [{json.dumps(PY)}, {json.dumps(str(root / "agent.py"))}]
          env:
            AGENT_KEY: ${{{{ {CLI_KEY_ENV} }}}}
            SERVICE_URL: {json.dumps(service_url)}
          grader_target: judge
        - name: chat
          provider: openai
          base_url: {server.base_url}
          model: chat-model
          api_key: ${{{{ {CHAT_KEY_ENV} }}}}
          max_retries: 0
          grader_target: judge
        """)
    eval_yaml = textwrap.dedent("""\
        name: canaries
        tests:
          - id: plain
            input: What is 6 x 7?
            criteria: says 42
          - id: refused
            input: What is 6 x 7? REFUSE
            criteria: says 42
        assertions:
          - {name: quality, type: llm-grader}
          - {name: says-42, type: contains, value: "42"}
        """)
    return canaries.write_project(root, targets + judge_target(server, JUDGE_KEY_ENV), eval_yaml)


def test_no_canary_key_reaches_the_store_however_the_agent_target_and_judge_echo_it(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    judge_server.respond_with(echoing_server)
    eval_file = write_project(tmp_path / "proj", judge_server)
    db_file = tmp_path / "store.db"
    env = {CLI_KEY_ENV: CLI_KEY, URL_PASS_ENV: URL_PASS, CHAT_KEY_ENV: CHAT_KEY, JUDGE_KEY_ENV: JUDGE_KEY}

    printed = ""
    for target in ("agent", "chat"):
        result = run_suite(db_file, eval_file, target, tmp_path / "ws" / target, env)
        out = ok_json(result, 1)  # the refused judge call is an execution error
        assert {r["test_id"] for r in out["results"]} == {"plain", "refused"}
        printed += result.stdout + result.stderr

    # The echoes happened, and what they echoed was stored, masked.
    sent = {r.headers.get("authorization") for r in judge_server.requests}
    assert {f"Bearer {CHAT_KEY}", f"Bearer {JUDGE_KEY}"} <= sent
    stored = raw_store_bytes(db_file)
    everything = b"\n".join(stored.values())
    assert b"***redacted***" in everything
    assert f"${{{{ {CLI_KEY_ENV} }}}}".encode() in everything  # the agent's echo, shown as its reference
    assert f"${{{{ {CHAT_KEY_ENV} }}}}".encode() in everything  # the chat endpoint's echo
    assert b"The answer is 42." in everything and b"My key is" in everything
    for canary in CANARIES:
        leaks = [name for name, data in stored.items() if canary.encode() in data]
        assert not leaks, f"{canary} stored in {leaks}"
        assert canary not in printed
