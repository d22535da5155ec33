"""Grader type names, held to the real AgentV 4.42.4 (tests/fixtures/agentv-grader-types: its README says how
the runs were made).

AgentV skips a grader of the deprecated types `code-judge` and `llm-judge` (after `_` is read as `-`) with a
warning naming the test, a suite-level one in every test it would be added to, and a composite whose aggregator
has such a type; a turn's assertions are looked up as written. A type its registry does not hold (`Contains`,
`script`, `llm-rubric`, a typo) fails when the grader runs, `Grader 'X' failed: Unknown grader type: "X".
Registered types: ...`, a 0 counted in the test's score (negated, a 1). evalstore once graded the deprecated
types and read `Contains`, `script` and `llm-rubric` as `contains`, a code grader and an LLM grader: the same
suite scored otherwise, and an unchanged replay of AgentV's run moved its score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import agentv_project, cli, fixture_module, ok_json, one_line_error
from fixture_paths import FIXTURES_DIR
from judge_server import JudgeServer

GRADER_TYPES = FIXTURES_DIR / "agentv-grader-types"
PROJECT = GRADER_TYPES / "project"
LOGS = GRADER_TYPES / "logs"
SUITES = {"deprecated": 0, "unknown": 1, "turns": 1}  # each suite and evalstore's exit code (a test below 0.8: 1)
answers = fixture_module("agentv_grader_types_answers", GRADER_TYPES / "answers.py")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, JudgeServer]]:
    environment = {"OPENAI_ENDPOINT": "{url}", "OPENAI_API_KEY": "sk-local", "OPENAI_MODEL": "agent-model"}
    with agentv_project(PROJECT, tmp_path / "project", answers, environment, monkeypatch) as (folder, server):
        monkeypatch.chdir(folder)
        yield folder, server


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    lines = (PROJECT / "runs" / suite / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, filter(str.strip, lines))}


def agentv_warnings(log: str) -> list[str]:
    """AgentV's `Warning: ...` lines in a log, without the colour codes it wrote."""
    text = ANSI.sub("", (LOGS / log).read_text("utf-8"))
    return [line.removeprefix("Warning: ") for line in text.splitlines() if line.startswith("Warning: ")]


def exported(db: str, run: str) -> dict[str, dict[str, Any]]:
    return {r["test_id"]: r for r in map(json.loads, cli(db, "export", run).stdout.splitlines())}


def graded(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A result's graders as both write them: name, type, score, verdict, weight and what each says. A
    conversation's turn names an unnamed grader of its own in its assertions (AgentV: `undefined`), so
    there only what follows `failed: ` is compared, and not its weight (AgentV writes none)."""
    out = []
    for s in row["scores"]:
        texts = [a["text"] for a in s.get("assertions", [])]
        weight = s.get("weight")
        if s["name"].startswith("turn-") or s["name"] == "conversation":
            texts, weight = [t.split(" failed: ", 1)[-1] for t in texts], None
        out.append((s["name"], s["type"], s["score"], s["verdict"], weight, texts))
    return out


def held_to_agentv(rows: dict[str, dict[str, Any]], suite: str) -> None:
    agentv = agentv_rows(suite)
    assert list(rows) == list(agentv)
    for test, row in agentv.items():
        assert (rows[test]["score"], rows[test]["execution_status"]) == (row["score"], row["execution_status"]), test
        assert graded(rows[test]) == graded(row), test


@pytest.mark.parametrize("suite", list(SUITES))
def test_a_run_scores_each_test_as_agentv_with_the_same_graders_and_words(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer]
) -> None:
    """No judge is asked: the skipped `llm-judge` and the unknown `llm-rubric` never reach one (the `chat`
    agent of `turns` is asked what AgentV asked it, four turns)."""
    _, server = project
    result = cli(sqlite_url, "run", f"evals/{suite}.eval.yaml", "--workers", "1", "--json")
    run = ok_json(result, SUITES[suite])
    held_to_agentv(exported(sqlite_url, run["run_id"]), suite)
    asked = [json.loads(line)["body"] for line in (LOGS / "agentv-requests.jsonl").read_text("utf-8").splitlines()]
    assert [r.body["messages"] for r in server.requests] == ([b["messages"] for b in asked] if suite == "turns" else [])
    # AgentV's own warning for each grader it skipped, word for word (its composite member's is evalstore's own).
    said = [m.group(1) for m in re.finditer(r"^warning: .*?: field `[^`]+`: (Skipping .*)$", result.stderr, re.M)]
    skipped = [w for w in agentv_warnings(f"{suite}.out") if "is deprecated." in w]
    assert said == skipped
    assert len(skipped) == {"deprecated": 8, "unknown": 0, "turns": 1}[suite]


@pytest.mark.parametrize("suite", list(SUITES))
def test_an_unchanged_replay_of_agentvs_run_keeps_every_score(
    sqlite_url: str, suite: str, project: tuple[Path, JudgeServer]
) -> None:
    """The import keeps AgentV's rows; a replay with the eval grades what AgentV graded (no deprecated grader
    added back, each unknown type 0 again, no judge asked) and moves no score."""
    _, server = project
    imported = ok_json(cli(sqlite_url, "import", f"runs/{suite}", "--eval", f"evals/{suite}.eval.yaml", "--json"))[
        "run_id"
    ]
    held_to_agentv(exported(sqlite_url, imported), suite)
    replay = ok_json(cli(sqlite_url, "replay", imported, "--json"), 0 if suite == "deprecated" else 1)
    assert replay["regraded"] == len(agentv_rows(suite))
    overall = replay["comparison"]["overall"]["score"]
    assert overall["mean_diff"] == 0.0 and overall["mean_a"] == overall["mean_b"]
    rows = exported(sqlite_url, replay["run_id"])
    assert {t: r["score"] for t, r in rows.items()} == {t: r["score"] for t, r in agentv_rows(suite).items()}
    assert server.requests == []


def test_validate_warns_of_each_grader_agentvs_validate_warns_of(project: tuple[Path, JudgeServer]) -> None:
    """AgentV's validate says `Unknown assertion type 'X'.` of each such grader (and of the deprecated types),
    and loads the file; evalstore's warns of the same graders, saying what happens to each and the type meant."""
    for suite in ("unknown", "deprecated", "turns"):
        result = cli("sqlite:///unused.db", "validate", f"evals/{suite}.eval.yaml", "--json")
        [checked] = ok_json(result)["files"]
        assert checked["ok"] and checked["errors"] == []
        fields = {re.search(r"field `([^`]+)`", w).group(1) for w in checked["warnings"]}  # type: ignore[union-attr]
        text = ANSI.sub("", (LOGS / f"validate-{suite}.out").read_text("utf-8"))
        agentv = set(re.findall(r"\[(tests\[\d+\]\.assertions\[\d+\]\.type)\] Unknown assertion type", text))
        assert agentv and agentv <= fields, (suite, agentv - fields)
    [checked] = ok_json(cli("sqlite:///unused.db", "validate", "evals/unknown.eval.yaml", "--json"))["files"]
    said = [re.search(r"has no grader type `([^`]+)` \(did you mean `([^`]+)`", w) for w in checked["warnings"]]
    meant = [m.groups() if m else None for m in said]
    assert meant == [
        ("Contains", "contains"),
        ("script", "code-grader"),
        ("llm-rubric", "llm-grader"),
        ("contain", "contains"),
        ("Contains", "contains"),
        ("agent-rubric", "llm-grader"),
    ]


def test_an_evaluator_of_a_deprecated_type_is_refused_in_agentvs_words(
    sqlite_url: str, project: tuple[Path, JudgeServer]
) -> None:
    """AgentV does not load a suite whose `evaluator:` names a deprecated type (exit 1, no results)."""
    said = ANSI.sub("", (LOGS / "evaluator.out").read_text("utf-8"))
    assert "Error: Unsupported grader 'code-judge' in global. Use 'code-grader' instead.\nexit code: 1" in said
    line = one_line_error(cli(sqlite_url, "run", "evals/evaluator.eval.yaml"))
    assert "field `evaluator`: Unsupported grader 'code-judge' in global. Use 'code-grader' instead." in line
