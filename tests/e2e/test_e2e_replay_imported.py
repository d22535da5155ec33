"""Replaying an imported AgentV run: graders from its eval file; what cannot be graded says why."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from e2e_helpers import BASELINE, PY, audit, cli, ok_json, one_line_error, results_by_test

pytestmark = pytest.mark.skipif(not BASELINE.exists(), reason=f"AgentV fixtures not found at {BASELINE.parent}")

# The rubric suite's code grader runs `uv run python check_syntax.py`; the script is not in the fixture.
CHECK_SYNTAX = """
import json, sys
out = json.load(sys.stdin).get("output") or ""
code = out.split("```python")[-1].split("```")[0] if "```python" in out else out
try:
    compile(code, "answer", "exec")
    ok = True
except SyntaxError:
    ok = False
print(json.dumps({"score": 1.0 if ok else 0.0, "assertions": [{"text": "Python syntax is valid", "passed": ok}]}))
"""

ANSWER = "```python\nimport re\n\ndef validate_email(email):\n    return bool(re.match(r'^[^@]+@[^@]+$', email))\n```"


@pytest.fixture
def rubric_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rubric fixture copied, its missing grader script written, and a `uv` on PATH that runs it."""
    folder = tmp_path / "rubric"
    shutil.copytree(BASELINE.parent, folder)
    for path in folder.rglob("*"):
        path.chmod(0o644)
    (folder / "check_syntax.py").write_text(CHECK_SYNTAX, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\nshift\n[ "$1" = python ] && shift\nexec {PY} "$@"\n', encoding="utf-8")
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for name in ("EVALSTORE_JUDGE_BASE_URL", "EVALSTORE_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return folder


def test_replaying_the_imported_baseline_regrades_code_graders_and_names_what_is_missing(
    sqlite_url: str, rubric_copy: Path
) -> None:
    # AgentV 4.x rows usually carry the answer; give one row its answer, the others keep none.
    baseline = rubric_copy / "dataset.eval.baseline.jsonl"
    rows = [json.loads(line) for line in baseline.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["test_id"] == "code-quality-multi-eval":
            row["output"] = [{"role": "assistant", "content": ANSWER}]
    baseline.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    imported = ok_json(
        cli(sqlite_url, "import", str(baseline), "--eval", str(rubric_copy / "dataset.eval.yaml"), "--json")
    )
    assert imported["eval_path"] == str(rubric_copy / "dataset.eval.yaml")
    # The LLM graders have no judge to find: said before anything is graded or written (no 0.0 errors).
    result = cli(sqlite_url, "replay", imported["run_id"], "--json")
    line = one_line_error(result)
    assert "LLM graders llm-grader, rubrics: no judge target chosen" in line, line
    assert "--graders NAME" in line
    # No targets file lies above the eval file: the line says so and how to name the run's.
    assert f"no targets file was found above {rubric_copy / 'dataset.eval.yaml'}" in line and "--targets FILE" in line
    assert [r["run_id"] for r in ok_json(cli(sqlite_url, "runs", "--json"))] == [imported["run_id"]]

    # Regrading the other graders only: the LLM graders' verdicts carried over, as imported.
    result = cli(sqlite_url, "replay", imported["run_id"], "--graders", "python_syntax", "--json")
    out = ok_json(result, 0, 1)
    assert out["complete"] is True
    shown = results_by_test(sqlite_url, out["run_id"])
    assert set(shown) == {r["test_id"] for r in rows}  # the run went on past every error

    # The code grader regraded the imported answer.
    multi = shown["code-quality-multi-eval"]
    assert multi["graders"]["python_syntax"] == 1.0 and multi["verdicts"]["python_syntax"] == "pass"
    (test,) = audit(sqlite_url, out["run_id"], "code-quality-multi-eval")["tests"]
    rubrics = next(v for v in test["verdicts"] if v["grader"] == "rubrics")
    assert rubrics["origin"] == "carried"
    syntax = next(v for v in test["verdicts"] if v["grader"] == "python_syntax")
    (call,) = syntax["grader_calls"]
    assert call["exit_code"] == 0 and call["argv"][-1] == str(rubric_copy / "check_syntax.py")

    # The tests with no python_syntax are not regraded at all: carried over whole, as imported.
    unable = sorted(t for t in shown if t != "code-quality-multi-eval")
    assert unable and {shown[t]["origin"] for t in unable} == {"carried"}
    assert (out["regraded"], out["carried_over"], out["not_regradable"]) == (1, len(unable), [])

    # Rows that kept no answer cannot be regraded by anything: given a python_syntax of their own (an eval
    # that gives every test one), they are marked so with the reason, no verdicts, said up front, and left
    # out of the run's scores and of the comparison (counted and named).
    suite = yaml.safe_load((rubric_copy / "dataset.eval.yaml").read_text(encoding="utf-8"))
    syntax = next(
        g
        for t in suite["tests"]
        for g in t.get("assertions", [])
        if isinstance(g, dict) and g.get("name") == "python_syntax"
    )
    for test in suite["tests"]:
        if test["id"] != "code-quality-multi-eval":
            test["assertions"] = [*test.get("assertions", []), syntax]
    every = rubric_copy / "every.eval.yaml"
    every.write_text(yaml.safe_dump(suite), encoding="utf-8")
    result = cli(sqlite_url, "replay", imported["run_id"], "--eval", str(every), "--graders", "python_syntax", "--json")
    out = ok_json(result, 0, 1)
    shown = results_by_test(sqlite_url, out["run_id"])
    for test_id in unable:
        assert shown[test_id]["status"] == "not_regradable" and shown[test_id]["graders"] == {}
        assert "neither a transcript nor an output" in shown[test_id]["error"], shown[test_id]["error"]
    assert sorted(u["test_id"] for u in out["not_regradable"]) == unable
    assert f"{len(unable)} of {len(rows)} tests cannot be regraded" in result.stderr
    assert all(t in result.stderr for t in unable)
    # Below the threshold is said of what was graded: a result with nothing to regrade is neither.
    assert sorted(out["failed"]) == ["code-quality-multi-eval"]
    comparison = out["comparison"]
    assert sorted(k["test_id"] for k in comparison["not_regradable"]) == unable
    assert comparison["overall"]["counts"]["n"] == 1 and [t["test_id"] for t in comparison["tests"]] == [
        "code-quality-multi-eval"
    ]
    (summary,) = [r for r in ok_json(cli(sqlite_url, "runs", "--json")) if r["run_id"] == out["run_id"]]
    assert summary["tests"] == 1 and summary["mean_score"] == shown["code-quality-multi-eval"]["score"]
    text = cli(sqlite_url, "compare", imported["run_id"], out["run_id"])
    assert f"left out: {len(unable)} not regradable" in text.stdout


def test_an_imported_run_without_its_eval_asks_for_one(sqlite_url: str, tmp_path: Path) -> None:
    lonely = tmp_path / "results.jsonl"  # away from dataset.eval.yaml, which the baseline is named after
    lonely.write_bytes(BASELINE.read_bytes())
    imported = ok_json(cli(sqlite_url, "import", str(lonely), "--json"))
    assert imported["eval_path"] is None
    result = cli(sqlite_url, "replay", imported["run_id"])
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "--eval" in result.stderr


CONTAINS_SUITE = """\
name: crash-suite
tests:
""" + "".join(
    f"""  - id: {test_id}
    criteria: Never apologises.
    input: Say anything.
    assertions:
      - type: contains
        value: sorry
        negate: true
"""
    for test_id in ("agent-crash", "old-row-crash", "grader-crash", "answered")
)


def test_an_imported_agent_failure_is_reproduced_not_graded(tmp_path: Path) -> None:
    """AgentV records a crashed agent as an execution error (``failure_stage: agent``) and grades nothing,
    though its row carries an output ("Error occurred: ..."); an older row names no stage, and no grader
    took part. A replay reproduces both errors, keeping AgentV's labels. An evaluator failure is the
    grader's, with the agent's answer there: that one is regraded."""
    row = {"suite": "crash-suite", "target": "crashy", "timestamp": "2026-11-25T06:09:16.732Z", "category": "smoke"}
    rows = [
        {
            **row,
            "test_id": "agent-crash",
            "score": 0,
            "execution_status": "execution_error",
            "error": "tool unreachable (exit code 3)",
            "failure_stage": "agent",
            "failure_reason_code": "provider_error",
            "output": "Error occurred: tool unreachable (exit code 3)",
        },
        {**row, "test_id": "old-row-crash", "score": 0, "execution_status": "execution_error", "error": "timed out"},
        {
            **row,
            "test_id": "grader-crash",
            "score": 0,
            "execution_status": "execution_error",
            "error": "contains-sorry: grader parse failure",
            "failure_stage": "evaluator",
            "failure_reason_code": "evaluator_error",
            "output": "Here you are.",
            "scores": [{"name": "contains-sorry", "type": "contains", "score": 0, "verdict": "skip", "assertions": []}],
        },
        {
            **row,
            "test_id": "answered",
            "score": 1,
            "execution_status": "ok",
            "output": "Here you are.",
            "scores": [{"name": "contains-sorry", "type": "contains", "score": 1, "verdict": "pass", "assertions": []}],
        },
    ]
    results = tmp_path / "crash.results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    eval_file = tmp_path / "crash.eval.yaml"
    eval_file.write_text(CONTAINS_SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = ok_json(cli(db, "import", str(results), "--eval", str(eval_file), "--json"))["run_id"]

    out = ok_json(cli(db, "replay", imported, "--json"), 1)
    by_test = results_by_test(db, out["run_id"])
    assert {t: (r["status"], r["score"], r["error"], r["graders"]) for t, r in by_test.items()} == {
        "agent-crash": ("execution_error", 0.0, "tool unreachable (exit code 3)", {}),
        "old-row-crash": ("execution_error", 0.0, "timed out", {}),
        "grader-crash": ("ok", 1.0, None, {"contains-sorry": 1.0}),
        "answered": ("ok", 1.0, None, {"contains-sorry": 1.0}),
    }
    exported = cli(db, "export", out["run_id"], "--format", "agentv-jsonl")
    assert exported.exit_code == 0, exported.stderr
    crash = next(json.loads(line) for line in exported.stdout.splitlines() if '"agent-crash"' in line)
    assert (crash["execution_status"], crash["failure_stage"], crash["failure_reason_code"], crash["scores"]) == (
        "execution_error",
        "agent",
        "provider_error",
        [],
    )
    assert crash["category"] == "smoke"  # the origin's label, carried as for every replayed row


def test_a_replay_of_an_import_says_when_a_plain_text_grader_moved_a_score(sqlite_url: str, tmp_path: Path) -> None:
    """A code grader printing ``0.2`` and exiting 0: AgentV scores it 1.0 (the exit code alone), evalstore reads
    0.2 (a documented difference). An unchanged replay of AgentV's run showed a regression and said nothing
    of why; now it names the grader, and its verdict says it in its evidence."""
    (tmp_path / "plain.py").write_text("import sys\nsys.stdin.read()\nprint('0.2')\n", encoding="utf-8")
    (tmp_path / "json.py").write_text(
        'import json, sys\nsys.stdin.read()\nprint(json.dumps({"score": 1.0}))\n', encoding="utf-8"
    )
    eval_file = tmp_path / "suite.eval.yaml"
    eval_file.write_text(
        "tests:\n  - id: t1\n    input: hi\n    criteria: says hi\n    assertions:\n"
        f"      - {{name: plain, type: code-grader, command: [{json.dumps(PY)}, plain.py]}}\n"
        f"      - {{name: structured, type: code-grader, command: [{json.dumps(PY)}, json.py]}}\n",
        encoding="utf-8",
    )
    scores = [
        {"name": name, "type": "code-grader", "score": 1.0, "verdict": "pass", "assertions": []}
        for name in ("plain", "structured")
    ]
    row = {
        "timestamp": "2026-11-30T00:00:00.000Z",
        "test_id": "t1",
        "suite": "s",
        "target": "agent",
        "score": 1.0,
        "execution_status": "ok",
        "input": [{"role": "user", "content": "hi"}],
        "output": [{"role": "assistant", "content": "hi"}],
        "scores": scores,
    }
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(row) + "\n", encoding="utf-8")
    run_id = ok_json(cli(sqlite_url, "import", str(results), "--eval", str(eval_file), "--json"))["run_id"]

    replayed = cli(sqlite_url, "replay", run_id)
    assert replayed.exit_code == 1  # 0.6, below the threshold: as evalstore reads the grader
    assert "warning: code grader plain printed plain text" in replayed.stderr
    assert "structured" not in replayed.stderr.split("warning: code grader", 1)[1].split("\n", 1)[0]


def test_a_replay_of_an_import_gives_an_agent_targets_graders_file_references(
    sqlite_url: str, tmp_path: Path, judge_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV shows a file input to an agent target's judge as ``<file: path="...">`` (the agent reads files
    itself). An import does not record the provider, so a replay embedded the file's text; the targets file
    the replay finds (here above the eval, as AgentV found it) says the results' target is a ``cli`` agent."""
    from judge_server import Reply

    judge_server.respond_with(lambda request: Reply(content='{"score": 1.0, "assertions": []}'))
    monkeypatch.setenv("E2E_FILES_KEY", "sk-files")
    root = tmp_path / "proj"
    (root / ".agentv").mkdir(parents=True)
    (root / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        "  - {name: pyagent, provider: cli, command: 'echo hi', grader_target: judge}\n"
        f"  - {{name: judge, provider: openai, base_url: {judge_server.base_url}, model: m, api_key: '${{{{ E2E_FILES_KEY }}}}'}}\n",
        encoding="utf-8",
    )
    (root / "data.csv").write_text("city,people\nLyon,500000\n", encoding="utf-8")
    eval_file = root / "files.eval.yaml"
    eval_file.write_text(
        "tests:\n  - id: read-csv\n    criteria: summarizes the csv\n    input:\n      - role: user\n"
        "        content:\n          - {type: text, value: Summarize this}\n          - {type: file, value: data.csv}\n"
        "    assertions:\n      - {name: quality, type: llm-grader}\n",
        encoding="utf-8",
    )
    row = {
        "timestamp": "2026-11-30T00:00:00.000Z",
        "test_id": "read-csv",
        "suite": "s",
        "target": "pyagent",
        "score": 1.0,
        "execution_status": "ok",
        "output": [{"role": "assistant", "content": "One city."}],
        "scores": [{"name": "quality", "type": "llm-grader", "score": 1.0, "verdict": "pass", "assertions": []}],
    }
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(row) + "\n", encoding="utf-8")
    run_id = ok_json(cli(sqlite_url, "import", str(results), "--eval", str(eval_file), "--json"))["run_id"]

    ok_json(cli(sqlite_url, "replay", run_id, "--json"))
    (asked,) = judge_server.requests
    assert f'<file: path=\\"{root / "data.csv"}\\">' in asked.raw.decode()
    assert "Lyon" not in asked.raw.decode()
