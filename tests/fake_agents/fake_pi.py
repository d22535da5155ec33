#!/usr/bin/env python3
"""A stand-in for the pi coding agent in `--mode json --print --no-session` mode.

It takes the prompt as its last argument (input files as `@path` arguments before it) and writes pi's event
stream, one JSON object per line: the `session` header, `agent_start`, per turn `turn_start`, the messages'
`message_start`/`message_update`/`message_end` (the user's prompt, the assistant's `toolCall` and text
blocks with api, provider, model, usage and stopReason, each tool's `toolResult`), `tool_execution_start`/
`_end` around each tool, `turn_end`, and `agent_end` with every message. Timestamps are fixed, so a run is
repeatable. What it does is scenario.py's plan over the skills in `.agents/skills` with pi's tools (`read`,
`write`, `bash`; pi has no skill tool, so a skill is read).

`FAKE_AGENT_LOG=FILE` appends what it was started with: argv, working folder, the prompt, the input files,
whether `prompt.md` was in its folder and what it held, and which providers' variables it saw. Markers in the
prompt: `FAKE_FAIL` exits 2 with a message on stderr; `FAKE_SLEEP` sleeps 60 s. Needs `--mode json`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(os.path.realpath(__file__)).parent))
import scenario

PREFIXES = (
    "OPENROUTER_",
    "ANTHROPIC_",
    "OPENAI_",
    "AZURE_OPENAI_",
    "GEMINI_",
    "GOOGLE_GENERATIVE_AI_",
    "GROQ_",
    "XAI_",
)
T0 = 1_795_000_000_000


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")


def option(args: list[str], name: str, default: str) -> str:
    return args[args.index(name) + 1] if name in args else default


def main() -> int:
    args = sys.argv[1:]
    if option(args, "--mode", "") != "json":
        sys.stderr.write("fake pi: only --mode json is faked\n")
        return 1
    prompt = args[-1] if args else ""
    files = [a[1:] for a in args if a.startswith("@")]
    folder = Path.cwd()
    if os.environ.get("FAKE_AGENT_LOG"):
        saved = folder / "prompt.md"
        entry = {
            "agent": "pi",
            "argv": args,
            "cwd": str(folder),
            "prompt": prompt,
            "files": files,
            "prompt_md": saved.read_text(encoding="utf-8") if saved.exists() else None,
            "provider_env": sorted(k for k in os.environ if k.startswith(PREFIXES)),
        }
        with open(os.environ["FAKE_AGENT_LOG"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    if "FAKE_FAIL" in prompt:
        sys.stderr.write("fake pi: no API key for the provider\n")
        return 2
    if "FAKE_SLEEP" in prompt:
        time.sleep(60)
    provider = option(args, "--provider", "google")
    model = option(args, "--model", "fake-pi-model")
    plan = scenario.plan(prompt, folder, (".agents/skills",), has_skill_tool=False)
    clock = [T0]

    def now() -> int:
        clock[0] += 137
        return clock[0]

    def assistant(content: list, n: int, stop: str) -> dict:
        usage = {"input": 800 + 100 * n + plan.seed % 50, "output": 30 + n, "cacheRead": 0, "cacheWrite": 0}
        usage["totalTokens"] = usage["input"] + usage["output"]
        usage["cost"] = {"input": 0.001, "output": 0.0005, "cacheRead": 0, "cacheWrite": 0, "total": 0.0015}
        return {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": provider,
            "model": model,
            "usage": usage,
            "stopReason": stop,
            "timestamp": now(),
        }

    emit(
        {
            "type": "session",
            "id": "fake-pi-session",
            "version": 3,
            "timestamp": "2026-11-28T10:00:00.000Z",
            "cwd": str(folder),
        }
    )
    emit({"type": "agent_start"})
    user = {"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": now()}
    messages = [user]
    emit({"type": "turn_start"})
    emit({"type": "message_start", "message": user})
    emit({"type": "message_end", "message": user})
    tools = {"read": "read", "write": "write", "bash": "bash"}
    for n, step in enumerate(plan.steps, start=1):
        call_id = f"call_{n}"
        args_of = {"path": step.args["path"]} if step.kind == "read" else step.args
        message = assistant(
            [{"type": "toolCall", "id": call_id, "name": tools[step.kind], "arguments": args_of}], n, "toolUse"
        )
        emit({"type": "message_start", "message": {**message, "content": []}})
        emit(
            {
                "type": "message_update",
                "message": message,
                "assistantMessageEvent": {"type": "toolcall_end", "contentIndex": 0},
            }
        )
        emit({"type": "message_end", "message": message})
        emit({"type": "tool_execution_start", "toolCallId": call_id, "toolName": tools[step.kind], "args": args_of})
        scenario.carry_out(step, folder)
        result = {"content": [{"type": "text", "text": step.result}], "details": {}}
        emit(
            {
                "type": "tool_execution_end",
                "toolCallId": call_id,
                "toolName": tools[step.kind],
                "result": result,
                "isError": False,
            }
        )
        tool_result = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": tools[step.kind],
            "content": result["content"],
            "isError": False,
            "timestamp": now(),
        }
        emit({"type": "message_start", "message": tool_result})
        emit({"type": "message_end", "message": tool_result})
        emit({"type": "turn_end", "message": message, "toolResults": [tool_result]})
        emit({"type": "turn_start"})
        messages += [message, tool_result]
    final = assistant([{"type": "text", "text": plan.answer}], len(plan.steps) + 1, "stop")
    emit({"type": "message_start", "message": {**final, "content": []}})
    emit(
        {
            "type": "message_update",
            "message": final,
            "assistantMessageEvent": {"type": "text_delta", "delta": plan.answer, "contentIndex": 0},
        }
    )
    emit({"type": "message_end", "message": final})
    emit({"type": "turn_end", "message": final, "toolResults": []})
    messages.append(final)
    emit({"type": "agent_end", "messages": messages})
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
