"""``evalstore run`` checks everything it can before the (expensive) agent runs: an unset ``${{ VAR }}`` or
key in the judge target, an agent command that does not exist, an eval file that does not load. Each is one
``Error:`` line, exit 2, with no agent started and no run recorded; an agent (cli) target is never offered
(or picked) as its own judge; a chat target naming no judge, or one not defined, is its own (AgentV).

An LLM grader with no judge to be found at all is no reason to stop: AgentV 4.42.4 starts the suite, runs the
agent and records the grader's failure ("No grader provider available for LLM grading"), and so does
``run``, warning once before the agent starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import cli, ok_json, one_line_error
from judge_server import JudgeServer, Reply

PY = sys.executable
EVALSTORE = Path(sys.executable).parent / "evalstore"
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
    assert not (tmp_path / "store.db").exists()  # nothing recorded: not even a store made
    return line


NO_PROVIDER = "No grader provider available for LLM grading"
"""What AgentV 4.42.4's llm-grader throws with no grader provider (llm-grader.ts:235)."""


def ran(tmp_path: Path, eval_file: Path, *args: str, code: int = 1) -> tuple[dict, list[str]]:
    """``run --json`` that runs: its JSON, and the warnings it printed on stderr."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = cli(db, "run", str(eval_file), "--workdir", str(tmp_path / "ws"), "--json", *args)
    out = ok_json(result, code)
    return out, [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def verdicts(tmp_path: Path, run_id: str, test: str = "only") -> dict[str, dict]:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    (audited,) = ok_json(cli(db, "audit", run_id, test, "--json"))["tests"]
    return {v["grader"]: v for v in audited["verdicts"]}


def test_an_llm_grader_with_no_judge_runs_the_agent_and_records_agentv_s_failure(tmp_path: Path) -> None:
    """As AgentV's orchestrator catches a grader that throws (orchestrator.ts:2806): the grader scores 0 and
    fails with "Grader 'NAME' failed: ...", a quality verdict that counts in the test's mean. Warned about
    once, before the agent runs; a replay of the run refuses, as a replay with no judge does."""
    marker = tmp_path / "agent-ran"
    eval_file = project(
        tmp_path / "proj",
        [agent_target(marker)],
        "- {name: quality, type: llm-grader}\n- {name: says-42, type: contains, value: '42'}",
    )
    out, warnings = ran(tmp_path, eval_file)
    assert marker.exists()
    assert len(warnings) == 1 and "'quality'" in warnings[0] and "no judge target chosen" in warnings[0], warnings
    (row,) = out["results"]
    assert (row["score"], row["status"], row["graders"]) == (0.5, "quality_failure", {"quality": 0.0, "says-42": 1.0})
    quality = verdicts(tmp_path, out["run_id"])["quality"]
    assert (quality["score"], quality["verdict"], quality["status"]) == (0.0, "fail", "ok")
    assert [(a["text"], a["passed"]) for a in quality["assertions"]] == [
        (f"Grader 'quality' failed: {NO_PROVIDER}", False)
    ]
    db = f"sqlite:///{tmp_path / 'store.db'}"
    line = one_line_error(cli(db, "replay", out["run_id"]))
    assert "no judge target chosen" in line, line


def test_a_test_without_assertions_and_no_judge_is_agentv_s_execution_error(tmp_path: Path) -> None:
    """A test with no assertions is graded by the implicit llm-grader outside that catch: AgentV's test ends
    in an evaluator execution error whose error is the message (features/local-cli's recorded row)."""
    marker = tmp_path / "agent-ran"
    eval_file = project(tmp_path / "proj", [agent_target(marker)])
    eval_file.write_text(eval_file.read_text("utf-8").split("    assertions:")[0], encoding="utf-8")
    out, warnings = ran(tmp_path, eval_file)
    assert marker.exists() and len(warnings) == 1, warnings
    (row,) = out["results"]
    assert (row["score"], row["status"]) == (0.0, "execution_error")
    assert row["error"] == f"llm-grader: {NO_PROVIDER}", row["error"]


def test_a_grader_naming_a_target_not_defined_records_agentv_s_message(tmp_path: Path) -> None:
    """A grader's own ``target:`` not defined: AgentV's factory throws its own message (builtin-graders.ts:91)."""
    marker = tmp_path / "agent-ran"
    eval_file = project(
        tmp_path / "proj", [agent_target(marker)], "- {name: quality, type: llm-grader, target: nobody}"
    )
    out, warnings = ran(tmp_path, eval_file)
    assert marker.exists() and len(warnings) == 1 and "'nobody' is not defined" in warnings[0], warnings
    (text,) = [a["text"] for a in verdicts(tmp_path, out["run_id"])["quality"]["assertions"]]
    assert text == "Grader 'quality' failed: llm-grader evaluator 'quality': target 'nobody' not found in targets"


def test_a_composite_whose_llm_aggregator_has_no_judge_fails_as_in_agentv(tmp_path: Path) -> None:
    """AgentV's LLM aggregator throws "No grader provider available for LLM aggregation" (composite.ts:309),
    and the composite is recorded as a grader that threw. Warned about before the agent runs, and a replay
    refuses, as for an LLM grader with no judge: the aggregator asks a judge too."""
    marker = tmp_path / "agent-ran"
    composite = """\
        - name: combo
          type: composite
          assertions:
            - {name: says-42, type: contains, value: '42'}
          aggregator: {type: llm-grader}
        """
    out, warnings = ran(tmp_path, project(tmp_path / "proj", [agent_target(marker)], composite))
    assert len(warnings) == 1 and "'combo (aggregator)': no judge target chosen" in warnings[0], warnings
    combo = verdicts(tmp_path, out["run_id"])["combo"]
    assert (combo["score"], combo["verdict"], combo["status"]) == (0.0, "fail", "ok")
    assert [a["text"] for a in combo["assertions"]] == [
        "Grader 'combo' failed: No grader provider available for LLM aggregation"
    ]
    line = one_line_error(cli(f"sqlite:///{tmp_path / 'store.db'}", "replay", out["run_id"]))
    assert "LLM grader combo (aggregator): no judge target chosen" in line, line


def test_a_chat_target_naming_a_judge_not_defined_grades_its_own_answers_as_in_agentv(
    tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV resolves ``grader_target ?? name``, and when that name is not defined, a run target that can
    grade is its own judge (orchestrator.ts:218-224)."""
    monkeypatch.setenv("PREFLIGHT_CHAT_MODEL", "chat-model")  # AgentV takes an openai model by reference only
    chat = {
        "name": "chat",
        "provider": "openai",
        "base_url": judge_server.base_url,
        "model": "${{ PREFLIGHT_CHAT_MODEL }}",
        "max_retries": 0,
        "grader_target": "nobody",
    }
    judge_server.respond_with(
        lambda request: (
            Reply(content=json.dumps({"score": 1.0, "assertions": []}))
            if "says 42" in json.dumps(request.body)
            else Reply(content="The answer is 42.")
        )
    )
    out, warnings = ran(tmp_path, project(tmp_path / "proj", [chat]), code=0)
    assert warnings == [] and [r["graders"] for r in out["results"]] == [{"quality": 1.0}]
    assert [r.body["model"] for r in judge_server.requests] == ["chat-model", "chat-model"]


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


def test_an_unknown_assertion_type_is_warned_about_before_the_agent_runs_and_scores_0_as_in_agentv(
    tmp_path: Path,
) -> None:
    """AgentV 4.42.4 runs a suite with a type its registry does not hold and fails that grader, 0 counted in
    the test's score; so does ``run``, having said so (naming the type meant) before the agent started."""
    marker = tmp_path / "agent-ran"
    eval_file = project(
        tmp_path / "proj",
        [agent_target(marker)],
        "- {name: says-42, type: contians, value: '42'}\n- {type: contains, value: '42'}",
    )
    out, warnings = ran(tmp_path, eval_file)
    assert [w for w in warnings if "contians" in w] == [
        f"warning: {eval_file}:9: field `tests[0].assertions[0].type`: AgentV 4.42.4 has no grader type "
        "`contians` (did you mean `contains`?): grader `says-42` of test `only` scores 0 and fails when it runs "
        '("Unknown grader type"), counted in the score, in AgentV and here'
    ]
    assert marker.exists()
    [result] = out["results"]
    assert (result["score"], result["graders"]) == (0.5, {"says-42": 0.0, "contains-42": 1.0})
    says = verdicts(tmp_path, out["run_id"])["says-42"]
    assert (says["score"], says["verdict"], says["status"], says["grader_type"]) == (0.0, "fail", "ok", "contians")
    [text] = [a["text"] for a in says["assertions"]]
    assert text.startswith("Grader 'says-42' failed: Unknown grader type: \"contians\". Registered types: llm-grader,")


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


@pytest.mark.parametrize(
    ("assertions", "args", "problem"),
    [
        ("- {name: bad, type: ''}", (), "`type` is required"),
        ("- {name: has, type: contains, value: '42'}", ("--target", "nowhere"), "nowhere"),
    ],
)
def test_a_refused_run_leaves_no_store_behind(
    tmp_path: Path, assertions: str, args: tuple[str, ...], problem: str
) -> None:
    """With no --db, `run` makes .evalstore/ in the folder it runs in: not for an eval file or a target it
    refuses before any agent runs."""
    eval_file = project(tmp_path, [agent_target(tmp_path / "marker")], assertions)
    env = {k: v for k, v in os.environ.items() if k != "EVALSTORE_DB"}
    result = subprocess.run(
        [str(EVALSTORE), "run", str(eval_file), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert problem in one_line_error(result)
    assert not (tmp_path / ".evalstore").exists() and not (tmp_path / "marker").exists()
