"""``evalstore import`` of AgentV files as Windows and resumed runs leave them: BOM, CRLF, camelCase, repeats."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import cli, no_store, ok_json, one_line_error, results_by_test

ROW = {"timestamp": "2026-01-01T00:00:00Z", "suite": "s", "target": "agent"}


def test_a_windows_written_camel_case_file_imports(sqlite_url: str, tmp_path: Path) -> None:
    rows = [
        {
            **ROW,
            "testId": "t1",
            "score": 1,
            "executionStatus": "ok",
            "tokenUsage": {"input": 3, "output": 4},
            "scores": [
                {
                    "name": "judge",
                    "type": "llm-grader",
                    "score": 1,
                    "verdict": "pass",
                    "input": {"userPrompt": "grade it"},
                }
            ],
        },
        {**ROW, "testId": "t2", "score": 0.25, "executionStatus": "quality_failure"},
    ]
    path = tmp_path / "dir with spaces" / "résultats.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\r\n\r\n" for r in rows))
    out = ok_json(cli(sqlite_url, "import", str(path), "--json"))
    assert (out["tests"], out["skipped"]) == (2, 0)
    shown = results_by_test(sqlite_url, out["run_id"])
    assert shown["t1"]["score"] == 1 and shown["t1"]["graders"] == {"judge": 1}
    assert shown["t2"]["passed"] is False


def test_a_resumed_run_keeps_the_last_result_and_says_so(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "resumed.jsonl"
    rows = [
        {**ROW, "test_id": "t1", "score": 0, "execution_status": "execution_error", "error": "timeout"},
        {**ROW, "test_id": "t1", "score": 1, "execution_status": "ok"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = ok_json(cli(sqlite_url, "import", str(path), "--json"))
    assert (out["tests"], out["skipped"]) == (1, 1)
    assert results_by_test(sqlite_url, out["run_id"])["t1"]["passed"] is True


def test_one_test_id_in_two_suites_is_one_line_and_writes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "two-suites.jsonl"
    rows = [{**ROW, "test_id": "basic", "score": 1}, {**ROW, "test_id": "basic", "suite": "other", "score": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert "two-suites.jsonl:2" in line and "two-suites.jsonl:1" in line and "--skip-bad" in line
    assert no_store(sqlite_url)  # refused before a store was made


def test_a_utf16_file_is_one_line(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "ps.jsonl"
    path.write_bytes(("\ufeff" + json.dumps({**ROW, "test_id": "t", "score": 1}) + "\r\n").encode("utf-16-le"))
    line = one_line_error(cli(sqlite_url, "import", str(path)))
    assert "ps.jsonl: the file is UTF-16 encoded" in line  # the whole file, not its first line
    assert no_store(sqlite_url)  # refused before a store was made


def test_lines_left_out_are_shown_and_counted_again_on_a_second_import(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({**ROW, "test_id": "t1", "score": 0, "execution_status": "execution_error"})
        + "\n"
        + "{not json\n"
        + json.dumps({**ROW, "test_id": "t1", "score": 1})
        + "\n"
    )
    out = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert (out["tests"], out["skipped"]) == (1, 2)
    again = ok_json(cli(sqlite_url, "import", str(path), "--skip-bad", "--json"))
    assert (again["already_imported"], again["tests"], again["skipped"]) == (True, 1, 2)

    shown = ok_json(cli(sqlite_url, "show", out["run_id"], "--json"))["skipped_lines"]
    # In source order: line 1 was superseded by line 3, line 2 is not JSON.
    assert [(s["source"]["file"], s["source"]["line"]) for s in shown] == [
        (str(path.resolve()), 1),
        (str(path.resolve()), 2),
    ]
    assert shown[0]["reason"].startswith("superseded by ") and "JSON" in shown[1]["reason"]
    text = cli(sqlite_url, "show", out["run_id"]).stdout
    assert "2 source lines left out:" in text and f"{path.resolve()}:2: " in text


def test_the_eval_a_results_file_is_named_after_is_found_beside_it(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "greet.eval.yaml").write_text(
        "name: greet\ntests:\n  - id: t1\n    input: hi\n    assertions:\n      - {type: contains, value: hi}\n"
    )
    results = tmp_path / "greet.eval.baseline.jsonl"
    results.write_text(json.dumps({**ROW, "suite": "greet", "test_id": "t1", "score": 1}) + "\n")
    out = ok_json(cli(sqlite_url, "import", str(results), "--json"))
    assert out["eval_path"] == str((tmp_path / "greet.eval.yaml").resolve())

    # The run keeps that eval; a missing --eval is an error even when the results are already imported.
    line = one_line_error(cli(sqlite_url, "import", str(results), "--eval", str(tmp_path / "nope.yaml")))
    assert "nope.yaml: eval file not found (--eval)" in line
