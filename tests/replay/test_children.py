"""run_child: stdin fed, both pipes read and the exit seen from one thread, with the same limits as ever."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from evalstore.replay.processes.children import STDERR_TAIL_BYTES, run_child

PY = sys.executable


def test_a_large_stdin_is_fed_while_stdout_is_read() -> None:
    # A child that echoes as it reads fills its stdout pipe long before its stdin is all written.
    data = os.urandom(3_000_000)
    result = run_child(
        [PY, "-c", "import sys, shutil; shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)"], data, timeout=60
    )
    assert result.ok and result.stdout == data


def test_stdout_over_the_cap_keeps_its_head_and_stderr_keeps_its_tail() -> None:
    script = (
        "import sys\n"
        "sys.stderr.write('x' * 100_000 + 'END')\n"
        "sys.stderr.flush()\n"
        "sys.stdout.write('a' * 1000 + 'b' * 1_000_000)\n"
    )
    result = run_child([PY, "-c", script], b"", timeout=60, max_output_bytes=1000)
    assert result.output_exceeded and result.exit_code is None and not result.ok
    assert result.stdout == b"a" * 1000
    assert len(result.stderr) <= STDERR_TAIL_BYTES and result.stderr.endswith(b"END")


def test_a_child_that_does_not_read_a_large_stdin_times_out() -> None:
    started = time.monotonic()
    result = run_child([PY, "-c", "import time; time.sleep(30)"], b"x" * 5_000_000, timeout=1.0)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10


def test_a_child_that_ignores_its_stdin_and_exits_is_read_normally() -> None:
    result = run_child([PY, "-c", "print('done')"], b"x" * 5_000_000, timeout=30)
    assert result.ok and result.stdout.strip() == b"done"


def test_a_grandchild_holding_the_pipes_is_killed_after_the_child_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen(['sleep', '1000'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('graded')\n"
        "sys.exit(3)\n"
    )
    started = time.monotonic()
    result = run_child([PY, "-c", script], b"", timeout=60)
    assert time.monotonic() - started < 10, "waited for the grandchild instead of the child"
    assert result.exit_code == 3 and not result.timed_out and result.stdout.strip() == b"graded"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{grandchild}/stat").exists() and Path(f"/proc/{grandchild}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the grandchild outlived the grade")


def test_a_child_that_closes_its_pipes_and_runs_on_is_waited_for_within_the_timeout() -> None:
    script = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(0.5)\n"
    result = run_child([PY, "-c", script], b"", timeout=30)
    assert result.exit_code == 0 and result.duration_ms >= 450
    result = run_child([PY, "-c", "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(30)\n"], b"", timeout=1.0)
    assert result.timed_out and result.exit_code is None


def test_after_cancel_children_no_child_starts_until_children_are_allowed_again(tmp_path: Path) -> None:
    """An interrupted run's graders still waiting for a process slot (or the next grader of a test) must
    not start their processes: run_child refuses without starting one, until a new run allows it."""
    import pytest

    from evalstore.replay.processes.children import Cancelled, allow_children, cancel_children

    marker = tmp_path / "started"
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    cancel_children()
    try:
        with pytest.raises(Cancelled, match="was not started"):
            run_child(argv, b"", timeout=30)
        assert not marker.exists()
    finally:
        allow_children()
    assert run_child(argv, b"", timeout=30).exit_code == 0 and marker.exists()


# --- the environment rule and the output mask (issue 29 item 5) --------------------------------------


def test_a_child_is_not_given_what_only_a_judge_references(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from evalstore.replay.processes.children import child_environment, withholding

    monkeypatch.setenv("JUDGE_ONLY_KEY", "judge-secret-value")
    monkeypatch.setenv("EVALSTORE_DB", "postgresql://u:pw@h/db")
    monkeypatch.setenv("PLAIN_SETTING", "kept")
    assert child_environment()["JUDGE_ONLY_KEY"] == "judge-secret-value"  # outside a run: as AgentV passes it
    with withholding({"JUDGE_ONLY_KEY"}):
        env = child_environment()
        assert "JUDGE_ONLY_KEY" not in env and "EVALSTORE_DB" not in env and env["PLAIN_SETTING"] == "kept"
        printed = run_child(
            [sys.executable, "-c", "import os; print(os.environ.get('JUDGE_ONLY_KEY', 'absent'))"], b"", timeout=30
        )
        assert printed.stdout.strip() == b"absent"
    assert child_environment()["JUDGE_ONLY_KEY"] == "judge-secret-value"


def test_what_a_child_prints_of_a_secret_is_masked_as_written_and_json_escaped(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SERVICE_TOKEN", 'tok-"quoted"\\x-1234')
    monkeypatch.setenv("CACHE_URL", "redis://cache:hunter2pw@cache.example:6379/0")
    script = (
        "import json, os; t = os.environ['SERVICE_TOKEN']; u = os.environ['CACHE_URL']\n"
        "print(t); print(json.dumps(t)); print(json.dumps(json.dumps(t))); print(u)\n"
        "import sys; sys.stderr.write(json.dumps({'t': t}))"
    )
    child = run_child([sys.executable, "-c", script], b"", timeout=30)
    assert child.exit_code == 0
    assert b"tok-" not in child.stdout and b"hunter2pw" not in child.stdout and b"tok-" not in child.stderr
    assert child.stdout.count(b"${{ SERVICE_TOKEN }}") == 3 and b"redis://***redacted***@cache.example" in child.stdout
