"""``evalstore run`` checks everything it can before the (expensive) agent runs: an LLM grader with no
judge it can call, an unset ``${{ VAR }}`` in the judge target, an agent command that does not exist,
an unknown assertion type. Each is one ``Error:`` line, exit 2, with no agent started and no run
recorded; an agent (cli) target is never offered (or picked) as its own judge; a chat target naming
no judge is its own (AgentV).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json, one_line_error
from judge_server import JudgeServer, Reply

PY = sys.executable
AGENT = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran'); print('The answer is 42.')"


@pytest.fixture(autouse=True)
def _no_env_judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL", "EVALSTORE_JUDGE_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def project(root: Path, targets: list[dict], assertions: str = "- {name: quality, type: llm-grader}") -> Path:
    """A targets file (written as JSON, which is YAML) and a one-test eval run on the first target."""
    (root / ".agentv").mkdir(parents=True, exist_ok=True)
    (root / ".agentv" / "targets.yaml").write_text(json.dumps({"targets": targets}, indent=2), encoding="utf-8")
    eval_file = root / "suite.eval.yaml"
    body = textwrap.dedent(f"""\
        name: preflight
        execution:
          target: {targets[0]["name"]}
        tests:
          - id: only
            input: What is 6 x 7?
            criteria: says 42
            assertions:
        """) + textwrap.indent(textwrap.dedent(assertions), "      ")
    eval_file.write_text(body, encoding="utf-8")
    return eval_file


def agent_target(marker: Path) -> dict:
    return {"name": "agent", "provider": "cli", "command": [PY, "-c", AGENT, str(marker)]}


def refused(tmp_path: Path, eval_file: Path, *args: str, env: dict[str, str] | None = None) -> str:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    line = one_line_error(cli(db, "run", str(eval_file), "--workdir", str(tmp_path / "ws"), *args, env=env))
    assert ok_json(cli(db, "runs", "--json")) == []  # nothing recorded
    return line


def test_an_llm_grader_with_no_judge_configured_is_refused_before_the_agent_runs(tmp_path: Path) -> None:
    marker = tmp_path / "agent-ran"
    eval_file = project(tmp_path / "proj", [agent_target(marker)])
    line = refused(tmp_path, eval_file)
    assert line.startswith(f"Error: {eval_file}: test 'only': grader 'quality' needs a judge: no judge target chosen")
    assert "judges available" not in line  # the cli agent is no judge, and is not offered as one
    assert not marker.exists()


def test_an_unset_variable_in_the_judge_target_is_refused_before_the_agent_runs(tmp_path: Path) -> None:
    marker = tmp_path / "agent-ran"
    judge = {
        "name": "judge",
        "provider": "openai-compatible",
        "base_url": "https://${{ PREFLIGHT_UNSET_JUDGE_HOST }}/v1",
        "model": "m",
    }
    eval_file = project(tmp_path / "proj", [agent_target(marker), judge])
    line = refused(tmp_path, eval_file, "--judge-target", "judge")
    assert "grader 'quality' needs a judge" in line and "PREFLIGHT_UNSET_JUDGE_HOST" in line, line
    assert not marker.exists()


def test_an_unset_judge_key_is_refused_before_the_agent_runs(tmp_path: Path, judge_server: JudgeServer) -> None:
    marker = tmp_path / "agent-ran"
    judge = {
        "name": "judge",
        "provider": "openai-compatible",
        "base_url": judge_server.base_url,
        "model": "m",
        "api_key": "${{ PREFLIGHT_UNSET_JUDGE_KEY }}",
    }
    eval_file = project(tmp_path / "proj", [agent_target(marker), judge])
    line = refused(tmp_path, eval_file, "--judge-target", "judge")
    assert "PREFLIGHT_UNSET_JUDGE_KEY" in line and "not set" in line, line
    assert not marker.exists() and judge_server.requests == []


@pytest.mark.parametrize("shape", ["argv", "shell"])
def test_a_cli_target_whose_program_does_not_exist_is_refused(tmp_path: Path, shape: str) -> None:
    command = ["no-such-agent-7f3e", "{PROMPT}"] if shape == "argv" else "no-such-agent-7f3e --prompt {PROMPT}"
    eval_file = project(
        tmp_path / "proj",
        [{"name": "agent", "provider": "cli", "command": command}],
        "- {name: says-42, type: contains, value: '42'}",
    )
    line = refused(tmp_path, eval_file)
    assert "target 'agent'" in line and "'no-such-agent-7f3e'" in line and "not found on PATH" in line, line


def test_an_unknown_assertion_type_is_refused_before_the_agent_runs(tmp_path: Path) -> None:
    marker = tmp_path / "agent-ran"
    eval_file = project(tmp_path / "proj", [agent_target(marker)], "- {name: says-42, type: contians, value: '42'}")
    line = refused(tmp_path, eval_file)
    assert line.endswith("unknown grader type `contians`; did you mean `contains`?"), line
    assert not marker.exists()


def test_a_model_target_without_grader_target_grades_its_own_answers_as_in_agentv(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    """AgentV's runtime takes ``grader_target ?? name``: a Chat Completions target that names no judge is
    its own, even with another judge beside it; one that names a judge gets that one."""
    chat = {
        "name": "chat",
        "provider": "openai",
        "base_url": judge_server.base_url,
        "model": "chat-model",
        "max_retries": 0,
    }
    judge = {
        "name": "judge",
        "provider": "openai-compatible",
        "base_url": judge_server.base_url,
        "model": "judge-model",
    }
    judge_server.respond_with(
        lambda request: (
            Reply(content=json.dumps({"score": 1.0, "assertions": []}))
            if "says 42" in json.dumps(request.body)
            else Reply(content="The answer is 42.")
        )
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"
    eval_file = project(tmp_path / "proj", [chat, judge])
    out = ok_json(cli(db, "run", str(eval_file), "--json", "--workdir", str(tmp_path / "ws")))
    assert [r["graders"] for r in out["results"]] == [{"quality": 1.0}]
    assert [r.body["model"] for r in judge_server.requests] == ["chat-model", "chat-model"]

    project(tmp_path / "proj", [{**chat, "grader_target": "judge"}, judge])
    before = len(judge_server.requests)
    out = ok_json(cli(db, "run", str(eval_file), "--json", "--workdir", str(tmp_path / "ws2")))
    assert [r["graders"] for r in out["results"]] == [{"quality": 1.0}]
    assert [r.body["model"] for r in judge_server.requests[before:]] == ["chat-model", "judge-model"]
