"""``evalstore run``: a real cli target, every byte it wrote captured, graded four ways, exit codes."""

from __future__ import annotations

from pathlib import Path

from e2e_helpers import (
    JUDGE_KEY_ENV,
    JUDGE_KEY_VALUE,
    LENIENT,
    PY,
    Q3_SCORE,
    TESTS,
    Recorded,
    audit,
    cli,
    evalstore,
    make_suite,
    ok_json,
    one_line_error,
    record,
    sha256,
)
from judge_server import JudgeServer

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def test_recorded_run_keeps_every_byte_after_the_workspace_is_gone(
    recorded: Recorded, recorded_db: str, judge: JudgeServer
) -> None:
    suite = recorded.suite
    assert not (suite.root / "workspaces").exists()  # the fixture deleted the agent's workspace
    assert sorted(suite.calls()) == sorted(TESTS)

    report = ok_json(cli(recorded_db, "verify", "--json"))
    assert report["ok"] is True and report["problem"] is None

    for test_id in TESTS:
        (test,) = audit(recorded_db, recorded.run_id, test_id)["tests"]
        stored = {a["path"]: a for a in test["artifacts"]}
        assert set(stored) == {"revenue.xlsx", "summary.html"}
        for name, media_type in (("revenue.xlsx", XLSX), ("summary.html", "text/html")):
            written = suite.saved(test_id, name)
            assert stored[name]["status"] == "stored"
            assert stored[name]["sha256"] == sha256(written), (test_id, name)
            assert stored[name]["size"] == len(written)
            assert stored[name]["media_type"] == media_type
            assert stored[name]["blob"] == "ok"
        # Both converters ran on the captured bytes, for every grader that reads the answer.
        conversions = {p["path"]: p for v in test["verdicts"] for p in v["preprocessing"]}
        assert conversions["revenue.xlsx"]["status"] == "converted"
        assert conversions["revenue.xlsx"]["argv"][-1] == str(suite.root / "scripts" / "xlsx_to_csv.py")
        assert conversions["summary.html"]["status"] == "converted"
        assert conversions["revenue.xlsx"]["artifact_sha256"] == sha256(suite.saved(test_id, "revenue.xlsx"))


def test_recorded_run_grades_with_code_assertions_converters_and_the_judge(
    recorded: Recorded, recorded_db: str, judge: JudgeServer
) -> None:
    out = recorded.output
    assert set(out) == {"run_id", "threshold", "results"} and out["threshold"] == 0.8
    rows = {r["test_id"]: r for r in out["results"]}
    assert list(rows) == list(TESTS)
    assert {k for r in out["results"] for k in r} >= {"test_id", "target", "score", "passed", "status", "graders"}
    for test_id in ("q1-report", "q2-report"):
        assert rows[test_id]["graders"] == {
            "names-files": 1.0,
            "states-total": 1.0,
            "workbook": 1.0,
            "quality": LENIENT,
        }
        assert rows[test_id]["passed"] is True and rows[test_id]["status"] == "ok"
    # Q3: the summary states no total, the workbook has a zero region, and the judge saw it in the CSV.
    q3 = rows["q3-report"]
    assert q3["graders"]["states-total"] == 0.0
    assert abs(q3["graders"]["workbook"] - 2 / 3) < 1e-9
    assert q3["graders"]["quality"] == Q3_SCORE
    assert q3["passed"] is False and q3["status"] == "quality_failure"
    assert abs(q3["score"] - (1 + 0 + 2 / 3 + Q3_SCORE) / 4) < 1e-9

    # The judge got the converted workbook and summary in its prompt, and the key from the environment.
    assert len(recorded.judge_sent) == 3
    first = next(r for r in recorded.judge_sent if "Q1" in r.user)
    assert first.headers["authorization"] == f"Bearer {JUDGE_KEY_VALUE}"
    assert first.body["model"] == "judge-model-1" and first.body["temperature"] == 0
    assert "Region,Revenue" in first.user and "revenue summary" in first.user
    assert "[[ file: revenue.xlsx ]]" in first.user

    # The store keeps the ${{ NAME }} reference, never the key's value.
    db_bytes = b"".join(p.read_bytes() for p in recorded.db_file.parent.glob(recorded.db_file.name + "*"))
    assert JUDGE_KEY_VALUE.encode() not in db_bytes
    run = audit(recorded_db, recorded.run_id, "q1-report")["run"]
    assert run["target"]["provider"] == "cli" and run["target_name"] == "agent"
    roles = {(s["role"], Path(s["path"]).name) for s in run["eval_snapshot"]}
    assert {
        ("eval", "report.eval.yaml"),
        ("grader_script", "check.py"),
        ("converter", "xlsx_to_csv.py"),
        ("converter", "html_to_md.py"),
        ("prompt", "quality.md"),
    } <= roles
    assert all(s["blob"] == "ok" for s in run["eval_snapshot"])


def test_exit_codes_and_threshold_through_the_installed_script(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite")
    db = f"sqlite:///{tmp_path / 'store.db'}"
    below = evalstore(db, "run", str(suite.eval), "--json", "--workdir", str(tmp_path / "ws"), cwd=tmp_path)
    out = ok_json(below, 1)  # q3 scores (1 + 0 + 2/3) / 3 = 0.56, below the eval's 0.8
    assert [r["test_id"] for r in out["results"] if not r["passed"]] == ["q3-report"]
    assert "Traceback" not in below.stderr

    passing = evalstore(
        db, "run", str(suite.eval), "--threshold", "0.5", "--workdir", str(tmp_path / "ws2"), cwd=tmp_path
    )
    assert passing.returncode == 0, passing.stderr
    assert "3/3 passed (threshold 0.5)" in passing.stdout
    for test_id in TESTS:
        assert f"{test_id}" in passing.stdout
    assert len(ok_json(cli(db, "runs", "--json"))) == 2


# -- bad inputs ---------------------------------------------------------------------------------


BAD_TARGETS = f"""\
targets:
  - name: missing-command
    provider: cli
    command: /nonexistent/bin/agent-that-is-not-installed {{PROMPT_FILE}}
  - name: hangs
    provider: cli
    command: ["{PY}", "-c", "import time; time.sleep(60)"]
  - name: crashes
    provider: cli
    command: ["{PY}", "-c", "import sys; print('agent: quota exhausted', file=sys.stderr); sys.exit(3)"]
"""


def _bad_suite(tmp_path: Path) -> Path:
    suite = make_suite(tmp_path / "suite", cases=[("q1-report", "Write the Q1 revenue report.")])
    suite.targets.write_text(BAD_TARGETS, encoding="utf-8")
    return suite.eval


def test_an_eval_file_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    line = one_line_error(evalstore(db, "run", "nowhere/missing.eval.yaml", cwd=tmp_path))
    assert "missing.eval.yaml" in line and "cannot read" in line
    assert not (tmp_path / "store.db").exists()


def test_a_target_command_that_does_not_exist_is_refused_before_the_run_is_recorded(tmp_path: Path) -> None:
    eval_file = _bad_suite(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    line = one_line_error(
        cli(db, "run", str(eval_file), "--target", "missing-command", "--json", "--workdir", str(tmp_path / "ws"))
    )
    assert "target 'missing-command'" in line and "/nonexistent/bin/agent-that-is-not-installed" in line, line
    assert "does not exist" in line
    assert not (tmp_path / "store.db").exists()  # nothing recorded: not even a store made


def test_a_target_that_hangs_times_out(tmp_path: Path) -> None:
    eval_file = _bad_suite(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = evalstore(
        db,
        "run",
        str(eval_file),
        "--target",
        "hangs",
        "--timeout",
        "2",
        "--max-retries",  # one call is enough to time out (tests/e2e/test_e2e_run_retries.py retries)
        "0",
        "--json",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
    )
    (row,) = ok_json(result, 1)["results"]
    assert row["status"] == "execution_error"
    assert "timed out" in row["error"] or "timeout" in row["error"], row["error"]
    assert "Traceback" not in result.stderr


def test_a_target_that_exits_non_zero_is_an_execution_error_with_its_stderr(tmp_path: Path) -> None:
    eval_file = _bad_suite(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    # One call (the retries of a failed call: tests/e2e/test_e2e_run_retries.py).
    argv = [
        "run",
        str(eval_file),
        "--target",
        "crashes",
        "--max-retries",
        "0",
        "--json",
        "--workdir",
        str(tmp_path / "ws"),
    ]
    out = ok_json(cli(db, *argv), 1)
    (row,) = out["results"]
    assert row["status"] == "execution_error"
    assert "3" in row["error"] and "quota exhausted" in row["error"], row["error"]
    # The failed call is still on record, and the store is sound.
    assert ok_json(cli(db, "verify", "--json"))["ok"] is True
    (test,) = audit(db, out["run_id"], "q1-report")["tests"]
    assert test["transcript"]["status"] != "ok" and test["transcript"]["exit_code"] == 3


def test_an_unknown_target_name_is_one_line(tmp_path: Path) -> None:
    eval_file = _bad_suite(tmp_path)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    line = one_line_error(cli(db, "run", str(eval_file), "--target", "nobody"))
    assert "nobody" in line and "missing-command" in line


def test_key_reference_unset_is_refused_before_the_agent_runs(tmp_path: Path, judge: JudgeServer, monkeypatch) -> None:
    """A judge key variable that is not exported: the run is refused before the agent is called,
    naming the grader and the variable; nothing is recorded and nothing is sent."""
    monkeypatch.delenv(JUDGE_KEY_ENV, raising=False)
    suite = make_suite(tmp_path / "suite", judge_url=judge.base_url, cases=[("q1-report", "Write the Q1 report.")])
    db = f"sqlite:///{tmp_path / 'store.db'}"
    before = len(judge.requests)
    line = one_line_error(cli(db, "run", str(suite.eval), "--json", "--workdir", str(tmp_path / "ws")))
    assert "grader 'quality' needs a judge" in line and f"{JUDGE_KEY_ENV} (the API key) is not set" in line, line
    assert len(judge.requests) == before and suite.calls() == []
    assert not (tmp_path / "store.db").exists()


def test_a_new_run_asks_the_judge_afresh_unless_told_to_reuse(
    tmp_path: Path, judge: JudgeServer, key_env: dict
) -> None:
    """A run is a new observation of the agent and of its judge: running the suite again sends the judge
    its requests again, even when the agent's answers (and so the requests) are the same. ``--cache``
    reuses the replies the store holds, marked as reused, as AgentV's ``--cache`` does."""
    suite = make_suite(tmp_path / "suite", judge_url=judge.base_url, cases=[("q1-report", "Write the Q1 report.")])
    db = f"sqlite:///{tmp_path / 'store.db'}"

    def judged(*extra: str) -> tuple[int, list[bool]]:
        before = len(judge.requests)
        run_id = record(db, suite, *extra)["run_id"]
        (test,) = audit(db, run_id, "q1-report")["tests"]
        hits = [v["cache_hit"] for v in test["verdicts"] if v["grader"] == "quality"]
        return len(judge.requests) - before, hits

    first, second, reused = judged(), judged(), judged("--cache")
    assert first[0] >= 1 and first[1] and not any(first[1])
    assert second == first  # the same requests, sent again
    assert reused[0] == 0 and reused[1] and all(reused[1])
