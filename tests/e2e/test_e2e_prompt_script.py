"""An executable prompt template (``prompt: {command: [...], config}``) end to end: ``evalstore run`` runs the
script and the judge gets what it printed; an unchanged ``evalstore replay`` runs neither the script nor the
judge; with the script gone from disk, a replay runs it from the bytes the run's snapshot kept."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from e2e_helpers import evalstore, ok_json, write_chat_targets
from judge_server import JudgeServer, Reply, Request, freeform

PY = sys.executable
KEY_ENV = "E2E_PROMPT_SCRIPT_KEY"
SCRIPT = """\
import json, os, sys
payload = json.load(sys.stdin)
with open(os.environ["TEMPLATE_LOG"], "a") as log:
    log.write(os.getcwd() + "\\n")
print("Strictly ({}): does {{{{output}}}} answer {{{{input}}}}?".format(payload["config"]["rubric"]))
"""


def _project(root: Path, base_url: str) -> Path:
    write_chat_targets(root, base_url, KEY_ENV)
    (root / "prompts").mkdir()
    (root / "prompts" / "template.py").write_text(SCRIPT)
    (root / "evals").mkdir()
    eval_file = root / "evals" / "templated.eval.yaml"
    eval_file.write_text(
        textwrap.dedent(f"""\
            execution: {{target: agent}}
            tests:
              - id: sum
                input: What is 2 + 2?
                criteria: Answers 4
                assertions:
                  - name: custom
                    type: llm-grader
                    prompt:
                      command: ["{PY}", ../prompts/template.py]
                      config: {{rubric: says 4}}
            """)
    )
    return eval_file


def test_a_prompt_template_runs_in_run_is_reused_by_replay_and_restored_when_gone(
    tmp_path: Path, judge_server: JudgeServer
) -> None:
    def respond(request: Request) -> Reply:
        return Reply(content="4") if request.body["model"] == "agent-model" else freeform(0.9)

    judge_server.respond_with(respond)
    root = tmp_path / "proj"
    eval_file = _project(root, judge_server.base_url)
    log = tmp_path / "template.log"
    env = {KEY_ENV: "sk-template", "TEMPLATE_LOG": str(log)}
    db = f"sqlite:///{tmp_path / 'store.db'}"

    run = ok_json(evalstore(db, "run", str(eval_file), "--json", cwd=tmp_path, env=env))
    assert run["results"][0]["graders"] == {"custom": 0.9}
    judged = [r for r in judge_server.requests if r.body["model"] == "judge-model"]
    assert [r.user for r in judged] == ["Strictly (says 4): does 4 answer What is 2 + 2??"]
    assert log.read_text().splitlines() == [str(root / "prompts")]  # run in the script's own folder

    asked = len(judge_server.requests)
    ok_json(evalstore(db, "replay", run["run_id"], "--json", cwd=tmp_path, env=env))
    assert len(judge_server.requests) == asked and len(log.read_text().splitlines()) == 1

    (root / "prompts" / "template.py").unlink()
    again = ok_json(evalstore(db, "replay", run["run_id"], "--no-cache", "--json", cwd=tmp_path, env=env))
    [drift] = again["drift"]
    assert drift.startswith(f"grader_script {root / 'prompts' / 'template.py'} is gone: run from the bytes recorded")
    assert len(log.read_text().splitlines()) == 2  # the recorded bytes ran, from a private folder
    assert json.loads(judge_server.requests[-1].raw)["messages"][-1]["content"] == judged[0].user
