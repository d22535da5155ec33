"""The ``replay`` provider with ``execution_traces:`` graded as AgentV 4.42.4 grades it.

tests/fixtures/agentv-trace-replay holds the real AgentV CLI's run of two example suites through a ``replay``
target whose source is the ``agentv.trace.v1`` envelopes AgentV wrote when it first ran them. evalstore runs the
same suites with the same target from the example's folder: every tool-trajectory and execution-metrics verdict
(score, verdict and assertions) equals AgentV's, and so does the trace the graders read. The span order decides
the tool order (tool-trajectory-simple's spans share their times, so AgentV orders them by span id: six tests
score otherwise than in the first run).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import audit, cli, no_store, ok_json, one_line_error
from fixture_paths import FIXTURES_DIR

TRACES = FIXTURES_DIR / "agentv-trace-replay"
TRACE_GRADERS = ("tool-trajectory", "execution-metrics")


def agentv_rows(suite: str) -> dict[str, dict[str, Any]]:
    lines = (TRACES / suite / "index.jsonl").read_text("utf-8").splitlines()
    return {row["test_id"]: row for row in map(json.loads, lines)}


def replayed(db: str, folder: Path, suite: str) -> str:
    for name in ("traces.jsonl", "replay-targets.yaml"):
        shutil.copy(TRACES / suite / name, folder / name)
    args = ["run", "evals/dataset.eval.yaml", "--targets", "replay-targets.yaml", "--target", "replayed"]
    return ok_json(cli(db, *args, "--workdir", str(folder / "ws"), "--json"), 0, 1)["run_id"]


@pytest.mark.parametrize("suite", ["tool-trajectory-simple", "execution-metrics"])
def test_every_trace_grader_scores_what_agentv_scored_on_the_replayed_trace(
    sqlite_url: str,
    suite: str,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = corpus / "examples" / "features" / suite
    monkeypatch.chdir(folder)
    run_id = replayed(sqlite_url, folder, suite)
    theirs = agentv_rows(suite)
    compared = 0
    for test_id, row in theirs.items():
        (test,) = audit(sqlite_url, run_id, test_id)["tests"]
        ours = {v["grader"]: v for v in test["verdicts"]}
        for score in row["scores"]:
            if score["type"] not in TRACE_GRADERS:
                continue
            mine = ours[score["name"]]
            got = (mine["score"], mine["verdict"], [(a["text"], a["passed"]) for a in mine["assertions"]])
            want = (score["score"], score["verdict"], [(a["text"], a["passed"]) for a in score["assertions"]])
            assert got == (pytest.approx(want[0]), want[1], want[2]), (test_id, score["name"])
            compared += 1
    assert compared == sum(1 for r in theirs.values() for s in r["scores"] if s["type"] in TRACE_GRADERS)
    if suite == "tool-trajectory-simple":  # the order AgentV's span order gives, not the agent's
        exported = {r["test_id"]: r for r in map(json.loads, cli(sqlite_url, "export", run_id).stdout.splitlines())}
        assert exported["exact-auth-flow"]["output"] == "Authentication successful. Token generated for user."


def test_a_test_the_traces_do_not_hold_is_agentv_s_lookup_error(
    sqlite_url: str,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    folder = corpus / "examples" / "features" / "tool-trajectory-simple"
    monkeypatch.chdir(folder)
    suite = "tool-trajectory-simple"
    kept = [
        line
        for line in (TRACES / suite / "traces.jsonl").read_text("utf-8").splitlines()
        if "any-order-pass" not in line
    ]
    (folder / "traces.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    shutil.copy(TRACES / suite / "replay-targets.yaml", folder / "replay-targets.yaml")
    args = ["run", "evals/dataset.eval.yaml", "--targets", "replay-targets.yaml", "--target", "replayed"]
    out = ok_json(cli(sqlite_url, *args, "--workdir", str(tmp_path / "ws"), "--json"), 1)
    (row,) = [r for r in out["results"] if r["test_id"] == "any-order-pass"]
    assert row["status"] == "execution_error"
    assert "Execution trace replay lookup found no record for suite=tool-trajectory-simple" in row["error"]
    # AgentV tries a failed target call three times (its replay provider looks each try up by its number:
    # lookupForRequest's attempt), and the row keeps the last try's error.
    assert "test_id=any-order-pass source_target=mock_agent attempt=2 variant=<none>" in row["error"]


def test_a_bad_envelope_is_refused_before_the_run_naming_file_and_line(
    sqlite_url: str,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    folder = corpus / "examples" / "features" / "tool-trajectory-simple"
    monkeypatch.chdir(folder)
    suite = "tool-trajectory-simple"
    lines = (TRACES / suite / "traces.jsonl").read_text("utf-8").splitlines()
    broken = json.loads(lines[1])
    broken["trace"]["spans"][0]["surprise"] = 1  # AgentV's wire schema is strict
    (folder / "traces.jsonl").write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n", "utf-8")
    shutil.copy(TRACES / suite / "replay-targets.yaml", folder / "replay-targets.yaml")
    args = ["run", "evals/dataset.eval.yaml", "--targets", "replay-targets.yaml", "--target", "replayed"]
    line = one_line_error(cli(sqlite_url, *args, "--workdir", str(tmp_path / "ws")))
    assert f"Invalid execution trace replay record at {folder / 'traces.jsonl'}:2: trace.spans.0.surprise" in line
    assert no_store(sqlite_url)
