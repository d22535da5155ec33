#!/usr/bin/env python3
"""A stand-in for GitHub Copilot CLI in `--acp --stdio` mode: an Agent Client Protocol agent (JSON-RPC 2.0,
one message per line on stdin and stdout).

It answers `initialize` and `session/new`, and for `session/prompt` streams `session/update` notifications
the way Copilot does (`tool_call` when a tool starts, `tool_call_update` when it completes, with
`rawInput`/`rawOutput`; `agent_message_chunk` pieces of the answer; a `usage_update`), then answers the
prompt with `stopReason: end_turn` and token usage. Before running a shell command it asks
`session/request_permission` and waits for the client's choice (a refusal makes the tool's output
`{"code": "rejected"}`). What it does is scenario.py's plan over the skills in `.claude/skills` and
`.github/skills`, with Copilot's tool titles ("Using skill: NAME", "Viewing PATH", "Run ...", "Write File").

`FAKE_AGENT_LOG=FILE` appends what it was started with (argv, working folder, the prompt's text blocks, the
session's folder, the initialize request, the COPILOT_PROVIDER_* variables set). Markers in the prompt:
`FAKE_FAIL` exits 2 with a message on stderr; `FAKE_SLEEP` sleeps 60 s. `--acp --stdio` is required.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(os.path.realpath(__file__)).parent))
import scenario

SESSION = "fake-copilot-session"


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def notify(update: dict) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": update}})


def read() -> dict | None:
    line = sys.stdin.readline()
    while line and not line.strip():
        line = sys.stdin.readline()
    return json.loads(line) if line else None


def main() -> int:
    args = sys.argv[1:]
    if "--acp" not in args or "--stdio" not in args:
        sys.stderr.write("fake copilot: only --acp --stdio is faked\n")
        return 1
    log: dict = {"agent": "copilot", "argv": args, "cwd": os.getcwd()}
    log["provider_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("COPILOT_PROVIDER_")}
    request_id = 1000
    folder = Path.cwd()
    while True:
        message = read()
        if message is None:
            return 0
        method = message.get("method")
        if method == "initialize":
            log["initialize"] = message.get("params")
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
                }
            )
        elif method == "session/new":
            log["session_cwd"] = message["params"].get("cwd")
            folder = Path(message["params"].get("cwd") or folder)
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": SESSION}})
        elif method == "session/prompt":
            texts = [b.get("text", "") for b in message["params"].get("prompt", [])]
            log["prompt"] = texts
            if os.environ.get("FAKE_AGENT_LOG"):
                with open(os.environ["FAKE_AGENT_LOG"], "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(log) + "\n")
            prompt = texts[-1] if texts else ""
            if "FAKE_FAIL" in prompt:
                sys.stderr.write("fake copilot: the model refused to start\n")
                sys.stderr.flush()
                return 2
            if "FAKE_SLEEP" in prompt:
                time.sleep(60)
            if "FAKE_SESSION_FILE" in prompt:  # what Copilot saves in its session state, not the workspace
                saved = Path.home() / ".copilot" / "session-state" / SESSION / "files" / "report.md"
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text("# Report\ndone\n", encoding="utf-8")
            request_id = answer(message["id"], prompt, folder, request_id)
        elif "id" in message and "method" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})


def answer(prompt_id: int, prompt: str, folder: Path, request_id: int) -> int:
    plan = scenario.plan(prompt, folder, (".claude/skills", ".github/skills"), has_skill_tool=True)
    for n, step in enumerate(plan.steps, start=1):
        call_id = f"call_{n}"
        if step.kind == "skill":
            title, kind, raw = f"Using skill: {step.args['skill']}", "other", {}
        elif step.kind == "read":
            title, kind, raw = f"Viewing {step.args['path']}", "read", {"path": step.args["path"]}
        elif step.kind == "write":
            title, kind, raw = "Write File", "edit", {"path": step.args["path"], "content": step.args["content"]}
        else:
            title, kind, raw = f"Run {step.args['command']}", "execute", {"command": step.args["command"]}
        output: object = {"content": step.result}
        if step.kind == "skill":
            # Copilot reports a skill that loads at once as a tool call already completed.
            notify(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": title,
                    "kind": kind,
                    "status": "completed",
                    "rawInput": raw,
                    "rawOutput": output,
                }
            )
            continue
        notify(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": title,
                "kind": kind,
                "status": "pending",
                "rawInput": raw,
            }
        )
        if step.kind == "bash":
            request_id += 1
            options = [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "session/request_permission",
                    "params": {
                        "sessionId": SESSION,
                        "options": options,
                        "toolCall": {"toolCallId": call_id, "title": title},
                    },
                }
            )
            reply = read()
            chosen = ((reply or {}).get("result") or {}).get("outcome", {})
            if chosen.get("optionId") != "allow":
                output = {"code": "rejected", "message": "The user rejected this tool call"}
        time.sleep(0.02)
        scenario.carry_out(step, folder)
        notify({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed", "rawOutput": output})
    half = len(plan.answer) // 2
    for piece in (plan.answer[:half], plan.answer[half:]):
        notify({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": piece}})
    notify(
        {
            "sessionUpdate": "usage_update",
            "used": 1000 + plan.seed % 500,
            "size": 128000,
            "cost": {"amount": 0.01, "currency": "USD"},
        }
    )
    usage = {
        "inputTokens": 900 + plan.seed % 400,
        "outputTokens": 40 + plan.seed % 60,
        "cachedReadTokens": 512,
        "thoughtTokens": None,
    }
    usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
    send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn", "usage": usage}})
    return request_id


if __name__ == "__main__":
    sys.exit(main())
