"""``kill -9`` of evalstore during ``run``: the agents it started die with it (the agent, and what the
agent started in its process group), and ``run --resume`` refuses a workspace folder that a process
which escaped both (``setsid`` and a double fork) still works in.

Real processes throughout: the installed console script, a Python agent that starts a helper, SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from e2e_helpers import EVALSTORE, cli, ok_json, one_line_error, runs, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")

PY = sys.executable

# The agent starts a helper that keeps writing into the workspace, records both pids, and waits.
# With ESCAPE set, the helper leaves the agent's session and process group first (double fork + setsid).
AGENT = textwrap.dedent("""\
    import os, subprocess, sys, time
    from pathlib import Path
    home = Path(sys.argv[1])
    helper = "import os, sys, time\\n" \\
        "if os.environ.get('ESCAPE'):\\n" \\
        "    if os.fork(): os._exit(0)\\n" \\
        "    os.setsid()\\n" \\
        "    if os.fork(): os._exit(0)\\n" \\
        "open(sys.argv[1], 'w').write(str(os.getpid()))\\n" \\
        "while True:\\n" \\
        "    open('still-writing.txt', 'a').write('x')\\n" \\
        "    time.sleep(0.05)\\n"
    # pass_fds=None: the helper inherits what the agent inherited, as a shell's children do.
    subprocess.Popen([sys.executable, "-c", helper, str(home / "helper.pid")], close_fds=False)
    (home / "agent.pid").write_text(str(os.getpid()))
    if os.environ.get("ANSWER"):  # answer once the helper is running, and leave it behind
        while not (home / "helper.pid").exists():
            time.sleep(0.01)
        print("hi")
        sys.exit(0)
    time.sleep(120)
""")


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped does not count: it does nothing any more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def start_run(tmp_path: Path, *, escape: bool, answer: bool = False) -> tuple[subprocess.Popen[str], Path, str]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "agent.py").write_text(AGENT, encoding="utf-8")
    proj = tmp_path / "proj"
    (proj / ".agentv").mkdir(parents=True)
    target = {"name": "agent", "provider": "cli", "command": [PY, str(home / "agent.py"), str(home)]}
    (proj / ".agentv" / "targets.yaml").write_text(json.dumps({"targets": [target]}), encoding="utf-8")
    eval_file = proj / "suite.eval.yaml"
    eval_file.write_text(
        "name: kill\nexecution:\n  target: agent\ntests:\n"
        "  - {id: only, input: hi, criteria: c, assertions: [{type: contains, value: hi}]}\n",
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path / 'store.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("ESCAPE", "ANSWER")}
    env.update({"ESCAPE": "1"} if escape else {})
    env.update({"ANSWER": "1"} if answer else {})
    proc = subprocess.Popen(
        [str(EVALSTORE), "--db", db, "run", str(eval_file), "--workdir", str(tmp_path / "ws")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    wait_for(lambda: (home / "agent.pid").exists() and (home / "helper.pid").exists(), 60, "the agent and its helper")
    time.sleep(0.2)  # the pid files are written; let the writes finish
    return proc, home, db


def pids(home: Path) -> list[int]:
    return [int((home / name).read_text()) for name in ("agent.pid", "helper.pid")]


def kill_left_over(home: Path) -> None:
    for pid in pids(home):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_agent_and_the_processes_it_started_die_when_evalstore_is_killed(tmp_path: Path) -> None:
    proc, home, _ = start_run(tmp_path, escape=False)
    try:
        assert all(alive(pid) for pid in pids(home))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        gone = wait_for(lambda: not any(alive(pid) for pid in pids(home)), 10, "the agent and its helper to die")
        assert gone
        # Nothing writes into the workspace any more.
        written = tmp_path / "ws" / "only" / "still-writing.txt"
        size = written.stat().st_size
        time.sleep(0.3)
        assert written.stat().st_size == size
    finally:
        kill_left_over(home)


def test_resume_refuses_a_workspace_folder_a_process_of_the_killed_run_still_works_in(tmp_path: Path) -> None:
    proc, home, db = start_run(tmp_path, escape=True)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        agent, helper = pids(home)
        wait_for(lambda: not alive(agent), 10, "the agent to die")
        assert alive(helper)  # it left the agent's session: out of reach of both kills
        (run,) = runs(db)
        line = one_line_error(cli(db, "run", "--resume", run["run_id"], "--workdir", str(tmp_path / "ws")))
        assert f"workspace folder {tmp_path / 'ws'} is still in use" in line, line
        assert runs(db) == [run]  # nothing written

        os.kill(helper, signal.SIGKILL)
        wait_for(lambda: not alive(helper), 10, "the helper to die")
        (home / "agent.pid").unlink()
        (home / "helper.pid").unlink()
        # Once it is gone the resume goes ahead (and runs the agent again: kill it once it is under way).
        resumed = subprocess.Popen(
            [str(EVALSTORE), "--db", db, "run", "--resume", run["run_id"], "--workdir", str(tmp_path / "ws")],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: (home / "agent.pid").exists(), 60, "the resumed run to start the agent")
        resumed.send_signal(signal.SIGKILL)
        resumed.wait(timeout=10)
    finally:
        if (home / "agent.pid").exists() and (home / "helper.pid").exists():
            kill_left_over(home)
    assert ok_json(cli(db, "verify", "--json"))["ok"] is True


def test_a_process_the_agent_left_running_out_of_its_group_ends_with_the_call(tmp_path: Path) -> None:
    """The agent answers and exits, its helper having left its session (setsid and a double fork): the
    group's kill misses it, the tag in its environment does not. Nothing keeps writing in the workspace."""
    proc, home, db = start_run(tmp_path, escape=True, answer=True)
    try:
        assert proc.wait(timeout=120) in (0, 1)
        _, helper = pids(home)
        assert wait_for(lambda: not alive(helper), 10, "the helper to be killed with the call")
        (run,) = runs(db)
        assert run["status"] == "completed", run
    finally:
        kill_left_over(home)
