"""Killed processes: ``run --resume`` and ``replay --resume`` finish the job without redoing recorded work."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

from e2e_helpers import (
    EVALSTORE,
    cli,
    kill_pid_file,
    make_suite,
    ok_json,
    one_line_error,
    record,
    result_rows,
    results_by_test,
    runs,
    verdict_signature,
    wait_for,
)

SLOW_CASES = [
    ("q1-report", "Write the Q1 revenue report as revenue.xlsx and summary.html."),
    ("q2-report", "Write the Q2 revenue report as revenue.xlsx and summary.html."),
    ("q3-report", "Write the Q3 revenue report as revenue.xlsx and summary.html. SLEEP"),
]


def _start(db: str, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EVALSTORE), "--db", db, *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_killed_run_resumes_without_calling_the_agent_for_recorded_tests(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite", cases=SLOW_CASES)
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"
    proc = _start(
        db,
        "run",
        str(suite.eval),
        "--workers",
        "1",
        "--workdir",
        str(tmp_path / "ws"),
        cwd=tmp_path,
        env={"E2E_AGENT_SLEEP": "60"},
    )
    try:
        wait_for(
            lambda: result_rows(db_file, "rec-") >= 2 and (suite.root / "sleeping.pid").exists(),
            60,
            "two tests recorded and the third agent call under way",
        )
        assert proc.poll() is None, "the run finished before it could be killed"
    finally:
        _kill(proc)
        kill_pid_file(suite.root / "sleeping.pid")
    (run,) = runs(db)
    assert run["status"] != "completed" and run["tests"] == 2
    assert Counter(suite.calls()) == {"q1-report": 1, "q2-report": 1, "q3-report": 1}

    # Another target or pass mark would grade the tests run now otherwise than those recorded before.
    line = one_line_error(cli(db, "run", "--resume", run["run_id"], "--target", "other", "--threshold", "0.4"))
    assert line.startswith(
        "Error: --target, --threshold with --resume: a resumed run keeps the settings it began with; "
        "start a new run to change them"
    )
    assert Counter(suite.calls()) == {"q1-report": 1, "q2-report": 1, "q3-report": 1}

    out = ok_json(cli(db, "run", "--resume", run["run_id"], "--json", "--workdir", str(tmp_path / "ws")), 1)
    assert out["run_id"] == run["run_id"]
    assert [r["test_id"] for r in out["results"]] == [c[0] for c in SLOW_CASES]
    # The recorded tests were not run again; only the one the kill interrupted was.
    assert Counter(suite.calls()) == {"q1-report": 1, "q2-report": 1, "q3-report": 2}
    (run,) = runs(db)
    assert run["status"] == "completed" and run["tests"] == 3
    assert results_by_test(db, run["run_id"])["q3-report"]["graders"]["states-total"] == 0.0
    assert ok_json(cli(db, "verify", "--json"))["ok"] is True


SLOW_GRADER = """
import json, os, sys, time
from pathlib import Path
payload = json.dumps(json.load(sys.stdin))
quarter = next(q for q in ("Q1", "Q2", "Q3") if q in payload)
home = Path(__file__).resolve().parent
log = home / "graded.log"
earlier = log.read_text().split() if log.exists() else []
with open(log, "a") as out:
    out.write(quarter + "\\n")
if len(earlier) == 2 and (home / "slow.flag").exists():  # the third test graded: hang until killed
    (home / "sleeping.pid").write_text(str(os.getpid()))
    time.sleep(60)
print(json.dumps({"score": 1.0, "assertions": [{"text": "graded " + quarter, "passed": True}]}))
"""


def test_a_killed_replay_resumes_without_regrading_recorded_tests(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite")
    db_file = tmp_path / "store.db"
    db = f"sqlite:///{db_file}"
    parent = record(db, suite)["run_id"]
    graders = suite.root / "graders"
    (graders / "slow.py").write_text(SLOW_GRADER, encoding="utf-8")
    (graders / "slow.flag").write_text("", encoding="utf-8")
    slow_eval = suite.root / "evals" / "slow.eval.yaml"
    slow_eval.write_text(suite.eval.read_text().replace("../graders/check.py", "../graders/slow.py"), encoding="utf-8")
    log = graders / "graded.log"

    proc = _start(db, "replay", parent, "--eval", str(slow_eval), "--concurrency", "1", cwd=tmp_path, env={})
    try:
        wait_for(
            lambda: result_rows(db_file, "rpl-") >= 2 and (graders / "sleeping.pid").exists(),
            60,
            "two tests regraded and the third under way",
        )
        assert proc.poll() is None
    finally:
        _kill(proc)
        kill_pid_file(graders / "sleeping.pid")
    (replay,) = [r for r in runs(db) if r["kind"] == "replay"]
    assert replay["status"] != "completed" and replay["tests"] == 2
    graded = log.read_text().split()
    assert sorted(graded) == ["Q1", "Q2", "Q3"]
    interrupted = graded[-1]

    (graders / "slow.flag").unlink()
    out = ok_json(cli(db, "replay", "--resume", replay["run_id"], "--json"), 0, 1)
    assert out["run_id"] == replay["run_id"] and out["complete"] is True
    assert Counter(log.read_text().split()) == {q: 2 if q == interrupted else 1 for q in ("Q1", "Q2", "Q3")}
    (replay,) = [r for r in runs(db) if r["kind"] == "replay"]
    assert replay["status"] == "completed" and replay["tests"] == 3
    signature = verdict_signature(db, replay["run_id"])
    assert {k: v[0] for k, v in signature.items() if k[1] == "workbook"} == {
        ("q1-report", "workbook"): 1.0,
        ("q2-report", "workbook"): 1.0,
        ("q3-report", "workbook"): 1.0,
    }
    # The resumed replay kept the settings it started with (the slow eval), not the run's snapshot.
    snapshot = ok_json(cli(db, "audit", replay["run_id"], "q3-report", "--json"))["run"]["eval_snapshot"]
    assert any(s["path"].endswith("slow.py") for s in snapshot)
    # `run --resume` continues recorded runs only, and says which command a replay takes.
    assert one_line_error(cli(db, "run", "--resume", replay["run_id"])) == (
        f"Error: run {replay['run_id']} is a replay; `evalstore replay --resume {replay['run_id']}` continues it "
        "(`evalstore run --resume` continues runs `evalstore run` made)"
    )
