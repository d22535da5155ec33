"""What a new user found missing in replays and targets files:

- a replay of AgentV rows that kept no trace (only the answer) grades a trace grader as AgentV grades a
  response without one (``No trace available for evaluation``), not as zero tool calls, and says so;
- ``replay --prompt MEMBER=`` swaps the prompt of an LLM grader inside a composite, and the composite's own
  name is refused naming its members;
- ``validate`` and ``run`` warn, naming file, line and field, where AgentV 4.42.4 would refuse a literal or
  leave an embedded ``${{ NAME }}`` unresolved.

Real files, real subprocesses (a cli agent), the tests' OpenAI-compatible judge server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from judge_server import JudgeServer

from evalstore import cli

AGENT = """\
import json, sys
calls = [{"tool": "search", "input": {"q": "x"}, "output": "ok"}, {"tool": "Read", "input": {"file_path": "a"}}]
out = [{"role": "assistant", "content": "Looking.", "tool_calls": calls}, {"role": "assistant", "content": "Paris"}]
json.dump({"output": out}, open(sys.argv[1], "w"))
"""


def es(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli.main, ["--db", db, *args])


def ok(result: Result) -> Result:
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output, result.output
    return result


def _agent_suite(root: Path, assertions: str, judge_url: str | None = None) -> Path:
    """An eval of one test ``t1`` answered by a cli agent that calls two tools, and its targets file."""
    (root / "evals").mkdir(parents=True)
    (root / "agent.py").write_text(AGENT)
    targets = f"targets:\n  - name: tools\n    provider: cli\n    command: [{sys.executable}, {root / 'agent.py'}, '{{OUTPUT_FILE}}']\n"
    if judge_url:
        targets += (
            "    grader_target: judge\n  - name: judge\n    provider: openai\n"
            f"    base_url: {judge_url}\n    api_key: ${{{{ GAPS_KEY }}}}\n    model: ${{{{ GAPS_MODEL }}}}\n"
        )
    (root / "targets.yaml").write_text(targets)
    eval_path = root / "evals" / "t.eval.yaml"
    eval_path.write_text(
        "name: gaps\nexecution: {target: tools}\ntests:\n  - id: t1\n    input: What is the capital of France?\n"
        f"    criteria: Says Paris\n    assertions:\n{assertions}"
    )
    return eval_path


TRACE_GRADERS = """\
      - {name: traj, type: tool-trajectory, mode: any_order, minimums: {search: 1, Read: 1}}
      - {name: em, type: execution-metrics, max_llm_calls: 1}
      - {name: seq, type: tool-trajectory, mode: in_order, expected: [{tool: search}]}
"""


def _verdicts(db: str, run: str) -> dict[str, dict]:
    """The one result's verdicts by grader, from the JSON export."""
    (result,) = json.loads(ok(es(db, "export", run, "--format", "json")).stdout)["results"]
    return {v["grader"]: v for v in result["verdicts"]}


def test_a_trace_grader_regrading_a_result_with_no_trace_says_so(tmp_path: Path) -> None:
    eval_path = _agent_suite(tmp_path, TRACE_GRADERS)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = json.loads(ok(es(db, "run", str(eval_path), "--json")).stdout)["run_id"]
    assert _verdicts(db, ran)["traj"]["score"] == 1.0
    replayed = ok(es(db, "replay", ran))  # the run's own results have their trace: graded as they were
    assert "trace" not in replayed.stderr and _verdicts(db, "last")["traj"]["score"] == 1.0, replayed.stderr
    # The AgentV rows alone (as `agentv eval` leaves index.jsonl without its run folder): the answer, no trace.
    rows = tmp_path / "rows.jsonl"
    ok(es(db, "export", ran, "--format", "agentv-jsonl", "-o", str(rows)))
    row = json.loads(rows.read_text())
    row.pop("trace", None)
    rows.write_text(json.dumps(row) + "\n")
    imported = json.loads(ok(es(db, "import", str(rows), "--eval", str(eval_path), "--json")).stdout)["run_id"]
    replay = ok(es(db, "replay", imported, "--json"))
    warnings = [w for w in replay.stderr.splitlines() if "recorded no trace" in w]
    assert len(warnings) == 1 and "1 test (t1)" in warnings[0] and "em, seq, traj" in warnings[0], replay.stdout
    verdicts = _verdicts(db, json.loads(replay.stdout)["run_id"])
    for name, text in (("traj", "No trace available for evaluation"), ("seq", "No trace available for evaluation")):
        assert verdicts[name]["score"] == 0.0 and verdicts[name]["verdict"] == "fail"
        assert [a["text"] for a in verdicts[name]["assertions"]] == [text]
    # Not "LLM calls 0 <= 1": the limit has nothing to count.
    assert [a["text"] for a in verdicts["em"]["assertions"]] == ["No trace summary available"]
    assert verdicts["em"]["score"] == 0.0


COMPOSITE = """\
      - name: combo
        type: composite
        assertions:
          - {name: has-paris, type: contains, value: Paris}
          - {name: judged, type: llm-grader}
        aggregator: {type: weighted_average}
"""


@pytest.fixture
def composite_run(tmp_path: Path, judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("GAPS_KEY", "k")
    monkeypatch.setenv("GAPS_MODEL", "judge-model")
    eval_path = _agent_suite(tmp_path, COMPOSITE, judge_url=judge_server.base_url)
    (tmp_path / "strict.md").write_text("STRICT grading. Answer:\n{{output}}\n")
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = json.loads(ok(es(db, "run", str(eval_path), "--json")).stdout)["run_id"]
    return db, ran


def test_a_prompt_swap_reaches_an_llm_grader_inside_a_composite(
    composite_run: tuple[str, str], judge_server: JudgeServer
) -> None:
    db, ran = composite_run
    asked = len(judge_server.requests)
    replay = json.loads(ok(es(db, "replay", ran, "--prompt", "judged=file://strict.md", "--json")).stdout)
    prompts = [r.user for r in judge_server.requests[asked:]]
    assert len(prompts) == 1 and prompts[0].startswith("STRICT grading"), prompts
    members = _verdicts(db, replay["run_id"])["combo"]["details"]["scores"]
    assert [m["name"] for m in members] == ["has-paris", "judged"]
    # With --graders, the composite that holds the member is what is regraded.
    ok(es(db, "replay", ran, "--graders", "combo", "--prompt", "judged=file://strict.md"))


def test_a_prompt_swap_naming_the_composite_names_its_llm_member(composite_run: tuple[str, str]) -> None:
    db, ran = composite_run
    result = es(db, "replay", ran, "--prompt", "combo=file://strict.md")
    assert result.exit_code == 2 and "Traceback" not in result.output
    line = result.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("Error: --prompt combo: 'combo' is a composite"), line
    assert "--prompt judged=file://" in line and "(its LLM members: judged)" in line, line


def test_a_prompt_swap_naming_no_llm_grader_lists_the_members_too(composite_run: tuple[str, str]) -> None:
    db, ran = composite_run
    result = es(db, "replay", ran, "--prompt", "nope=file://strict.md")
    assert result.exit_code == 2
    assert "its LLM graders: judged (in composite combo)" in result.stderr, result.stderr


TARGETS = """\
targets:
  - name: sh-agent
    provider: cli
    command: sh ${{ GAPS_DIR }}/agent.sh {OUTPUT_FILE}
  - name: whole
    provider: cli
    command: ${{ GAPS_CMD }}
  - name: llm
    provider: openai
    base_url: http://127.0.0.1:1/v1
    api_key: ${{ GAPS_KEY }}
    model: gpt-literal
  - name: az
    provider: azure
    endpoint: ${{ GAPS_END }}
    api_key: sk-literal-not-shown
    deployment: ${{ GAPS_DEP }}
"""


def test_validate_warns_where_agentv_would_refuse_or_not_substitute(tmp_path: Path) -> None:
    folder = tmp_path / ".agentv"
    folder.mkdir()
    path = folder / "targets.yaml"
    path.write_text(TARGETS)
    result = CliRunner().invoke(cli.main, ["validate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    (checked,) = (
        json.loads(result.stdout)["files"] if "files" in json.loads(result.stdout) else json.loads(result.stdout)
    )
    warnings = checked["warnings"]
    assert len(warnings) == 3, warnings
    embedded, model, key = warnings
    assert embedded.startswith(f"{path}:4: target 'sh-agent': field 'command': AgentV 4.42.4 resolves")
    assert "only when it is the whole value" in embedded
    assert model.startswith(f"{path}:12: target 'llm': field 'model': AgentV 4.42.4 refuses")
    assert key.startswith(f"{path}:16: target 'az': field 'api_key': AgentV 4.42.4 refuses")
    assert "sk-literal-not-shown" not in result.stdout


def test_run_warns_of_its_targets_embedded_reference_and_still_substitutes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "agent.sh").write_text('echo "hello from agent" > "$1"\n')
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(TARGETS)
    eval_path = tmp_path / "evals" / "e.eval.yaml"
    eval_path.write_text(
        "name: embedded\nexecution: {target: sh-agent}\ntests:\n  - id: t1\n    input: say hello\n"
        "    assertions: [{type: contains, value: hello}]\n"
    )
    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("GAPS_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    ran = ok(es(db, "run", str(eval_path), "--json"))
    assert _verdicts(db, json.loads(ran.stdout)["run_id"])["contains-hello"]["score"] == 1.0
    # Only the target the run uses is warned about (validate names the others).
    assert [w for w in ran.stderr.splitlines() if "AgentV 4.42.4" in w] == [
        f"warning: {tmp_path / '.agentv' / 'targets.yaml'}:4: target 'sh-agent': field 'command': AgentV 4.42.4 resolves "
        "${{ NAME }} only when it is the whole value and passes this one on as written (a shell then fails with "
        "'Bad substitution'); evalstore substitutes it"
    ]
