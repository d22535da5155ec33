#!/usr/bin/env python3
"""A stand-in for Claude Code (`claude`) that speaks its `-p --output-format stream-json --verbose` protocol.

It reads the prompt from stdin and answers with the event stream Claude Code writes: a `system` init event,
`stream_event` partial-message events (`--include-partial-messages`), one `assistant` event per model turn
(text and `tool_use` blocks), a `user` event with each tool's `tool_result`, and a closing `result` event
with cost, duration and usage. What it does is a pure function of the prompt and of the skills in its
working folder (`.claude/skills/NAME/SKILL.md`), so AgentV and evalstore, given the same prompt, get the
same stream:

- a prompt that names a skill's word (`acme-deploy` -> "deploy") and asks how: the `Skill` tool with that
  skill, then an answer quoting the skill's first heading;
- a prompt asking to roll something back: the skill's file read with `Read` instead;
- a prompt asking for code: `Read` of the first skill file it sees (a wrong trigger), then `Write` of
  `answer.py` in the working folder;
- anything else: `Bash` (`date`) then a plain answer.

`FAKE_AGENT_LOG=FILE` appends what it was started with (argv, working folder, prompt, whether Claude Code's
session markers were set) as a JSON line. Markers in the prompt: `FAKE_FAIL` exits 2 with a message on
stderr; `FAKE_SLEEP` sleeps 60 s. Like Claude Code, `--output-format stream-json` with `-p` needs `--verbose`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def assistant(n: int, blocks: list[dict], model: str) -> dict:
    usage = {
        "input_tokens": 3 + n,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 100 * n,
        "output_tokens": 9 * n,
    }
    return {
        "type": "assistant",
        "message": {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "usage": usage,
        },
        "session_id": "fake-session",
    }


def tool_result(use_id: str, content: str) -> dict:
    return {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": content}]},
        "session_id": "fake-session",
    }


def skills(folder: Path) -> list[tuple[str, Path]]:
    root = folder / ".claude" / "skills"
    return sorted((p.parent.name, p) for p in root.glob("*/SKILL.md")) if root.is_dir() else []


def main() -> int:
    args = sys.argv[1:]
    if "-p" in args and "stream-json" in args and "--verbose" not in args:
        sys.stderr.write("Error: When using --print, --output-format=stream-json requires --verbose\n")
        return 1
    model = args[args.index("--model") + 1] if "--model" in args else "claude-fake-1"
    prompt = sys.stdin.read()
    cwd = Path.cwd()
    log = os.environ.get("FAKE_AGENT_LOG")
    if log:
        entry = {
            "agent": "claude",
            "argv": args,
            "cwd": str(cwd),
            "prompt": prompt,
            "nested_session_markers": [k for k in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT") if k in os.environ],
        }
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    if "FAKE_FAIL" in prompt:
        sys.stderr.write("fake claude: the model refused to start\n")
        return 2
    if "FAKE_SLEEP" in prompt:
        time.sleep(60)

    seed = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)
    emit(
        {
            "type": "system",
            "subtype": "init",
            "cwd": str(cwd),
            "session_id": "fake-session",
            "model": model,
            "tools": ["Bash", "Read", "Write", "Skill"],
        }
    )
    emit(
        {
            "type": "stream_event",
            "event": {"type": "message_start", "message": {"id": "msg_1"}},
            "session_id": "fake-session",
        }
    )
    question = prompt.split("[[ ## user_query ## ]]")[-1].strip()
    lowered = question.lower()
    found = skills(cwd)
    turns: list[dict] = []
    answer = ""
    named = next(((name, path) for name, path in found if name.split("-")[-1] in lowered), None)
    if named and ("roll back" in lowered or "rollback" in lowered):
        path = f".claude/skills/{named[0]}/SKILL.md"
        turns.append(
            assistant(
                1,
                [
                    {"type": "text", "text": "Reading the procedure."},
                    {"type": "tool_use", "id": "toolu_read", "name": "Read", "input": {"file_path": path}},
                ],
                model,
            )
        )
        turns.append(tool_result("toolu_read", named[1].read_text(encoding="utf-8")))
        answer = f"Per {named[0]}: " + _heading(named[1])
    elif named:
        turns.append(
            assistant(
                1, [{"type": "tool_use", "id": "toolu_skill", "name": "Skill", "input": {"skill": named[0]}}], model
            )
        )
        turns.append(tool_result("toolu_skill", f"Launching skill: {named[0]}"))
        answer = f"Per {named[0]}: " + _heading(named[1])
    elif any(word in lowered for word in ("function", "write", "code")) and found:
        name, path = found[0]
        turns.append(
            assistant(
                1,
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_read",
                        "name": "Read",
                        "input": {"file_path": f".claude/skills/{name}/SKILL.md"},
                    }
                ],
                model,
            )
        )
        turns.append(tool_result("toolu_read", path.read_text(encoding="utf-8")))
        source = "def parse(lines):\n    return [l for l in lines if 'error' in l]\n"
        (cwd / "answer.py").write_text(source, encoding="utf-8")
        turns.append(
            assistant(
                2,
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_write",
                        "name": "Write",
                        "input": {"file_path": "answer.py", "content": source},
                    }
                ],
                model,
            )
        )
        turns.append(tool_result("toolu_write", "File created successfully at: answer.py"))
        answer = "Wrote answer.py with a parse function."
    else:
        turns.append(
            assistant(
                1,
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_bash",
                        "name": "Bash",
                        "input": {"command": "date", "description": "Show the time"},
                    }
                ],
                model,
            )
        )
        turns.append(tool_result("toolu_bash", "Sat Nov 28 10:00:00 UTC 2026"))
        answer = f"I cannot know that reliably (answer {seed % 1000})."
    for event in turns:
        emit(event)
    n = sum(1 for e in turns if e["type"] == "assistant") + 1
    emit(assistant(n, [{"type": "text", "text": answer}], model))
    usage = {
        "input_tokens": 10 + seed % 50,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000 * n,
        "output_tokens": 20 + seed % 30,
    }
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 1500 + seed % 1000,
            "duration_api_ms": 1200,
            "num_turns": n,
            "result": answer,
            "session_id": "fake-session",
            "total_cost_usd": round(0.001 * n + (seed % 100) / 100000, 6),
            "usage": usage,
        }
    )
    return 0


def _heading(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return path.parent.name


if __name__ == "__main__":
    sys.exit(main())
