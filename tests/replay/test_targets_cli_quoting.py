"""A ``${{ VAR }}`` in a cli target's string command is shell-quoted (issue 29 item 8). AgentV substitutes
it raw into ``sh -c``; evalstore quotes it as it quotes ``{PROMPT}``: a deliberate difference."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from evalstore.replay.content import Message
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import run_target

PY = shlex.quote(sys.executable)


def test_a_variable_in_a_string_command_is_shell_quoted(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    eval_dir = tmp_path / "suite"
    eval_dir.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text("import sys\nprint('token=' + sys.argv[1] + '|' + str(len(sys.argv)))\n")
    test = EvalTest(id="t-1", input=[Message(role="user", content="hi")])
    for value in ["x; touch PWNED; echo", 'a "quoted" $(touch PWNED2) value', "it's `touch PWNED3`"]:
        monkeypatch.setenv("AGENT_NOTE", value)
        target = {
            "name": "agent",
            "provider": "cli",
            "command": f"{PY} {shlex.quote(str(agent))} ${{{{ AGENT_NOTE }}}}",
        }
        outcome = run_target(target, test, workspace=tmp_path / "ws", eval_dir=eval_dir)
        assert outcome.status == "ok", outcome.error
        assert outcome.output_text.strip() == f"token={value}|2"
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))
