"""``evalstore export``: an imported AgentV run goes back out as the rows it came from."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from e2e_helpers import BASELINE, EVALSTORE, V5_BUNDLE, Recorded, cli, ok_json, one_line_error, results_by_test
from fixture_paths import HANDMADE_V4_RUN

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
        else:  # a row with only flattened assertions comes back without scores[], as it came in
            assert "scores" not in got
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


def test_a_recorded_run_exports_each_graders_request_and_usage(
    recorded: Recorded, recorded_db: str, tmp_path: Path
) -> None:
    rows = {
        r["test_id"]: r
        for r in map(
            json.loads, _export(recorded_db, recorded.run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()
        )
    }
    scores = {s["name"]: s for s in rows["q3-report"]["scores"]}
    # The judge's request as AgentV records it, rebuilt from the stored grader call: the rendered
    # prompt holds the converted workbook (West,0 is in the xlsx the agent wrote).
    judge = scores["quality"]
    assert set(judge["input"]) >= {"userPrompt"} and "West,0" in judge["input"]["userPrompt"]
    # In AgentV's shape (§1.1), not the OpenAI usage the judge replied with and the grader call keeps.
    assert judge["token_usage"] and set(judge["token_usage"]) <= {"input", "output", "cached"}
    assert all(isinstance(v, int) for v in judge["token_usage"].values())
    # A script grader's request is AgentV's {command, cwd}; with no cwd of its own it ran in the eval's folder.
    assert scores["workbook"]["input"]["command"][-1].endswith(".py")
    assert scores["workbook"]["input"]["cwd"] == str(recorded.suite.eval.parent)
    assert "token_usage" not in scores["workbook"]  # a process has no token usage


def test_an_output_path_that_cannot_be_written_is_one_clear_error(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    target = tmp_path / "no-such-folder" / "out.csv"
    line = one_line_error(cli(sqlite_url, "export", run_id, "--format", "csv", "-o", str(target)))
    assert line == (
        f"Error: Invalid value for '-o' / '--output': {target}: the folder {target.parent} does not exist; "
        "create it or write elsewhere (see 'main export --help')"
    )


# -- every stored field of AgentV 4.x rows, several targets and attempts ---------------------------

V4_RUN = HANDMADE_V4_RUN
ERROR = 'agent: "quota", exhausted\nexit 3 – réessayez'


def _rich_row(test_id: str, target: str, score: float, **extra: object) -> dict:
    verdict = "pass" if score >= 0.8 else "fail"
    row = {
        "timestamp": "2026-03-01T10:00:00.000Z",
        "test_id": test_id,
        "suite": "rich",
        "category": "greetings/fr",
        "conversation_id": f"conv-{test_id}",
        "experiment": "baseline",
        "score": score,
        "target": target,
        "token_usage": {"input": 1200, "output": 340, "cached": 100, "reasoning": 20},
        "cost_usd": 0.0123,
        "duration_ms": 4567,
        "start_time": "2026-03-01T09:59:55.000Z",
        "end_time": "2026-03-01T09:59:59.567Z",
        "scores": [
            {
                "name": "judge, strict",
                "type": "llm-grader",
                "score": score,
                "weight": 2,
                "verdict": verdict,
                "assertions": [
                    {"text": "Says «bonjour», politely", "passed": True, "evidence": "line 1\nline 2, with comma"},
                    {"text": 'Quotes "exactly"', "passed": False},
                ],
                "input": {"userPrompt": "Grade: héllo", "systemPrompt": "be fair"},
                "target": "judge-gpt",
                "details": {"raw_scores": {"a": 7}},
                "token_usage": {"input": 812, "output": 96},
            },
            {
                "name": "syntax",
                "type": "code-grader",
                "score": 1,
                "weight": 1,
                "verdict": "pass",
                "assertions": [{"text": "compiles", "passed": True}],
                "input": {"command": ["python3", "c.py"], "cwd": "/tmp"},
            },
        ],
        "assertions": [
            {"text": "Says «bonjour», politely", "passed": True},
            {"text": "compiles", "passed": True},
            {"text": 'Quotes "exactly"', "passed": False},
        ],
        "execution_status": "ok" if verdict == "pass" else "quality_failure",
        "output": "Bonjour, «monde»\nsecond line",
        "input": [{"role": "user", "content": "Say hello"}],
        "metadata": {"source_repo": "x"},
        "workspace_path": "/tmp/ws/x",
        "file_changes": "--- a\n+++ b\n",
    }
    row.update(extra)
    return row


def _rich_rows() -> list[dict]:
    return [
        _rich_row("greet", "gpt", 0.9),
        _rich_row("greet", "claude", 0.5),
        _rich_row("greet", "gpt", 0.7, sample_index=1),
        _rich_row(
            "crash, hard",
            "gpt",
            0,
            execution_status="execution_error",
            error=ERROR,
            scores=[],
            assertions=[],
            failure_stage="agent",
            failure_reason_code="provider_error",
        ),
    ]


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _export(db: str, run_id: str, fmt: str, out: Path) -> str:
    result = cli(db, "export", run_id, "--format", fmt, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    return out.read_text(encoding="utf-8")


STORED_ROW_FIELDS = (
    "timestamp",
    "test_id",
    "suite",
    "category",
    "conversation_id",
    "experiment",
    "score",
    "target",
    "token_usage",
    "cost_usd",
    "duration_ms",
    "start_time",
    "end_time",
    "execution_status",
    "error",
    "failure_stage",
    "failure_reason_code",
    "output",
    "input",
    "metadata",
    "workspace_path",
    "file_changes",
    "sample_index",
)


def test_every_stored_field_of_v4_rows_round_trips(sqlite_url: str, tmp_path: Path) -> None:
    rows = _rich_rows()
    run_id = ok_json(cli(sqlite_url, "import", str(_write_rows(tmp_path / "rich.jsonl", rows)), "--json"))["run_id"]
    exported = [
        json.loads(line) for line in _export(sqlite_url, run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()
    ]
    assert len(exported) == len(rows)
    for row, got in zip(rows, exported):  # the source order, every target and attempt kept apart
        for key in STORED_ROW_FIELDS:
            assert got.get(key) == row.get(key), (row["test_id"], key)
        assert got["scores"] == row["scores"]  # names, types, scores, weights, verdicts, assertions, input, target
        assert (
            got["assertions"]
            == [
                {"text": "Says «bonjour», politely", "passed": True, "evidence": "line 1\nline 2, with comma"},
                {"text": "compiles", "passed": True},
                {"text": 'Quotes "exactly"', "passed": False},
            ]
            if row["scores"]
            else got["assertions"] == []
        )
    # ... and the export imports back to the same results.
    again = ok_json(cli(sqlite_url, "import", str(tmp_path / "o.jsonl"), "--json"))["run_id"]
    key = lambda r: (r["test_id"], r["target"], r["attempt"])  # noqa: E731
    first = sorted(
        (key(r), r["score"], r["status"], r["graders"], r["verdicts"])
        for r in ok_json(cli(sqlite_url, "show", run_id, "--json"))["results"]
    )
    second = sorted(
        (key(r), r["score"], r["status"], r["graders"], r["verdicts"])
        for r in ok_json(cli(sqlite_url, "show", again, "--json"))["results"]
    )
    assert first == second


def test_csv_is_one_quoted_line_per_test_and_grader(sqlite_url: str, tmp_path: Path) -> None:
    run_id = ok_json(cli(sqlite_url, "import", str(_write_rows(tmp_path / "rich.jsonl", _rich_rows())), "--json"))[
        "run_id"
    ]
    text = _export(sqlite_url, run_id, "csv", tmp_path / "o.csv")
    lines = list(csv.DictReader(io.StringIO(text, newline="")))
    assert text.splitlines()[0].split(",")[:12] == [
        "run_id",
        "test_id",
        "target",
        "attempt",
        "test_score",
        "passed",
        "status",
        "grader",
        "grader_type",
        "grader_score",
        "verdict",
        "weight",
    ]
    assert [(r["test_id"], r["target"], r["attempt"], r["grader"]) for r in lines] == [
        ("greet", "gpt", "1", "judge, strict"),
        ("greet", "gpt", "1", "syntax"),
        ("greet", "claude", "1", "judge, strict"),
        ("greet", "claude", "1", "syntax"),
        ("greet", "gpt", "2", "judge, strict"),
        ("greet", "gpt", "2", "syntax"),
        ("crash, hard", "gpt", "1", ""),
    ]
    assert (lines[2]["grader_score"], lines[2]["verdict"], lines[2]["weight"]) == ("0.5", "fail", "2.0")
    assert (lines[0]["assertions_passed"], lines[0]["assertions_total"], lines[0]["failed_assertions"]) == (
        "1",
        "2",
        'Quotes "exactly"',
    )
    assert (lines[-1]["status"], lines[-1]["error"]) == ("execution_error", ERROR)


def test_a_v4_run_directory_exports_its_usage_and_grader_requests(sqlite_url: str, tmp_path: Path) -> None:
    run_id = ok_json(cli(sqlite_url, "import", str(V4_RUN), "--json"))["run_id"]
    exported = [
        json.loads(line) for line in _export(sqlite_url, run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()
    ]
    originals = [json.loads(line) for line in (V4_RUN / "index.jsonl").read_text(encoding="utf-8").splitlines()]
    for row, got in zip(originals, exported, strict=True):
        for key in (
            "timestamp",
            "test_id",
            "suite",
            "target",
            "score",
            "execution_status",
            "cost_usd",
            "start_time",
            "end_time",
            "workspace_path",
            "metadata",
        ):
            assert got.get(key) == row.get(key), (row["test_id"], key)
        for mine, theirs in zip(got["scores"], row["scores"], strict=True):
            for key in ("name", "type", "score", "weight", "verdict", "input", "target"):
                assert mine.get(key) == theirs.get(key), (row["test_id"], theirs["name"], key)
    assert exported[0]["token_usage"] == originals[0]["token_usage"]


def test_the_v5_bundle_exports_what_show_shows(sqlite_url: str, tmp_path: Path) -> None:
    run_id = ok_json(cli(sqlite_url, "import", str(V5_BUNDLE), "--json"))["run_id"]
    (row,) = [json.loads(line) for line in (V5_BUNDLE / ".internal" / "index.jsonl").read_text().splitlines()]
    (got,) = [
        json.loads(line) for line in _export(sqlite_url, run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()
    ]
    assert (got["test_id"], got["target"], got["suite"], got["score"]) == (
        row["test_id"],
        row["target"],
        row["suite"],
        row["score"],
    )
    # Names too: the bundle has two graders named llm-rubric, stored as llm-rubric and llm-rubric-2.
    assert [(s["name"], s["type"], s["score"], s["weight"], s["verdict"], s.get("target")) for s in got["scores"]] == [
        (s["name"], s["type"], s["score"], s["weight"], "pass" if s["pass"] else "fail", s.get("target"))
        for s in row["scores"]
    ]
    assert len({s["name"] for s in row["scores"]}) < len(row["scores"])
    for key in ("token_usage", "duration_ms", "start_time", "end_time", "timestamp"):
        assert got[key] == row[key], key
    shown = results_by_test(sqlite_url, run_id)[row["test_id"]]
    assert sorted(s["score"] for s in got["scores"]) == sorted(shown["graders"].values())


# -- recorded runs and replays -------------------------------------------------------------------


def test_a_recorded_run_exports_agentv_rows_matching_show(recorded: Recorded, recorded_db: str, tmp_path: Path) -> None:
    rows = [
        json.loads(line)
        for line in _export(recorded_db, recorded.run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()
    ]
    shown = results_by_test(recorded_db, recorded.run_id)
    assert sorted(r["test_id"] for r in rows) == sorted(shown)
    for row in rows:
        test = shown[row["test_id"]]
        assert (row["score"], row["target"], row["execution_status"]) == (test["score"], test["target"], test["status"])
        assert {s["name"]: (s["score"], s["verdict"]) for s in row["scores"]} == {
            g: (test["graders"][g], test["verdicts"][g]) for g in test["graders"]
        }
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", row["timestamp"])
        assert row["output"].startswith("The Q") and row["input"][0]["role"] == "user"


def test_a_replay_exports_carried_and_regraded_verdicts_with_the_parent_transcript(
    recorded: Recorded, recorded_db: str, tmp_path: Path
) -> None:
    out = ok_json(
        cli(
            recorded_db,
            "replay",
            recorded.run_id,
            "--graders",
            "workbook",
            "--eval",
            str(recorded.suite.eval_v2),
            "--json",
        ),
        0,
        1,
    )
    replay_id = out["run_id"]
    doc = json.loads(_export(recorded_db, replay_id, "json", tmp_path / "o.json"))
    parent = {
        r["test_id"]: r
        for r in json.loads(_export(recorded_db, recorded.run_id, "json", tmp_path / "p.json"))["results"]
    }
    shown = results_by_test(recorded_db, replay_id)
    assert doc["run"]["parent_run_id"] == recorded.run_id and doc["summary"]["status"] == "completed"
    assert sorted(r["test_id"] for r in doc["results"]) == sorted(shown)
    for result in doc["results"]:
        test, before = shown[result["test_id"]], parent[result["test_id"]]
        assert result["score"] == test["score"]
        by_grader = {v["grader"]: v for v in result["verdicts"]}
        assert set(by_grader) == set(test["graders"]) == {v["grader"] for v in before["verdicts"]}
        for name, verdict in by_grader.items():
            assert verdict["score"] == test["graders"][name]
            old = next(v for v in before["verdicts"] if v["grader"] == name)
            if name == "workbook":
                assert verdict["origin"] == "graded" and verdict["carried_from"] is None
            else:  # carried over unchanged
                assert verdict["origin"] == "carried" and verdict["carried_from"]
                assert (verdict["score"], verdict["verdict"], verdict["assertions"]) == (
                    old["score"],
                    old["verdict"],
                    old["assertions"],
                )
        assert result["transcript"] == before["transcript"]  # the replay never called the agent
    # The v2 code grader only checks for a Total row, which every report has: Q3's workbook verdict changed.
    q3 = next(r for r in doc["results"] if r["test_id"] == "q3-report")
    assert next(v for v in q3["verdicts"] if v["grader"] == "workbook")["score"] == 1.0
    assert next(v for v in parent["q3-report"]["verdicts"] if v["grader"] == "workbook")["score"] < 1.0


# -- errors and output handling --------------------------------------------------------------------


def test_an_unknown_run_is_one_line(sqlite_url: str) -> None:
    _imported(sqlite_url)
    assert (
        one_line_error(cli(sqlite_url, "export", "no-such-run"))
        == "Error: no run 'no-such-run' in this store; `evalstore runs` lists them"
    )


def test_a_directory_as_output_is_one_line_before_any_work(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    line = one_line_error(cli(sqlite_url, "export", run_id, "-o", str(tmp_path)))
    assert line.startswith(f"Error: Invalid value for '-o' / '--output': {tmp_path}: a folder; give the file's name"), (
        line
    )


def test_output_file_is_replaced_whole_and_dash_means_stdout(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    out = tmp_path / "rows.jsonl"
    out.write_text("old content\n", encoding="utf-8")
    result = cli(sqlite_url, "export", run_id, "-o", str(out))
    assert result.exit_code == 0 and result.stdout == "" and "wrote 5 results to" in result.stderr
    assert (
        next(json.loads(line)["test_id"] for line in out.read_text(encoding="utf-8").splitlines())
        == "code-quality-multi-eval"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl", "store.db"]  # no temporary file left
    dash = cli(sqlite_url, "export", run_id, "-o", "-")
    assert dash.exit_code == 0 and dash.stdout == out.read_text(encoding="utf-8")


def test_a_reader_that_goes_away_stops_the_export_quietly(sqlite_url: str, tmp_path: Path) -> None:
    rows = [_rich_row(f"t{i:04d}", "gpt", 0.9) for i in range(400)]  # far more than a pipe buffer holds
    run_id = ok_json(cli(sqlite_url, "import", str(_write_rows(tmp_path / "many.jsonl", rows)), "--json"))["run_id"]
    proc = subprocess.Popen(
        [str(EVALSTORE), "--db", sqlite_url, "export", run_id],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["test_id"] == "t0000"
    proc.stdout.close()  # as `| head -1` does
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and stderr == ""  # a closed stdout does not change the exit code


def test_export_reads_the_same_on_every_backend(store_url: str, tmp_path: Path) -> None:
    run_id = ok_json(cli(store_url, "import", str(V4_RUN), "--json"))["run_id"]
    rows = [json.loads(line) for line in _export(store_url, run_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines()]
    originals = [json.loads(line) for line in (V4_RUN / "index.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["test_id"], r["score"], [s.get("input") for s in r["scores"]]) for r in rows] == [
        (o["test_id"], o["score"], [s.get("input") for s in o["scores"]]) for o in originals
    ]


@pytest.mark.parametrize("args", [["runs"], ["export", "RUN"], ["export", "RUN", "--format", "csv"]])
def test_a_stdout_closed_from_the_start_is_a_reader_gone_not_a_crash(sqlite_url: str, args: list[str]) -> None:
    run_id = _imported(sqlite_url)
    argv = [str(EVALSTORE), "--db", sqlite_url, *(run_id if a == "RUN" else a for a in args)]
    # Python gives a closed fd 1 as sys.stdout None; the command runs as if its reader had gone away.
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1), timeout=60
    )
    assert done.returncode == 0 and "Error" not in done.stderr and "Traceback" not in done.stderr


def test_a_replay_of_an_import_keeps_the_rows_labels_but_not_its_failure(sqlite_url: str, tmp_path: Path) -> None:
    """category, conversation_id and experiment describe the test: a replay's rows keep its origin's.
    failure_stage and failure_reason_code describe how the origin ended, so they are not carried."""
    row = _rich_row("greet", "gpt", 0.5, failure_stage="grading", failure_reason_code="judge_timeout")
    run_id = ok_json(cli(sqlite_url, "import", str(_write_rows(tmp_path / "r.jsonl", [row])), "--json"))["run_id"]
    suite = tmp_path / "greet.eval.yaml"
    suite.write_text(
        "tests:\n  - id: greet\n    input: Say hello\n    assertions:\n      - type: contains\n        value: Bonjour\n"
    )
    replay_id = ok_json(cli(sqlite_url, "replay", run_id, "--eval", str(suite), "--json"))["run_id"]
    [exported] = map(json.loads, _export(sqlite_url, replay_id, "agentv-jsonl", tmp_path / "o.jsonl").splitlines())
    assert (exported["category"], exported["conversation_id"], exported["experiment"]) == (
        "greetings/fr",
        "conv-greet",
        "baseline",
    )
    assert "failure_stage" not in exported and "failure_reason_code" not in exported
    # Numbers as AgentV's JSON.stringify writes them: 1 and 4567, not 1.0 and 4567.0.
    raw = (tmp_path / "o.jsonl").read_text(encoding="utf-8")
    assert '"score":1,' in raw and '"duration_ms":4567,' in raw and '"weight":1,' in raw
    assert exported["score"] == 1.0 and exported["output"] == row["output"]


def test_a_database_failure_is_one_line_not_an_internal_error(sqlite_url: str, tmp_path: Path) -> None:
    run_id = _imported(sqlite_url)
    db = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:  # damage the store under the command: a table it reads is gone
        conn.execute("DROP TABLE verdicts")
    result = cli(sqlite_url, "show", run_id, "--json")
    assert result.exit_code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: database error: no such table: verdicts") and "internal error" not in line
