"""``evalstore export``: an imported AgentV run goes back out as the rows it came from."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from e2e_helpers import BASELINE, Recorded, cli, ok_json, one_line_error, results_by_test

pytestmark = pytest.mark.skipif(not BASELINE.exists(), reason=f"AgentV fixtures not found at {BASELINE.parent}")


def _imported(db: str) -> str:
    return ok_json(cli(db, "import", str(BASELINE), "--json"))["run_id"]


def test_agentv_jsonl_reproduces_the_original_rows(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    out = tmp_path / "export.jsonl"
    result = cli(sqlite_url, "export", run_id, "--format", "agentv-jsonl", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    exported = {r["test_id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    original = [json.loads(line) for line in BASELINE.read_text(encoding="utf-8").splitlines()]
    assert set(exported) == {r["test_id"] for r in original}
    for row in original:
        got = exported[row["test_id"]]
        assert got["target"] == row["target"] and got["suite"] == row["suite"]
        assert got["score"] == pytest.approx(row["score"])
        if "scores" in row:
            assert [g["name"] for g in got["scores"]] == [g["name"] for g in row["scores"]]
            for mine, theirs in zip(got["scores"], row["scores"]):
                assert mine["type"] == theirs["type"]
                assert mine["score"] == pytest.approx(theirs["score"])
                assert mine["verdict"] == theirs["verdict"]
                assert [(a["text"], a["passed"]) for a in mine.get("assertions", [])] == [
                    (a["text"], a["passed"]) for a in theirs.get("assertions", [])
                ]
        if "assertions" in row:
            assert [(a["text"], a["passed"]) for a in got["assertions"]] == [
                (a["text"], a["passed"]) for a in row["assertions"]
            ]


def test_csv_has_one_row_per_test_and_grader(sqlite_url: str) -> None:
    run_id = _imported(sqlite_url)
    result = cli(sqlite_url, "export", run_id, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    shown = results_by_test(sqlite_url, run_id)
    assert len(rows) == sum(len(r["graders"]) for r in shown.values())
    for row in rows:
        test = shown[row["test_id"]]
        assert row["run_id"] == run_id and row["target"] == test["target"]
        assert float(row["test_score"]) == pytest.approx(test["score"])
        assert float(row["grader_score"]) == pytest.approx(test["graders"][row["grader"]])
        assert row["verdict"] == test["verdicts"][row["grader"]]


def test_json_of_a_recorded_run_parses_and_agrees_with_show(recorded: Recorded, recorded_db: str) -> None:
    result = cli(recorded_db, "export", recorded.run_id, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["run"]["run_id"] == recorded.run_id and doc["run"]["kind"] == "recorded"
    shown = results_by_test(recorded_db, recorded.run_id)
    assert {r["test_id"]: r["score"] for r in doc["results"]} == {t: r["score"] for t, r in shown.items()}


def test_an_output_path_that_cannot_be_written_is_one_clear_error(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    target = tmp_path / "no-such-folder" / "out.csv"
    line = one_line_error(cli(sqlite_url, "export", run_id, "--format", "csv", "-o", str(target)))
    assert line == f"Error: {target}: No such file or directory"
