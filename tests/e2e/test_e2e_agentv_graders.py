"""Every grader of what the agent did, against the real AgentV 4.42.4.

tests/fixtures/agentv-graders/runs/<suite>/ are run folders the real AgentV CLI wrote grading a scripted
``cli`` agent (project/agent/traces.json: tool calls with arguments, results, statuses and timings, token
usage, cost, duration) with every tool-trajectory mode and argument matcher, latency, cost, token-usage,
execution-metrics, skill-trigger, field-accuracy and composite graders (regenerate.py there). Each test
imports a run, regrades it without the agent, and runs the suite again with ``evalstore run``; every
grader's score, verdict and assertions must be AgentV's, and the trace a code grader reads on stdin too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import cli, ok_json

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agentv-graders"
SUITES = ("trajectory", "metrics", "structured")


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    lines = (FIXTURE / "runs" / suite / "index.jsonl").read_text("utf-8").splitlines()
    return {r["test_id"]: r for r in map(json.loads, lines)}


def graders(row: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each grader's score, verdict, assertions and, for a composite, its members' (nested ``scores``)."""
    return {s["name"]: grade(s) for s in row["scores"]}


def grade(entry: dict[str, Any]) -> tuple[Any, ...]:
    members = tuple((m["name"], m["type"], m.get("weight"), grade(m)) for m in entry.get("scores") or [])
    assertions = [(a["text"], a["passed"]) for a in entry.get("assertions") or []]
    return round(entry["score"], 9), entry["verdict"], assertions, members


def exported(db: str, run_id: str) -> dict[str, dict[str, Any]]:
    done = cli(db, "export", run_id)
    assert done.exit_code == 0, done.output
    return {r["test_id"]: r for r in map(json.loads, done.stdout.splitlines())}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture (its run folders and the project), worked in from its project folder."""
    copy = tmp_path / "agentv-graders"
    shutil.copytree(FIXTURE, copy)
    monkeypatch.chdir(copy / "project")
    monkeypatch.setenv("PAYLOAD_DIR", str(tmp_path / "payloads"))
    return copy


def assert_same_grades(ours: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]) -> None:
    assert set(ours) == set(theirs)
    for test_id, row in theirs.items():
        mine = ours[test_id]
        assert graders(mine) == graders(row), test_id
        assert mine["score"] == pytest.approx(row["score"]), test_id


@pytest.mark.parametrize("suite", SUITES)
def test_an_imported_run_regrades_to_agentvs_verdicts(suite: str, project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    imported = ok_json(cli(db, "import", str(project / "runs" / suite), "--eval", f"evals/{suite}.eval.yaml", "--json"))
    assert imported["warnings"] == []
    replay = ok_json(cli(db, "replay", imported["run_id"], "--json"), 0, 1)
    assert replay["not_regradable"] == [] and replay["complete"]
    theirs = agentv_rows(suite)
    assert_same_grades(exported(db, replay["run_id"]), theirs)
    # the import itself exports what AgentV wrote, a composite's nested members included
    assert_same_grades(exported(db, imported["run_id"]), theirs)
    # every test was regraded, none carried over
    shown = ok_json(cli(db, "show", replay["run_id"], "--json"))
    assert {r["origin"] for r in shown["results"]} == {"graded"}
    assert len(shown["results"]) == len(theirs)


@pytest.mark.parametrize("suite", SUITES)
def test_a_run_of_the_same_agent_grades_as_agentv(suite: str, project: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    done = cli(db, "run", f"evals/{suite}.eval.yaml", "--workers", "1", "--json")
    assert done.exit_code in (0, 1), done.output
    assert_same_grades(exported(db, json.loads(done.stdout)["run_id"]), agentv_rows(suite))


def test_a_code_grader_reads_agentvs_trace(project: Path, tmp_path: Path) -> None:
    """The stdin ``trace`` and ``trace_summary`` (the summary's tool names snake_cased, as AgentV's deep key
    rewrite does) of a regraded import and of a run are AgentV's, event for event."""
    theirs = json.loads((FIXTURE / "project" / "payloads" / "research--composite.json").read_text())
    db = f"sqlite:///{tmp_path / 's.db'}"
    imported = ok_json(
        cli(db, "import", str(project / "runs" / "structured"), "--eval", "evals/structured.eval.yaml", "--json")
    )
    ok_json(cli(db, "replay", imported["run_id"], "--json"), 0, 1)
    ours = json.loads((tmp_path / "payloads" / "research--composite.json").read_text())
    assert ours["trace_summary"] == theirs["trace_summary"]
    for key in ("messages", "events", "token_usage", "cost_usd", "duration_ms", "event_count", "tool_calls"):
        assert ours["trace"][key] == theirs["trace"][key], key
    # AgentV's provenance names its provider kind too, which an imported row does not record
    assert ours["trace"]["metadata"] == {k: v for k, v in theirs["trace"]["metadata"].items() if k != "provider"}
    assert ours["messages"] == theirs["messages"] and ours["output"] == theirs["output"]
