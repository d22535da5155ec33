"""AgentV's providers that answer without an agent: ``mock`` and ``replay`` (``agentv.replay_fixture.v1``),
and the providers refused before a run starts. The ``replay`` end to end runs AgentV's own trace-evaluation
showcase (tests/fixtures/agentv-examples-4.42.4/examples/showcase/trace-evaluation), whose per-grader scores
the real AgentV 4.42.4 gave as 1 for every trace grader (its code graders need bun)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore.cli import main
from evalstore.replay.content import Message
from evalstore.replay.errors import TargetConfigError
from evalstore.replay.evalfile.specs import EvalTest
from evalstore.replay.targets import check_target, run_target
from evalstore.replay.targets.mock import DEFAULT_RESPONSE

SHOWCASE = (
    Path(__file__).parent.parent / "fixtures" / "agentv-examples-4.42.4" / "examples" / "showcase" / "trace-evaluation"
)
FIXTURES = SHOWCASE / "fixtures" / "replay-target-output.jsonl"


def a_test(test_id: str = "t1", text: str = "hello") -> EvalTest:
    return EvalTest(id=test_id, input=[Message(role="user", content=text)])


def test_mock_answers_its_response_or_agentvs_default(tmp_path) -> None:
    given = run_target(
        {"name": "m", "provider": "mock", "response": '{"riskLevel": "High"}'},
        a_test(),
        workspace=tmp_path,
        eval_dir=tmp_path,
    )
    assert given.status == "ok" and given.output_text == '{"riskLevel": "High"}'
    assert [m.model_dump(exclude_none=True) for m in given.messages] == [
        {"role": "assistant", "content": '{"riskLevel": "High"}'}
    ]
    for response in (None, 42):
        fields = {"name": "m", "provider": "mock"} | ({} if response is None else {"response": response})
        default = run_target(fields, a_test(), workspace=tmp_path, eval_dir=tmp_path)
        assert default.output_text == DEFAULT_RESPONSE and default.token_usage is None


def replay_target(fixtures: str | Path, **fields: object) -> dict[str, object]:
    return {
        "name": "replay_coding_agent",
        "provider": "replay",
        "fixtures": str(fixtures),
        "suite": "trace-evaluation-showcase",
        "source_target": "live_coding_agent",
        **fields,
    }


def test_replay_answers_each_test_with_its_recorded_trace(tmp_path) -> None:
    outcome = run_target(
        replay_target(FIXTURES), a_test("inspect-and-fix-config"), workspace=tmp_path / "ws", eval_dir=tmp_path
    )
    assert outcome.status == "ok", outcome.error
    first = json.loads(FIXTURES.read_text("utf-8").splitlines()[0])
    assert [m.model_dump(exclude_none=True) for m in outcome.messages] == first["output"]
    assert outcome.messages[0].tool_calls and [c.tool for c in outcome.messages[0].tool_calls] == [
        "Read",
        "Grep",
        "Edit",
    ]
    assert outcome.token_usage == {"input": 912, "output": 246, "cached": 128}
    assert outcome.cost_usd == 0.0042 and outcome.duration_ms == 980
    assert outcome.output_text == first["output"][-1]["content"]


def test_replay_looks_tests_up_as_agentv_does(tmp_path) -> None:
    line = json.loads(FIXTURES.read_text("utf-8").splitlines()[0])
    records = [
        {**line, "eval_path": "evals/a.eval.yaml", "variant": "v2", "output": [{"role": "assistant", "content": "v2"}]},
        {**line, "eval_path": "evals/a.eval.yaml", "output": [{"role": "assistant", "content": "plain"}]},
        {**line, "test_id": "twice"},
        {**line, "test_id": "twice"},
        {**line, "test_id": "second-call", "attempt": 1, "output": [{"role": "assistant", "content": "call 1"}]},
    ]
    fixtures = tmp_path / "f.jsonl"
    fixtures.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    eval_path = str(tmp_path / "repo" / "evals" / "a.eval.yaml")

    def ask(test_id: str, attempt: int = 0, **fields: object):
        return run_target(
            replay_target(fixtures, **fields),
            a_test(test_id),
            workspace=tmp_path / "ws",
            eval_dir=tmp_path,
            eval_path=eval_path,
            attempt=attempt,
        )

    assert ask("inspect-and-fix-config", variant="v2").output_text == "v2"
    assert ask("inspect-and-fix-config").output_text == "plain"
    missing = ask("no-such-test")
    assert (
        missing.status == "error"
        and "Replay fixture lookup found no record for suite=trace-evaluation-showcase" in (missing.error or "")
    )
    assert "test_id=no-such-test source_target=live_coding_agent attempt=0 variant=<none>" in (missing.error or "")
    # A record of a later call is found when the failed call is tried again (AgentV's request.attempt).
    assert ask("second-call").status == "error" and ask("second-call", attempt=1).output_text == "call 1"
    twice = ask("twice")
    assert twice.status == "error" and "found 2 duplicate records" in (twice.error or "")
    # A record naming its eval file is not found by a lookup that names another.
    other = run_target(
        replay_target(fixtures),
        a_test("inspect-and-fix-config"),
        workspace=tmp_path,
        eval_dir=tmp_path,
        eval_path="/x/b.eval.yaml",
    )
    assert other.status == "error"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", ":2: "),
        ('{"schema_version": "agentv.replay_fixture.v2"}', ":2: schema_version: "),
        ("EXTRA", ":2: surprise: Extra inputs are not permitted"),
        ("NEGATIVE", ":2: output.0.tool_calls.0.duration_ms: Input should be greater than or equal to 0"),
    ],
)
def test_a_bad_fixtures_file_stops_the_run_naming_its_line(line, reason, tmp_path) -> None:
    good = FIXTURES.read_text("utf-8").splitlines()[0]
    record = json.loads(good)
    if line == "EXTRA":
        line = json.dumps({**record, "surprise": 1})
    elif line == "NEGATIVE":
        record["output"][0]["tool_calls"][0]["duration_ms"] = -1
        line = json.dumps(record)
    fixtures = tmp_path / "f.jsonl"
    fixtures.write_text(good + "\n" + line + "\n")
    with pytest.raises(TargetConfigError) as info:
        check_target(replay_target(fixtures), eval_dir=tmp_path)
    message = str(info.value)
    assert f"{fixtures}{reason}" in message and "\n" not in message


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"fixtures": None}, 'requires exactly one replay source: "fixtures" or "execution_traces"'),
        ({"execution_traces": "t.jsonl"}, "requires exactly one replay source"),
        (
            {"fixtures": None, "execution_traces": "t.jsonl"},
            "Execution trace replay source not found or unreadable",
        ),
        ({"source_target": None}, "replay_coding_agent replay source_target is required"),
        ({"fixtures": "nowhere.jsonl"}, "Replay fixture file not found or unreadable"),
    ],
)
def test_replay_configuration_is_checked_before_the_run(fields, reason, tmp_path) -> None:
    target = {k: v for k, v in (replay_target(FIXTURES) | fields).items() if v is not None}
    with pytest.raises(TargetConfigError) as info:
        check_target(target, eval_dir=tmp_path)
    assert reason in str(info.value)


@pytest.mark.parametrize(
    ("provider", "needs"),
    [
        ("codex", "@openai/codex-sdk"),
        ("codex-cli", "@openai/codex-sdk"),
        ("claude-sdk", "@anthropic-ai/claude-agent-sdk"),
        ("copilot-sdk", "@github/copilot-sdk"),
        ("pi-coding-agent", "@earendil-works/pi-coding-agent"),
        ("pi", "@earendil-works/pi-coding-agent"),
        ("vscode", "VS Code"),
        ("vscode-insiders", "VS Code"),
        ("agentv", "vendor's provider"),
        ("file-output", ".agentv/providers/file-output.ts"),
        ("grader-check", "`provider: cli`"),
    ],
)
def test_providers_evalstore_cannot_run_are_refused_with_what_they_need(provider, needs, tmp_path) -> None:
    with pytest.raises(TargetConfigError) as info:
        check_target({"name": "x", "provider": provider, "command": "bun run p.ts"}, eval_dir=tmp_path)
    message = str(info.value)
    assert f"target 'x': provider '{provider}'" in message and needs in message and "\n" not in message


def test_evalstore_run_grades_agentvs_replay_showcase_as_agentv_did(tmp_path) -> None:
    """``evalstore run`` on the showcase as it ships (its targets file's ``replay_coding_agent``): every
    trace grader scores what AgentV 4.42.4 scored (1), from the recorded tool calls, timings and usage."""
    folder = tmp_path / "trace-evaluation"
    shutil.copytree(SHOWCASE, folder)
    result = CliRunner().invoke(
        main,
        [
            "--db",
            f"sqlite:///{tmp_path / 's.db'}",
            "run",
            str(folder / "evals" / "coding-agent-replay.eval.yaml"),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    scores = {
        (t["test_id"], grader): score
        for t in document["results"]
        for grader, score in t["graders"].items()
        if grader not in ("replay-proof", "recovery-check")  # bun code graders
    }
    assert scores == {
        ("inspect-and-fix-config", "expected-tool-sequence"): 1.0,
        ("inspect-and-fix-config", "execution-budget"): 1.0,
        ("recover-from-tool-error", "recovery-sequence"): 1.0,
        ("recover-from-tool-error", "execution-budget"): 1.0,
    }
