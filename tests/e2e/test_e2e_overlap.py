"""A test's code graders overlap where they wait on their processes, and the log reads as if they ran
one after another.

Each grader script leaves a marker file and then waits (up to 20 s) for the other graders' markers: it
scores 1 only if every other grader of its test was running at the same time, which graders run one
after another never are. No timing is measured.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalstore import cli as cli_package
from evalstore.store import EventStore

GRADER = """\
import json, pathlib, sys, time
name, folder, others = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3].split(",")
payload = json.load(sys.stdin)
test = payload["output"].split()[-1]
(folder / f"{test}-{name}").touch()
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not all((folder / f"{test}-{o}").exists() for o in others):
    time.sleep(0.02)
met = all((folder / f"{test}-{o}").exists() for o in others)
print(json.dumps({"score": 1 if met else 0, "assertions": [{"text": f"{name} met " + ",".join(others), "passed": met}]}))
"""
GRADERS = ("alpha", "beta", "gamma")
TESTS = 3


def _cli(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_package.main, ["--db", db, *args], catch_exceptions=False)


def _code_graders(script: str, names: tuple[str, ...], *args: str | None) -> str:
    """The YAML of code graders ``names``, each running ``python SCRIPT NAME ARGS`` (an arg None: the
    other graders' names, comma-separated)."""
    return "\n".join(
        f"  - name: {name}\n    type: code-grader\n    command: [{json.dumps(sys.executable)}, {script}, {name}"
        + "".join(", " + json.dumps(a if a is not None else ",".join(n for n in names if n != name)) for a in args)
        + "]"
        for name in names
    )


def _imported(db: str, root: Path) -> str:
    markers = root / "markers"
    markers.mkdir()
    (root / "grader.py").write_text(GRADER)
    graders = _code_graders("grader.py", GRADERS, str(markers), None)
    # A deterministic assertion between them runs in its turn.
    graders = graders.replace(
        "  - name: beta", "  - name: says-answer\n    type: contains\n    value: answer\n  - name: beta"
    )
    (root / "overlap.eval.yaml").write_text(f"name: overlap\ntests: ./cases.yaml\nassertions:\n{graders}\n")
    (root / "cases.yaml").write_text(
        json.dumps([{"id": f"t{i}", "input": f"question {i}", "criteria": "gives the answer"} for i in range(TESTS)])
    )
    rows = [
        {
            "test_id": f"t{i}",
            "suite": "overlap",
            "score": 1,
            "target": "default",
            "output": f"answer t{i}",
            "scores": [],
        }
        for i in range(TESTS)
    ]
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    printed = _cli(db, "import", str(root / "results.jsonl"), "--eval", str(root / "overlap.eval.yaml"), "--json")
    return json.loads(printed.stdout)["run_id"]


def test_a_tests_code_graders_run_at_once_and_are_recorded_in_order(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A one-test replay runs as many grader processes at once as the machine has cores
    # (grading/graders/base.process_slots): on a machine of three, all three graders of a test can meet.
    monkeypatch.setattr(os, "cpu_count", lambda: len(GRADERS))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = _imported(db, tmp_path)
    result = _cli(db, "replay", imported, "--concurrency", "1", "--json")
    replay = json.loads(result.stdout)
    assert replay["failed"] == [] and replay["reuse"]["code_ran"] == TESTS * len(GRADERS)

    store = EventStore.open(db)
    scores = {(r["test_id"], r["grader"]): r["score"] for r in store.query("verdicts", run_id=replay["run_id"])}
    assert set(scores.values()) == {1.0}  # every grader met the other two of its test: they ran at once
    # The log holds each test's grader calls and verdicts in grader order, each call before its verdict.
    order = [
        (e.type, e.event.test_id, e.event.grader if e.type != "test_scored" else None)  # type: ignore[attr-defined]
        for e in store.read_stream(replay["run_id"], types=["grader_called", "verdict_recorded", "test_scored"])
    ]
    expected = []
    for i in range(TESTS):
        for name in ("alpha", "says-answer", "beta", "gamma"):
            if name != "says-answer":
                expected.append(("grader_called", f"t{i}", name))
            expected.append(("verdict_recorded", f"t{i}", name))
        expected.append(("test_scored", f"t{i}", None))
    assert order == expected
    # Each verdict links the call its grader made.
    calls = {e.event_id: e.event for e in store.read_stream(replay["run_id"], types=["grader_called"])}
    for verdict in store.read_stream(replay["run_id"], types=["verdict_recorded"]):
        v = verdict.event
        linked = [calls[c] for c in v.grader_call_event_ids]  # type: ignore[attr-defined]
        assert all((c.test_id, c.grader) == (v.test_id, v.grader) for c in linked)  # type: ignore[attr-defined]


MEETING_GRADER = """\
import json, pathlib, sys, time
folder, tests = pathlib.Path(sys.argv[1]), sys.argv[2].split(",")
test = json.load(sys.stdin)["output"].split()[-1]
(folder / test).touch()
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not all((folder / t).exists() for t in tests):
    time.sleep(0.02)
met = all((folder / t).exists() for t in tests)
print(json.dumps({"score": 1 if met else 0, "assertions": [{"text": test + " met the others", "passed": met}]}))
"""


def test_tests_whose_graders_wait_are_graded_at_once_up_to_the_concurrency(tmp_path: Path) -> None:
    """A replay grades a test on one thread until it waits (executors/local.py): a test whose grader
    process runs hands the next test to another thread, up to ``--concurrency``. Each test's grader
    scores 1 only if the graders of all three tests ran at the same time."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = _imported(db, tmp_path)
    met = tmp_path / "met"
    met.mkdir()
    (tmp_path / "meet.py").write_text(MEETING_GRADER)
    tests = ",".join(f"t{i}" for i in range(TESTS))
    command = [sys.executable, "meet.py", str(met), tests]
    grader = f"  - name: meet\n    type: code-grader\n    command: {json.dumps(command)}"
    (tmp_path / "meet.eval.yaml").write_text(f"name: overlap\ntests: ./cases.yaml\nassertions:\n{grader}\n")
    result = _cli(
        db, "replay", imported, "--eval", str(tmp_path / "meet.eval.yaml"), "--concurrency", str(TESTS), "--json"
    )
    replay = json.loads(result.stdout)
    assert replay["reuse"]["code_ran"] == TESTS
    store = EventStore.open(db)
    assert {r["score"] for r in store.query("verdicts", run_id=replay["run_id"])} == {1.0}


SLOW_GRADER = """\
import json, pathlib, sys, time
pathlib.Path(sys.argv[2], f"{sys.argv[1]}-{time.time()}").touch()
sys.stdin.read()
time.sleep(60)
print(1)
"""


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_a_replay_whose_graders_overlap_and_starts_no_grader_after_it(tmp_path: Path, how: str) -> None:
    """Graders waiting for a process slot, or for the grader before them to start waiting, must not start
    once the replay is interrupted: it exits 130 at once and leaves no grader running. SIGTERM to the
    evalstore process alone (``kill PID``) does the same: by default its graders would run on."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    imported = _imported(db, tmp_path)
    started = tmp_path / "started"
    started.mkdir()
    (tmp_path / "slow.py").write_text(SLOW_GRADER)
    graders = _code_graders("slow.py", (*GRADERS, "delta", "epsilon"), str(started))
    slow_eval = tmp_path / "slow.eval.yaml"
    slow_eval.write_text(f"name: overlap\ntests: ./cases.yaml\nassertions:\n{graders}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalstore", "--db", db, "replay", imported, "--eval", str(slow_eval), "--no-cache"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A child started from a non-interactive parent may inherit SIGINT ignored; a user's shell does not.
        preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()),  # type: ignore[func-returns-value]
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(started.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if how == "ctrl-c":  # the terminal's whole foreground group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        # A grader that started after Ctrl-C (one that was waiting for a slot) would hold the replay for
        # its whole minute: the replay must end long before.
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Interrupted." in err
    time.sleep(0.5)
    running = subprocess.run(["pgrep", "-f", str(started)], capture_output=True, text=True).stdout.split()
    assert running == [], "a grader outlived the interrupted replay"
